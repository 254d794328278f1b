"""`make demo` as a user sees it, and what it did: the example project through its Airflow DAG
(real Airflow with a throwaway home and SQLite, dbt, Spark and Delta) for three batches, run once.

`scripts/demo_airflow.py` does the driving in its own process: between intervals it appends the next
batch of every input's changelog (scripts/load_batch.py), then runs the DAG with `dag.test()` for
the next logical date. It writes every DAG run's task states and dbt test outcomes to a summary;
the tables are read back with delta-rs.

At default verbosity the output is the demo's own report (a line per model run and per batch, a
summary, where to look next): no ERROR, no Java stack trace, nothing from Spark's log4j, Py4J or
Airflow's internals, and at most LINE_BUDGET lines (README, "Output").
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import example_results
from test_dag import MODELS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BATCHES = 3  # as `make demo`
#: Lines `make demo` may print for three batches (README, "Output"): it prints 56, its command line included.
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
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`make demo` as a new user runs it (no Airflow, dbt or log settings of ours in the environment)."""
    local_dir = tmp_path_factory.mktemp("demo")
    summary = local_dir.parent / "demo_summary.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DBT_", "STREAMJOIN_LOG"))}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_airflow.py"), "--batches", str(BATCHES),
                           "--local-dir", str(local_dir), "--summary", str(summary)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    return {"returncode": done.returncode, "output": done.stdout, "local_dir": local_dir,
            "runs": json.loads(summary.read_text()) if summary.exists() else [],
            "models": local_dir / "state" / "models"}


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


def rows(path: Path) -> list[dict]:
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(str(path)) else []


def multiset(records: list[dict], drop: tuple[str, ...]) -> Counter:
    return Counter(tuple(sorted((k, v) for k, v in r.items() if k not in drop)) for r in records)


def test_every_dag_run_and_every_task_succeeds(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"][-8000:]
    for run in demo["runs"]:
        failed = {t: s for t, s in run["tasks"].items() if s != "success"}
        assert run["state"] == "success" and not failed, f"batch {run['batch']}: {failed}\n{demo['output']}"
        assert set(run["tasks"]) == MODELS | {"dbt_test"}
    assert demo["returncode"] == 0, demo["output"][-8000:]


def test_every_dbt_test_passes_after_every_run(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"][-8000:]
    for run in demo["runs"]:
        assert run["tests"] and set(run["tests"].values()) == {"pass"}, f"batch {run['batch']}: {run['tests']}"
        checked = {name for name in run["tests"] if name.startswith("streamjoin_matches_batch_")}
        assert len(checked) == len(MODELS), checked  # each result equals Spark's batch evaluation


def test_one_incremental_run_per_interval(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"][-8000:]
    assert set(demo["runs"][0]["runs"]) == MODELS and set(demo["runs"][0]["runs"].values()) == {1}
    for model in MODELS:
        log = rows(demo["models"] / model / "runs")
        ids = [run["runs"][model] for run in demo["runs"] if model in run["runs"]]
        assert ids == list(range(1, len(ids) + 1)) == sorted(r["run_id"] for r in log), model


@pytest.mark.parametrize("model", sorted(example_results.EXPECTED))
def test_results_after_each_batch(demo: dict[str, Any], model: str) -> None:
    """A model's changelog through its run of batch b (or its latest run before, if it had nothing to
    do) replays to the result worked out by hand for batch b."""
    changelog = example_results.rows(demo["models"] / model / "changelog")
    last_run = [max((run["runs"][model] for run in demo["runs"][:batch] if model in run["runs"]), default=0)
                for batch in range(1, BATCHES + 1)]
    got = [example_results.replayed(changelog, run_id) for run_id in last_run]
    assert got == [sorted(e, key=repr) for e in example_results.EXPECTED[model]]


def test_each_changelog_replays_to_its_result(demo: dict[str, Any]) -> None:
    for model in MODELS:
        changelog = rows(demo["models"] / model / "changelog")
        assert {r["_run_id"] for r in changelog} <= set(range(1, BATCHES + 1)), model
        replayed: Counter = Counter()
        for record, count in multiset(changelog, ("_run_id",)).items():
            kind = dict(record)["_row_kind"]
            row = tuple(item for item in record if item[0] != "_row_kind")
            replayed[row] += count if kind in ("+I", "+U") else -count
        result = multiset(rows(demo["models"] / model / "result"), ("_bucket",))
        assert {row: n for row, n in replayed.items() if n} == dict(result), model


def test_a_result_kept_as_a_change_data_feed_reads_as_its_changelog_run_by_run(demo: dict[str, Any]) -> None:
    """`orders_prices_left` has `change_data_feed=true`: delta-rs's CDF reader reads each run's version
    of its result as that run's changelog (`_change_type` for `_row_kind`)."""
    model = demo["models"] / "orders_prices_left"
    kinds = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}
    feed = DeltaTable(str(model / "result")).load_cdf(starting_version=0)
    by_version: dict[int, Counter] = {}
    for r in pa.table(feed.read_all()).to_pylist():
        row = tuple(sorted((k, v) for k, v in r.items() if not k.startswith("_")))
        by_version.setdefault(r["_commit_version"], Counter())[(kinds[r["_change_type"]], row)] += 1
    changelog = rows(model / "changelog")
    by_run = [Counter((r["_row_kind"], tuple(sorted((k, v) for k, v in r.items() if not k.startswith("_"))))
                      for r in changelog if r["_run_id"] == run) for run in range(1, BATCHES + 1)]
    assert all(by_run) and [by_version[v] for v in sorted(by_version)] == by_run  # other versions change no rows
