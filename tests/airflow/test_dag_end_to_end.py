"""The example DAG with real Airflow (throwaway home, SQLite), dbt, Spark and Delta, for two intervals.

`scripts/demo_airflow.py` (`make demo`) does the driving in its own process: between
intervals it appends the next batch of every input's changelog (scripts/load_batch.py),
then runs the DAG with `dag.test()` for the next logical date. It writes every DAG run's
task states and dbt test outcomes to a summary; the tables are read back with delta-rs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from test_dag import MODELS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BATCHES = 2  # the first run and one incremental run; tests/dbt checks the third batch's results


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    local_dir = tmp_path_factory.mktemp("airflow_demo")
    summary = local_dir.parent / "airflow_demo_summary.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_airflow.py"), "--batches", str(BATCHES),
                           "--local-dir", str(local_dir), "--summary", str(summary)],
                          env=env, capture_output=True, text=True, timeout=3600)
    return {"returncode": done.returncode, "output": done.stdout[-8000:] + done.stderr[-4000:],
            "runs": json.loads(summary.read_text()) if summary.exists() else [],
            "models": local_dir / "state" / "models"}


def rows(path: Path) -> list[dict]:
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(str(path)) else []


def multiset(records: list[dict], drop: tuple[str, ...]) -> Counter:
    return Counter(tuple(sorted((k, v) for k, v in r.items() if k not in drop)) for r in records)


def test_every_dag_run_and_every_task_succeeds(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"]
    for run in demo["runs"]:
        failed = {t: s for t, s in run["tasks"].items() if s != "success"}
        assert run["state"] == "success" and not failed, f"batch {run['batch']}: {failed}\n{demo['output']}"
        assert set(run["tasks"]) == MODELS | {"dbt_test"}
    assert demo["returncode"] == 0, demo["output"]


def test_every_dbt_test_passes_after_every_run(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"]
    for run in demo["runs"]:
        assert run["tests"] and set(run["tests"].values()) == {"pass"}, f"batch {run['batch']}: {run['tests']}"
        checked = {name for name in run["tests"] if name.startswith("streamjoin_matches_batch_")}
        assert len(checked) == len(MODELS), checked  # each result equals Spark's batch evaluation


def test_one_incremental_run_per_interval(demo: dict[str, Any]) -> None:
    assert len(demo["runs"]) == BATCHES, demo["output"]
    assert set(demo["runs"][0]["runs"]) == MODELS and set(demo["runs"][0]["runs"].values()) == {1}
    for model in MODELS:
        log = rows(demo["models"] / model / "runs")
        ids = [run["runs"][model] for run in demo["runs"] if model in run["runs"]]
        assert ids == list(range(1, len(ids) + 1)) == sorted(r["run_id"] for r in log), model


def test_results_follow_the_batches(demo: dict[str, Any]) -> None:
    result = rows(demo["models"] / "orders_prices_left" / "result")
    assert sorted((r["order_id"], r["product_id"], r["qty"], r["price_cents"]) for r in result) == sorted(
        [(2, 11, 3, 2500), (3, 12, 5, None), (4, 10, 1, 899)], key=repr)  # seeds/changelogs, after batch 2


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
