"""Airflow tests: a throwaway Airflow home (set before Airflow is first imported) and the example's manifest."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="streamjoin-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "false")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))


@pytest.fixture(scope="session")
def example_local_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local dir for the example project with its manifest parsed (`dbt parse`, no Spark)."""
    local_dir = tmp_path_factory.mktemp("example_parsed")
    env = {**os.environ, "STREAMJOIN_LOCAL_DIR": str(local_dir), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run([str(Path(sys.executable).with_name("dbt")), "parse", "--project-dir", str(REPO),
                           "--profiles-dir", str(REPO), "--target-path", str(local_dir / "target"),
                           "--log-path", str(local_dir / "logs")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return local_dir
