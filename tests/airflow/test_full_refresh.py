"""The manual full refresh is refused while the incremental DAG has a run active (real Airflow, SQLite).

The model and test tasks are marked successful instead of run (no dbt, no Spark here): what
is tested is the guard in front of them.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from streamjoin_airflow.dag import ACTIVE_STATES, GUARD_TASK, refuse_while_active

NOT_THE_GUARD = f"(?!{GUARD_TASK}$).*"  # fullmatch()ed against task ids
DAY = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


class CountingTI:
    def __init__(self, active: int) -> None:
        self.active = active

    def get_dr_count(self, *, dag_id: str, states: list[str]) -> int:
        assert states == ACTIVE_STATES
        return self.active if dag_id == "incremental" else 0


def test_the_guard_names_the_active_dag_and_the_fix() -> None:
    refuse_while_active("incremental", ti=CountingTI(0))
    with pytest.raises(AirflowFailException, match="full refresh refused: DAG 'incremental' has 1 active run.*wait"):
        refuse_while_active("incremental", ti=CountingTI(1))


@pytest.fixture(scope="module")
def refresh_dag(example_local_dir: Path):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db

    db.initdb()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMJOIN_LOCAL_DIR", str(example_local_dir))  # dag.test() parses dags/ too
        bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags"))
        yield bag.dags["streamjoin_example_full_refresh"]


def states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_full_refresh_runs_when_idle_and_is_refused_while_a_run_is_active(refresh_dag) -> None:
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    idle = refresh_dag.test(logical_date=DAY, mark_success_pattern=NOT_THE_GUARD)
    assert str(idle.state) == "success" and set(states(idle).values()) == {"success"}

    session = settings.Session()
    session.add(DagRun(dag_id="streamjoin_example", run_id="still_running", run_type=DagRunType.SCHEDULED,
                       logical_date=DAY, run_after=DAY, state=DagRunState.RUNNING,
                       triggered_by=DagRunTriggeredByType.TIMETABLE))
    session.commit()
    refused = refresh_dag.test(logical_date=DAY + dt.timedelta(days=1), mark_success_pattern=NOT_THE_GUARD)
    assert str(refused.state) == "failed"
    task_states = states(refused)
    assert task_states.pop(GUARD_TASK) == "failed"
    assert set(task_states.values()) == {"upstream_failed"}  # no model was touched
