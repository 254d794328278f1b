"""`make demo` as a user sees it: the example project through its Airflow DAG for three batches.

At default verbosity the output is the demo's own report (a line per model run and per batch, a
summary, where to look next): no ERROR, no Java stack trace, nothing from Spark's log4j, Py4J or
Airflow's internals, and at most LINE_BUDGET lines (README, "Output").
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BATCHES = 3  # as `make demo`
#: Lines `make demo` may print for three batches (README, "Output"): it prints about 45.
LINE_BUDGET = 60
#: Lines that must never reach a user: errors, Java stack traces, log4j's and Airflow's log lines.
FORBIDDEN = {
    "an ERROR": re.compile(r"ERROR"),
    "a Java stack trace": re.compile(r"^\tat org\.|Exception in thread"),
    "a Spark log line": re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|ERROR|DEBUG) "),
    "an Airflow or Py4J log line": re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z \[\w+\s*\]"),
}


def problems(output: str, *, budget: int = LINE_BUDGET) -> list[str]:
    """What is wrong with the demo's output, one entry per kind of problem (first offending line)."""
    lines = output.splitlines()
    found = [f"{len(lines)} lines, more than the budget of {budget}"] if len(lines) > budget else []
    for what, pattern in FORBIDDEN.items():
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            found.append(f"{len(hits)} lines with {what}, e.g. {hits[0]!r}")
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    local_dir = tmp_path_factory.mktemp("demo_output")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DBT_", "STREAMJOIN_LOG"))}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_airflow.py"), "--batches", str(BATCHES),
                           "--local-dir", str(local_dir)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    return {"returncode": done.returncode, "output": done.stdout, "local_dir": local_dir}


def test_the_demo_prints_what_a_user_needs_and_nothing_else(demo: dict) -> None:
    assert demo["returncode"] == 0, demo["output"][-8000:]
    assert problems(demo["output"]) == [], demo["output"]


def test_the_demo_ends_with_a_summary_per_batch_and_where_to_look(demo: dict) -> None:
    lines = demo["output"].splitlines()
    start = lines.index(next(line for line in lines if line.startswith("Summary (")))
    rows = [line.split() for line in lines[start + 2:start + 2 + BATCHES]]
    assert [row[:2] for row in rows] == [[str(b), "success"] for b in range(1, BATCHES + 1)], lines[start:]
    models = re.search(r"(\d+) streaming_join models", lines[start]).group(1)
    assert rows[0][2] == models  # every model runs on the first batch
    assert all(re.fullmatch(r"(\d+)/\1", row[5]) for row in rows)  # every dbt test passed
    state = demo["local_dir"] / "state"
    assert f"  python -m streamjoin status {state}   # recent runs and table sizes" in lines
    assert (demo["local_dir"] / "logs" / "spark.log").stat().st_size > 0  # Spark's log went to its file


def test_the_checks_flag_the_noise_the_demo_printed_before() -> None:
    """Lines `make demo` printed before its output was made quiet: each check catches its kind."""
    noisy = "\n".join([
        "26/11/24 07:30:05 WARN MapPartitionsRDD: RDD 3 was locally checkpointed, its lineage has been truncated",
        "26/11/24 07:30:07 ERROR DAGScheduler: Failed to update accumulator 1201 (Unknown class) for task 2",
        "org.apache.spark.SparkException: attempted to access non-existent accumulator 1201",
        "\tat org.apache.spark.scheduler.DAGScheduler.updateAccumulators(DAGScheduler.scala:1890)",
        "2026-11-24T07:29:55.496974Z [info     ] Closing down clientserver connection [py4j.clientserver]",
    ])
    assert [p.split(",")[0] for p in problems(noisy, budget=4)] == [
        "5 lines", "1 lines with an ERROR", "1 lines with a Java stack trace", "2 lines with a Spark log line",
        "1 lines with an Airflow or Py4J log line"]
