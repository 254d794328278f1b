"""The example DAG under Airflow's LocalExecutor: each task a process of its own, two at a time,
each starting its own dbt and SparkSession against the project's shared catalog service.

`scripts/demo_airflow.py --executor local --select ...` runs one batch that way (with an Airflow API
server on 127.0.0.1, stopped by PID), of four of the example's models (three of them read `orders`;
each task process costs a dbt and a Spark start, and the in-process demo, test_dag_end_to_end.py,
runs every model). Models' tasks must overlap in time, and every task, every model's run and every
dbt test of them must succeed with the hand-worked results: parallel processes of one project all
commit (the embedded catalog is no longer one process's Derby database).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

import example_results
from test_dag import MODELS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SELECTED = {"orders_prices_left", "orders_prices_full", "stock_orders", "invoices_in_eur"}


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    local_dir = tmp_path_factory.mktemp("local-executor")
    summary = local_dir.parent / "local_executor_summary.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DBT_", "STREAMJOIN_LOG"))}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo_airflow.py"), "--batches", "1",
                           "--executor", "local", "--local-dir", str(local_dir), "--summary", str(summary),
                           "--select", *sorted(SELECTED)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    runs = json.loads(summary.read_text()) if summary.exists() else []
    assert done.returncode == 0 and len(runs) == 1, done.stdout[-8000:]
    return {"run": runs[0], "models": local_dir / "state" / "models", "output": done.stdout}


def test_every_task_and_every_dbt_test_succeeds(batch: dict[str, Any]) -> None:
    run = batch["run"]
    assert SELECTED < MODELS
    assert run["state"] == "success" and set(run["tasks"]) == SELECTED | {"dbt_test"}, run
    assert set(run["tasks"].values()) == {"success"}, run["tasks"]
    assert run["tests"] and set(run["tests"].values()) == {"pass"}, run["tests"]
    # the selected models' tests alone: one streamjoin.matches_batch test each
    assert len([t for t in run["tests"] if t.startswith("streamjoin_matches_batch_")]) == len(SELECTED), run["tests"]
    assert set(run["runs"]) == SELECTED and set(run["runs"].values()) == {1}


def test_model_tasks_ran_in_parallel_processes(batch: dict[str, Any]) -> None:
    spans = {task: span for task, span in batch["run"]["spans"].items() if task in SELECTED}
    assert set(spans) == SELECTED
    overlapping = [(a, b) for a, b in combinations(sorted(spans), 2)
                   if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]]
    assert overlapping, spans


@pytest.mark.parametrize("model", sorted(SELECTED))
def test_results_are_the_hand_worked_ones(batch: dict[str, Any], model: str) -> None:
    got = example_results.rows(batch["models"] / model / "result")
    assert got == sorted(example_results.EXPECTED[model][0], key=repr)
