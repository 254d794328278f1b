"""`dbt run` then `dbt test`, each in its own process, on a `type: streamjoin` profile.

One project (copied from fixtures/) holds a SQL table model, Python models built from it
with `dbt.ref`, and a Python model that raises. The two dbt processes each start their
own local SparkSession (~10-30 s each), so the project is built once per module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict

import pyarrow.parquet as pq
import pytest

from jvm_options import SHORT_LIVED

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
PROJECT = "streamjoin_adapter_fixture"


@dataclass(frozen=True)
class Invocation:
    """One dbt process: its exit code, console output and run_results by unique_id."""

    returncode: int
    output: str
    results: Dict[str, Dict[str, Any]]


def dbt(command: str, *, project: Path, cwd: Path, jvm_tmp: Path) -> Invocation:
    executable = Path(sys.executable).with_name("dbt")
    args = [str(executable), command, "--project-dir", str(project), "--profiles-dir", str(project)]
    env = {
        **os.environ,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
        "JAVA_TOOL_OPTIONS": f"{SHORT_LIVED} -Djava.io.tmpdir={jvm_tmp}",
    }
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    run_results = json.loads((project / "target" / "run_results.json").read_text())
    results = {r["unique_id"]: r for r in run_results["results"]}
    return Invocation(done.returncode, done.stdout + done.stderr, results)


@dataclass(frozen=True)
class Built:
    project: Path
    cwd: Path
    run: Invocation
    test: Invocation
    jvm_tmp: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("dbt_adapter")
    project = root / "project"
    shutil.copytree(FIXTURES, project)
    cwd = root / "elsewhere"  # dbt is started outside the project: nothing may land here
    cwd.mkdir()
    jvm_tmp = root / "jvm-tmp"  # the JVMs' temporary folder: what they leave there is inspected
    jvm_tmp.mkdir()
    run = dbt("run", project=project, cwd=cwd, jvm_tmp=jvm_tmp)
    test = dbt("test", project=project, cwd=cwd, jvm_tmp=jvm_tmp)
    return Built(project, cwd, run, test, jvm_tmp)


def model(unique_name: str) -> str:
    return f"model.{PROJECT}.{unique_name}"


def table_rows(built: Built, table: str) -> list[dict[str, Any]]:
    """Read a built table straight from the warehouse files, without Spark."""
    return pq.read_table(built.project / ".streamjoin" / "warehouse" / table).to_pylist()


def test_run_builds_the_sql_and_python_models(built: Built) -> None:
    statuses = {uid: r["status"] for uid, r in built.run.results.items()}
    assert statuses == {
        model("orders"): "success",
        model("customer_totals"): "success",
        model("session_settings"): "success",
        model("state_root"): "success",
        model("broken_model"): "error",
    }, built.run.output
    assert built.run.returncode == 1  # because of broken_model only
    totals = sorted((r["customer"], r["total_amount"]) for r in table_rows(built, "customer_totals"))
    assert totals == [("alice", 17), ("bob", 5)]


def test_python_model_failure_carries_the_original_traceback(built: Built) -> None:
    message = built.run.results[model("broken_model")]["message"]
    assert "Traceback (most recent call last)" in message
    assert "in explode_on_purpose" in message
    assert 'raise ValueError(f"broken_model refuses {df.count()} orders")' in message
    assert "ValueError: broken_model refuses 3 orders" in message
    assert "ValueError: broken_model refuses 3 orders" in built.run.output


def test_a_new_dbt_process_sees_the_tables_and_the_tests_pass(built: Built) -> None:
    assert built.test.returncode == 0, built.test.output
    statuses = {uid.split(".")[2]: r["status"] for uid, r in built.test.results.items()}
    assert statuses == {
        "customer_totals_values": "pass",
        "not_null_customer_totals_customer": "pass",
        "not_null_customer_totals_total_amount": "pass",
    }


def test_zero_setup_session_is_local_with_a_project_local_catalog(built: Built) -> None:
    settings = {r["key"]: r["value"] for r in table_rows(built, "session_settings")}
    local_dir = built.project / ".streamjoin"
    assert settings["spark.master"] == "local[*]"
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.sql.shuffle.partitions"] == "200"  # coalesced by adaptive execution
    assert settings["spark.sql.catalogImplementation"] == "hive"
    assert settings["spark.sql.warehouse.dir"].removeprefix("file:") == str(local_dir / "warehouse")
    assert os.path.samefile(settings["PYSPARK_PYTHON"], sys.executable)
    # the catalog: the project's metastore service on loopback, over a Derby database in the local dir
    assert settings["spark.hadoop.hive.metastore.uris"].startswith("thrift://127.0.0.1:")
    assert (local_dir / "metastore_db").is_dir() and (local_dir / "derby.log").is_file()
    assert sorted(p.name for p in built.cwd.iterdir()) == []
    assert not {"metastore_db", "spark-warehouse", "derby.log"} & {p.name for p in built.project.iterdir()}


def test_the_dbt_processes_leave_nothing_in_the_temporary_folder(built: Built) -> None:
    # Hive's client used to leave a `<uuid>_resources` folder per process there
    assert sorted(p.name for p in built.jvm_tmp.iterdir()) == []
    assert (built.project / ".streamjoin" / "hive-resources").is_dir()  # Hive's, one for every process


def test_streamjoin_home_defaults_to_the_project_state_folder(built: Built) -> None:
    [row] = table_rows(built, "state_root")
    assert row["state_root"] == str(built.project / ".streamjoin" / "state")
