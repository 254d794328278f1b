"""Airflow tests: a throwaway Airflow home (set before Airflow is first imported) and a local dir for the example.

Loading the example's DAG file parses the dbt project when its manifest is missing (dbt deps +
dbt parse, 6 s on an idle machine, longer under CI load): the DagBag import timeout is raised
for that, as a deployment would (dags/README.md).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="streamjoin-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "false")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT", "300")


@pytest.fixture(scope="session")
def example_local_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty local dir for the example project: the first DagBag load parses the project into it."""
    return tmp_path_factory.mktemp("example_local_dir")
