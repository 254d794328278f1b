"""The example project's DAGs: they load, and their shape is what the schedule relies on."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from streamjoin import ConfigError
from streamjoin_airflow.dag import GUARD_TASK, TEST_TASK, TaskPolicy

REPO = Path(__file__).resolve().parents[2]
MODELS = {"orders_prices_inner", "orders_prices_left", "orders_prices_full", "stock_orders", "students_scores",
          "orders_shipped_within_4h", "order_facts", "customer_orders", "orders_shipped_same_shift",
          "invoices_in_eur", "invoices_latest_rate"}


@pytest.fixture(scope="module")
def dagbag(example_local_dir: Path):
    from airflow.dag_processing.dagbag import DagBag

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMJOIN_LOCAL_DIR", str(example_local_dir))
        return DagBag(dag_folder=str(REPO / "dags"))


def test_the_dagbag_loads_with_no_import_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == {"streamjoin_example", "streamjoin_example_full_refresh"}


def test_one_task_per_streaming_join_model_in_dependency_order_then_the_tests(dagbag) -> None:
    dag = dagbag.dags["streamjoin_example"]
    assert set(dag.task_dict) == MODELS | {TEST_TASK}
    assert dag.task_dict["customer_orders"].upstream_task_ids == {"orders_prices_inner"}
    assert all(not dag.task_dict[m].upstream_task_ids for m in MODELS - {"customer_orders"})
    assert dag.task_dict[TEST_TASK].upstream_task_ids == MODELS


def test_runs_are_sequential_without_catchup_with_retries_backoff_and_timeouts(dagbag) -> None:
    dag = dagbag.dags["streamjoin_example"]
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert dag.schedule == dt.timedelta(minutes=15)
    for task in dag.tasks:
        assert task.retries >= 1 and task.retry_exponential_backoff, task.task_id
        assert task.execution_timeout and task.execution_timeout > dt.timedelta(0), task.task_id
        assert task.max_retry_delay, task.task_id


def test_each_model_task_publishes_its_result_and_changelog_as_assets(dagbag, example_local_dir: Path) -> None:
    dag = dagbag.dags["streamjoin_example"]
    for name in MODELS:
        outlets = {(a.name, a.uri) for a in dag.task_dict[name].outlets}
        home = (example_local_dir / "state" / "models" / name).resolve()
        assert outlets == {(f"streamjoin_example.{name}.result", (home / "result").as_uri()),
                           (f"streamjoin_example.{name}.changelog", (home / "changelog").as_uri())}
    assert not dag.task_dict[TEST_TASK].outlets


def test_full_refresh_is_manual_guarded_and_rebuilds_every_model(dagbag) -> None:
    dag = dagbag.dags["streamjoin_example_full_refresh"]
    assert dag.schedule is None and dag.max_active_runs == 1
    assert set(dag.task_dict) == MODELS | {TEST_TASK, GUARD_TASK}
    assert dag.task_dict[GUARD_TASK].retries == 0
    assert dag.task_dict[GUARD_TASK].downstream_task_ids == MODELS - {"customer_orders"}
    assert "--full-refresh" in dag.task_dict["orders_prices_inner"].doc_md


def test_task_policy_collects_every_problem() -> None:
    with pytest.raises(ConfigError) as error:
        TaskPolicy(retries=-1, retry_delay=dt.timedelta(hours=1), max_retry_delay=dt.timedelta(minutes=1),
                   timeout=dt.timedelta(0))
    assert len(error.value.problems) == 3


def test_a_failed_model_run_is_retried_and_a_failed_test_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from streamjoin_airflow import dag, invocation

    lost = ("ConcurrentRunError: another run of the same model committed .../m/state/l first; "
            "this run wrote nothing there and stops: rerun it to pick up where the other left off")
    outcomes = {"run": invocation.DbtOutcome(("run",), {"m": invocation.NodeOutcome("error", lost)}),
                "test": invocation.DbtOutcome(("test",), {"unique_m_id": invocation.NodeOutcome("fail", "Got 1 result"),
                                                          "not_null_m_id": invocation.NodeOutcome("pass", None)})}
    monkeypatch.setattr(invocation, "invoke", lambda project, command, **_: outcomes[command])
    with pytest.raises(AirflowException, match="dbt run of model 'm' failed: ConcurrentRunError: another run") as error:
        dag.run_model(None, "m")
    assert not isinstance(error.value, AirflowFailException)
    with pytest.raises(AirflowFailException, match=r"1 dbt test\(s\) did not pass: unique_m_id: fail \(Got 1 result\)"):
        dag.run_tests(None, ["m"])
