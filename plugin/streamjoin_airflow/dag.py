"""Turn a :class:`~streamjoin_airflow.plan.RunPlan` into Airflow DAGs.

- :func:`incremental_dag`: one incremental run of every planned model per interval, in
  dependency order, then the dbt tests over them. Runs are sequential (``max_active_runs=1``)
  and missed intervals are not caught up: a run consumes everything that arrived since the
  last one. Each model task's outlets are its result and changelog tables as Assets.
- :func:`full_refresh_dag`: a manual rebuild of every planned model from its inputs
  (``dbt run --full-refresh``), refused while the incremental DAG has a run active.

Two runs of one model that still overlap (e.g. a manual ``dbt run``) cannot both commit:
the loser's first commit fails with ``streamjoin.ConcurrentRunError`` and writes nothing;
its retry then picks up where the winner left off.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import partial
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from streamjoin.errors import ConfigError

from . import invocation
from .plan import DbtProject, ModelStep, RunPlan

TEST_TASK = "dbt_test"
GUARD_TASK = "refuse_while_incremental_runs"
ACTIVE_STATES = ["queued", "running"]


@dataclass(frozen=True)
class TaskPolicy:
    """Retries with exponential back-off and a timeout, for every task."""

    retries: int = 2
    retry_delay: dt.timedelta = dt.timedelta(seconds=30)
    max_retry_delay: dt.timedelta = dt.timedelta(minutes=10)
    timeout: dt.timedelta = dt.timedelta(minutes=30)

    def __post_init__(self) -> None:
        problems = []
        if self.retries < 0:
            problems.append(f"retries: {self.retries} is negative; use 0 for no retries")
        if self.retry_delay > self.max_retry_delay:
            problems.append(f"retry_delay {self.retry_delay} is longer than max_retry_delay {self.max_retry_delay}; "
                            "raise max_retry_delay or shorten retry_delay")
        if self.timeout <= dt.timedelta(0):
            problems.append(f"timeout: {self.timeout} must be positive")
        if problems:
            raise ConfigError(problems)

    def default_args(self) -> dict[str, Any]:
        return {"retries": self.retries, "retry_delay": self.retry_delay, "retry_exponential_backoff": True,
                "max_retry_delay": self.max_retry_delay, "execution_timeout": self.timeout}


def assets(plan: RunPlan, model: ModelStep) -> list[Asset]:
    """The model's result and changelog tables as Assets (downstream DAGs can be scheduled on them)."""
    return [Asset(name=f"{plan.project}.{model.name}.result", uri=model.result_uri),
            Asset(name=f"{plan.project}.{model.name}.changelog", uri=model.changelog_uri)]


def run_model(project: DbtProject, model: str, full_refresh: bool = False) -> dict[str, Any]:
    """One run of `model` (a task's callable); the run's report as the task's XCom."""
    outcome = invocation.invoke(project, "run", select=[model], full_refresh=full_refresh)
    node = outcome.nodes.get(model)
    if not outcome.success or node is None:
        why = node.message if node else outcome.error or "dbt selected no such model"
        raise AirflowException(f"dbt run of model '{model}' failed: {why}")
    return {"model": model, "status": node.status, "message": node.message}


def run_tests(project: DbtProject, models: list[str]) -> dict[str, str]:
    """The dbt tests of `models` (a task's callable); fails without retry when a test fails."""
    outcome = invocation.invoke(project, "test", select=models)
    if outcome.error and not outcome.nodes:
        raise AirflowException(f"dbt test could not run: {outcome.error}")
    if outcome.failures:
        listed = "; ".join(f"{n}: {o.status} ({o.message})" for n, o in sorted(outcome.failures.items()))
        raise AirflowFailException(f"{len(outcome.failures)} dbt test(s) did not pass: {listed}")
    return {name: o.status for name, o in outcome.nodes.items()}


def refuse_while_active(guarded_dag_id: str, **context: Any) -> None:
    """Fail (without retry) when `guarded_dag_id` has a queued or running run."""
    active = context["ti"].get_dr_count(dag_id=guarded_dag_id, states=ACTIVE_STATES)
    if active:
        raise AirflowFailException(
            f"full refresh refused: DAG '{guarded_dag_id}' has {active} active run(s); wait for it to finish "
            "(or pause that DAG) and trigger the full refresh again")


def _model_tasks(plan: RunPlan, project: DbtProject, *, full_refresh: bool) -> dict[str, PythonOperator]:
    tasks = {}
    for model in plan.models:
        tasks[model.name] = PythonOperator(
            task_id=model.name, outlets=assets(plan, model),
            python_callable=partial(run_model, project, model.name, full_refresh),
            doc_md=f"`dbt run{' --full-refresh' if full_refresh else ''} --select {model.name}`")
        for parent in model.upstream:
            tasks[parent] >> tasks[model.name]
    tests = PythonOperator(task_id=TEST_TASK, python_callable=partial(run_tests, project, plan.model_names),
                           doc_md=f"`dbt test` of: {', '.join(plan.model_names)}")
    list(tasks.values()) >> tests
    return tasks


def incremental_dag(plan: RunPlan, project: DbtProject, *, dag_id: str, schedule: Any, start_date: dt.datetime,
                    policy: TaskPolicy = TaskPolicy(), catchup: bool = False, **dag_kwargs: Any) -> DAG:
    """A DAG running every planned model once per interval, then its tests."""
    with DAG(dag_id, schedule=schedule, start_date=start_date, catchup=catchup, max_active_runs=1,
             default_args=policy.default_args(), doc_md=__doc__, **dag_kwargs) as dag:
        _model_tasks(plan, project, full_refresh=False)
    return dag


def full_refresh_dag(plan: RunPlan, project: DbtProject, *, dag_id: str, guards: str, start_date: dt.datetime,
                     policy: TaskPolicy = TaskPolicy(), **dag_kwargs: Any) -> DAG:
    """A manually triggered DAG rebuilding every planned model; refused while DAG `guards` runs."""
    with DAG(dag_id, schedule=None, start_date=start_date, catchup=False, max_active_runs=1,
             default_args=policy.default_args(), doc_md=__doc__, **dag_kwargs) as dag:
        guard = PythonOperator(task_id=GUARD_TASK, python_callable=partial(refuse_while_active, guards), retries=0)
        tasks = _model_tasks(plan, project, full_refresh=True)
        guard >> [tasks[m.name] for m in plan.models if not m.upstream]
    return dag
