"""What importing a part of streamjoin brings with it: the public API loads on first use, so a Spark
task's writer on an executor and an Airflow DAG file each import only what they use."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import streamjoin

PLUGIN = Path(streamjoin.__file__).resolve().parents[1]
#: Modules a task's writer or a DAG file has no use for: the SQL front end and the run protocol.
DRIVER_ONLY = ("sqlglot", "streamjoin.sql.compiler", "streamjoin.runtime.run", "streamjoin.operators.regular")


def imported_after(statement: str, of: tuple[str, ...]) -> list[str]:
    """Which modules of `of` a fresh interpreter holds after running `statement`."""
    code = f"import json, sys\n{statement}\nprint(json.dumps([m for m in {list(of)!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(PLUGIN), "PATH": ""})
    return json.loads(done.stdout)


def test_the_executors_write_and_merge_code_imports_no_driver_code():
    statement = "import streamjoin.storage.parquet_files, streamjoin.storage.bucket_merge"
    assert imported_after(statement, (*DRIVER_ONLY, "streamjoin.storage.writes", "deltalake")) == []


def test_importing_the_airflow_glue_imports_neither_spark_nor_the_runtime():
    assert imported_after("import streamjoin_airflow",
                          (*DRIVER_ONLY, "pyspark", "deltalake")) == []


def test_the_public_api_is_the_defining_modules_own_objects():
    from streamjoin.runtime.run import run_once
    from streamjoin.spec import InputSpec
    from streamjoin.storage.tables import ModelTables

    assert (streamjoin.run_once, streamjoin.InputSpec, streamjoin.ModelTables) == (run_once, InputSpec, ModelTables)
    assert set(streamjoin.__all__) <= set(dir(streamjoin))
    namespace: dict = {}
    exec("from streamjoin import *", namespace)
    assert {name for name in namespace if not name.startswith("__")} == set(streamjoin.__all__)


def test_a_name_the_package_does_not_have_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'streamjoin' has no attribute 'run_twice'"):
        streamjoin.run_twice  # noqa: B018
