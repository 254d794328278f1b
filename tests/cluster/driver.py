"""A SparkSession on a standalone cluster, driven by the cluster tests over stdin and stdout.

    STREAMJOIN_SPARK_MASTER=spark://127.0.0.1:P python tests/cluster/driver.py UI_PORT JAVA_OPTIONS

A process has one SparkSession, and the test processes' is local, so the cluster's lives here.
It prints `@@ {"app_id": ...}` once started; then each stdin line is a JSON command
(`{"op": "conformance", ...}`, see `COMMANDS`) and each answer one stdout line `@@ <json>`.
The session's web UI (and its REST API) listens on 127.0.0.1:UI_PORT; its driver's and executors' JVMs
take JAVA_OPTIONS.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import traceback
from typing import Any, Callable

from pyspark.sql import SparkSession

from streamjoin import conformance, run_once
from streamjoin.conformance import CaseRunner
from streamjoin.processes import HOST
from streamjoin.session import local_session
from streamjoin.storage import filesystem

PREFIX = "@@ "


def orders_and_payments(rows: int) -> tuple[dict[str, Any], dict[str, list]]:
    """A LEFT JOIN case and one run's changes: `rows` orders, a payment for every other one."""
    case = {
        "name": "orders_payments",
        "inputs": {"orders": {"columns": [["order_id", "bigint"], ["customer", "bigint"], ["amount", "bigint"]],
                              "unique_key": ["order_id"]},
                   "payments": {"columns": [["order_id", "bigint"], ["paid", "bigint"]]}},
        "sql": "SELECT o.order_id, o.customer, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.order_id = p.order_id",
        "runs": [],
    }
    changes = {"orders": [["+I", [i, i % 977, i * 7 % 10007]] for i in range(rows)],
               "payments": [["+I", [i, i * 3]] for i in range(0, rows, 2)]}
    return case, changes


def run_conformance(spark: SparkSession, cases: list[str]) -> dict[str, Any]:
    """`python -m streamjoin.conformance CASES` on this session: its exit code and per-case outcomes."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = conformance.main(cases)  # its local_session() returns this process's session
    return {"exit": code, "outcomes": [json.loads(line) for line in printed.getvalue().splitlines() if line]}


def prepare(spark: SparkSession, root: str, rows: int) -> dict[str, Any]:
    """Write the inputs of `orders_and_payments(rows)` under `root`."""
    case, changes = orders_and_payments(rows)
    CaseRunner(spark, case, root).append_changes(0, changes)
    return {}


def run(spark: SparkSession, root: str, rows: int) -> dict[str, Any]:
    """One incremental run of the model whose inputs `prepare` wrote; when it ended."""
    case, _ = orders_and_payments(rows)
    runner = CaseRunner(spark, case, root)
    report = run_once(spark, runner.plan, runner.tables)
    return {"status": report.status, "run_id": report.run_id, "rows_out": report.rows_out,
            "seconds": report.seconds, "ended": time.time(), "tables": runner.tables.home}


def storage(spark: SparkSession, prefix: str, options: dict[str, str]) -> dict[str, Any]:
    """Register storage options for the locations under `prefix` (see `streamjoin.storage.filesystem`)."""
    filesystem.register(prefix, options)
    return {}


COMMANDS: dict[str, Callable[..., dict[str, Any]]] = {
    "conformance": run_conformance, "prepare": prepare, "run": run, "storage": storage}


def reply(message: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(message, default=str) + "\n")
    sys.stdout.flush()


def main() -> int:
    master = os.environ["STREAMJOIN_SPARK_MASTER"]
    spark = local_session(master=master, app_name="streamjoin-cluster-tests", conf={
        "spark.ui.enabled": "true", "spark.ui.port": sys.argv[1],
        "spark.driver.host": HOST, "spark.driver.bindAddress": HOST,
        "spark.driver.extraJavaOptions": sys.argv[2], "spark.executor.extraJavaOptions": sys.argv[2]})
    reply({"app_id": spark.sparkContext.applicationId, "master": spark.sparkContext.master})
    for line in sys.stdin:
        command = json.loads(line)
        try:
            reply({"ok": True, **COMMANDS[command.pop("op")](spark, **command)})
        except Exception:  # the test reports the driver's traceback
            reply({"ok": False, "error": traceback.format_exc()})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
