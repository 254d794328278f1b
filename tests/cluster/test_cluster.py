"""streamjoin on a real standalone Spark cluster: the conformance cases pass, the workers' executors do
the work, a run survives the loss of an executor, and a model whose tables live in an object store runs
there as on a local disk."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from streamjoin.local_cluster import LocalCluster, get_json
from streamjoin.storage import delta_log

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ALL_CASES = sorted((Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cases").glob("*.json"))
#: One case per operator and change pattern (24 of the shared cases' 124 runs), to keep this module within
#: its CI budget; STREAMJOIN_CLUSTER_CASES=all runs every shared case on the cluster.
REPRESENTATIVE = ("flink-regular-itcase-inner-join-same-record", "flink-regular-itcase-left-join-bigger-left",
                  "flink-regular-minibatch-full-right-arrives-first-no-minibatch", "flink-semi-itcase-join",
                  "flink-anti-itcase-join", "flink-interval-itcase-inner-is-not-distinct-from",
                  "seed-interval-left-join-padding", "seed-multi-join-left-then-inner",
                  "seed-duplicate-rows-and-retraction")
CASES = ALL_CASES if os.environ.get("STREAMJOIN_CLUSTER_CASES") == "all" else \
    [p for p in ALL_CASES if p.stem in REPRESENTATIVE]
#: Orders of the run an executor is killed in: several seconds of tasks on two 1-core executors.
ROWS = 200_000
#: Orders of the object-store run (its point is where the files are, not its size)
SMALL_ROWS = 2_000


@pytest.fixture(scope="module")
def conformance(driver) -> dict[str, Any]:
    """`python -m streamjoin.conformance` over `CASES`, on the cluster's session."""
    assert len(CASES) in (len(ALL_CASES), len(REPRESENTATIVE)), f"shared cases missing from {ALL_CASES}"
    return driver.call("conformance", cases=[str(p) for p in CASES], timeout=600)


def test_the_conformance_cases_pass_on_the_cluster(conformance):
    failed = {o["case"]: o["error"] for o in conformance["outcomes"] if not o["ok"]}
    assert not failed
    assert len(conformance["outcomes"]) == len(CASES) and conformance["exit"] == 0


def test_both_workers_are_alive_and_their_executors_ran_tasks(cluster: LocalCluster, driver, conformance):
    status = cluster.status()
    assert status["status"] == "ALIVE" and status["aliveworkers"] == 2
    assert [app["cores"] for app in status["activeapps"] if app["id"] == driver.app_id] == [2]
    executors = driver.executors()
    for worker in cluster.alive_workers():
        ours = [str(e["id"]) for e in get_json(f"{worker['webuiaddress']}/json/")["executors"]
                if e["appid"] == driver.app_id]
        assert ours, f"no executor of {driver.app_id} on worker {worker['id']}"
        assert all(executors[e]["completedTasks"] > 0 for e in ours), {e: executors[e] for e in ours}


def test_a_run_commits_despite_a_killed_executor_with_the_results_of_an_undisturbed_run(
        cluster: LocalCluster, driver, tmp_path: Path):
    calm, disturbed = str(tmp_path / "calm"), str(tmp_path / "disturbed")
    for root in (calm, disturbed):
        driver.call("prepare", root=root, rows=ROWS, timeout=120)
    expected = driver.call("run", root=calm, rows=ROWS, timeout=180)
    assert expected["status"] == "committed"

    done_before = {e: x["completedTasks"] for e, x in driver.executors().items() if x["isActive"]}
    running = driver.submit("run", root=disturbed, rows=ROWS, timeout=180)
    victim = _first_executor_to_complete_a_task(driver, done_before)
    assert not running.done(), "the run ended before an executor could be killed: give it more rows"
    os.kill(cluster.executor_pids(driver.app_id)[victim], signal.SIGKILL)
    killed_at = time.time()
    answer = running.result(200)
    assert answer["ok"], answer["error"]
    assert answer["status"] == "committed" and answer["ended"] > killed_at

    lost = driver.executors()[victim]
    assert not lost["isActive"], lost  # Spark saw the executor die while the run was under way
    for table in ("result", "changelog"):
        assert _rows(Path(answer["tables"], table)).equals(_rows(Path(expected["tables"], table))), table
    assert answer["rows_out"] == expected["rows_out"]
    runs = DeltaTable(str(Path(answer["tables"], "runs"))).to_pyarrow_table().to_pylist()
    assert [json.loads(r["metrics"])["master"] for r in runs] == [cluster.master_url]
    assert not list(tmp_path.rglob("*.crc")), "executors wrote Hadoop checksum files"


def test_a_model_on_an_object_store_runs_on_the_cluster_as_on_a_local_disk(cluster: LocalCluster, driver, s3_lake,
                                                                              tmp_path: Path):
    """The driver registers the bucket's storage options; the executors on the workers write and read
    the model's files in the bucket with the options each task carries."""
    driver.call("storage", prefix=s3_lake.uri, options=s3_lake.options, timeout=30)
    remote, local = f"{s3_lake.uri}/cluster-{tmp_path.name}", str(tmp_path / "local")
    answers = {}
    for root in (remote, local):
        driver.call("prepare", root=root, rows=SMALL_ROWS, timeout=120)
        answers[root] = driver.call("run", root=root, rows=SMALL_ROWS, timeout=180)
    assert answers[remote]["status"] == "committed" and answers[remote]["tables"].startswith("s3://")
    assert answers[remote]["rows_out"] == answers[local]["rows_out"] and answers[remote]["rows_out"]["+"] == SMALL_ROWS
    for table in ("result", "changelog"):
        assert _rows(f"{answers[remote]['tables']}/{table}").equals(_rows(Path(answers[local]["tables"], table))), table


def _first_executor_to_complete_a_task(driver, done_before: dict[str, int], timeout: float = 120) -> str:
    """The first executor to complete a task after `done_before` was taken."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for executor, record in driver.executors().items():
            if record["isActive"] and record["completedTasks"] > done_before.get(executor, 0):
                return executor
        time.sleep(0.1)
    raise AssertionError(f"no executor completed a task within {timeout}s")


def _rows(table: Path | str) -> pa.Table:
    """A Delta table's rows in a canonical order (without the partition column, which follows the rows)."""
    data = delta_log.table(str(table)).to_pyarrow_table()
    data = data.drop_columns([c for c in data.column_names if c == "_bucket"])
    return data.sort_by([(c, "ascending") for c in data.column_names])
