"""Airflow DAGs for a dbt project's streaming joins: plan first (plain data), Airflow second.

    project = DbtProject(Path("/srv/shop"), state_root="/srv/shop/.streamjoin/state")
    plan = load_plan(project)                    # dbt's manifest, parsed when missing or stale
    dag = incremental_dag(plan, project, dag_id="shop", schedule="*/15 * * * *", start_date=...)
"""
from __future__ import annotations

from .plan import DbtProject, ModelStep, RunPlan, build_plan, load_plan

__all__ = ["DbtProject", "ModelStep", "RunPlan", "build_plan", "load_plan"]
