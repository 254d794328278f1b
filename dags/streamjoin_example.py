"""The example project's DAGs: its streaming joins every 15 minutes, and a manual full refresh.

Glue only (see streamjoin_airflow). The project is example/; its state is where its profile
puts it: $STREAMJOIN_LOCAL_DIR (default example/.streamjoin). dbt's manifest is
<local_dir>/target/manifest.json, parsed when this file loads if it is missing or stale (the DAG reads
its own copy of it, streamjoin_manifest.json, which dbt runs of its tasks do not rewrite).
$STREAMJOIN_SELECT (model names or tag:<tag>, space-separated) limits the DAGs to those models.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from streamjoin_airflow import DbtProject, load_plan
from streamjoin_airflow.dag import full_refresh_dag, incremental_dag

PROJECT_DIR = Path(__file__).resolve().parent.parent / "example"
LOCAL_DIR = Path(os.environ.get("STREAMJOIN_LOCAL_DIR", PROJECT_DIR / ".streamjoin")).resolve()
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

project = DbtProject(PROJECT_DIR, state_root=str(LOCAL_DIR / "state"), target_path=LOCAL_DIR / "target",
                     env={"STREAMJOIN_LOCAL_DIR": str(LOCAL_DIR)})
plan = load_plan(project, select=os.environ.get("STREAMJOIN_SELECT", "").split())

streamjoin_example = incremental_dag(plan, project, dag_id="streamjoin_example", schedule=dt.timedelta(minutes=15),
                                     start_date=START, tags=["streamjoin"])
streamjoin_example_full_refresh = full_refresh_dag(plan, project, dag_id="streamjoin_example_full_refresh",
                                                   guards="streamjoin_example", start_date=START, tags=["streamjoin"])
