"""In-process execution of compiled Python model code, and saving what `model()` returns."""

from __future__ import annotations

import pytest

from dbt.adapters.streamjoin.python_submission import (
    REPORT_NAME,
    PythonModelError,
    PythonModelResultError,
    SessionPythonJobHelper,
    StreamjoinModelError,
    run_model_code,
    save_as_table,
)
from dbt_common.exceptions import DbtRuntimeError

FAILING_MODEL = """
    def model(dbt, session):
        return helper(session)

def helper(session):
    raise KeyError(f"no column for {session}")

model(None, spark)
"""


def test_code_runs_with_spark_in_scope() -> None:
    run_model_code('assert spark == "SESSION", spark', model_id="model.p.ok", spark="SESSION")


def test_failure_is_a_dbt_error_with_the_models_traceback() -> None:
    with pytest.raises(PythonModelError) as raised:
        run_model_code(FAILING_MODEL, model_id="model.p.bad", spark="SESSION")
    error = raised.value
    assert isinstance(error, DbtRuntimeError)
    message = str(error)
    assert "Python model model.p.bad failed" in message
    assert "Traceback (most recent call last)" in message
    assert 'raise KeyError(f"no column for {session}")' in message
    assert "in helper" in message and "KeyError: 'no column for SESSION'" in message
    # line numbers follow the compiled file: the raise is on line 6
    assert '<dbt python model model.p.bad>", line 6, in helper' in message
    assert "run_model_code" not in message


def test_a_non_dataframe_result_is_rejected_with_the_fix() -> None:
    with pytest.raises(PythonModelResultError, match="return a pyspark.sql.DataFrame"):
        save_as_table([1, 2], relation="`default`.`x`", file_format="", spark=None)


def test_a_streamjoin_error_is_one_dbt_error_without_traceback() -> None:
    code = (
        "from streamjoin.errors import CompileError\n"
        "raise CompileError('GROUP BY is not supported in a streaming join', model='m')\n"
    )
    with pytest.raises(StreamjoinModelError) as raised:
        run_model_code(code, model_id="model.p.m", spark="SESSION")
    message = str(raised.value)
    assert isinstance(raised.value, DbtRuntimeError)
    assert message.endswith("streamjoin model model.p.m failed: CompileError: model 'm': "
                            "GROUP BY is not supported in a streaming join")
    assert "Traceback" not in message


def test_the_run_report_becomes_the_adapter_response() -> None:
    code = (
        "class Report:\n"
        "    def summary(self):\n"
        "        return 'streamjoin m run 1: committed'\n"
        "streamjoin_report = Report()\n"
    )
    helper = SessionPythonJobHelper({"unique_id": "model.p.m", "alias": "m"}, credential=None)
    namespace = run_model_code(code, model_id="model.p.m", spark="SESSION")
    assert namespace[REPORT_NAME].summary() == "streamjoin m run 1: committed"
    assert helper.model_id == "model.p.m"


def test_spark_pandas_and_pandas_on_spark_results_are_saved_as_the_table(spark, tmp_path) -> None:
    import pandas as pd
    import pyspark.pandas as ps  # imports with the locked pandas (3.x broke it: no DateOffset)

    rows = [(1, "a"), (2, "b")]
    spark.sql(f"CREATE DATABASE python_results LOCATION '{tmp_path}'")
    try:
        frames = {"spark": spark.createDataFrame(rows, "id long, name string"),
                  "pandas": pd.DataFrame(rows, columns=["id", "name"]),
                  "pandas_on_spark": ps.DataFrame(pd.DataFrame(rows, columns=["id", "name"]))}
        for kind, frame in frames.items():
            save_as_table(frame, relation=f"python_results.{kind}", file_format="parquet", spark=spark)
            saved = spark.table(f"python_results.{kind}")
            assert [(f.name, f.dataType.simpleString()) for f in saved.schema] == [("id", "bigint"), ("name", "string")], kind
            assert sorted(tuple(r) for r in saved.collect()) == rows, kind
    finally:
        spark.sql("DROP DATABASE python_results CASCADE")
