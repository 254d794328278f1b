"""Quiet output: Spark's log4j level chosen before its JVM starts, STREAMJOIN_LOG_LEVEL read and
checked, and a full refresh that drops its views while the folders they read still exist."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from streamjoin import api, logs
from streamjoin.errors import ConfigError
from streamjoin.storage import delta_log
from streamjoin.storage.tables import ModelTables


@pytest.mark.parametrize("raw, level", [(None, None), ("", None), ("debug", "DEBUG"), (" Warning ", "WARN"),
                                        ("OFF", "OFF")])
def test_the_level_comes_from_the_environment(monkeypatch, raw, level):
    if raw is None:
        monkeypatch.delenv(logs.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(logs.ENV_VAR, raw)
    assert logs.requested_level() == level
    assert logs.spark_level() == (level or "OFF")


def test_an_unknown_level_is_named_with_the_levels_to_choose_from(monkeypatch):
    monkeypatch.setenv(logs.ENV_VAR, "verbose")
    with pytest.raises(ConfigError, match=r"STREAMJOIN_LOG_LEVEL='verbose' is not a log level: .*OFF, ERROR, WARN, INFO, DEBUG"):
        logs.requested_level()


def test_java_options_name_the_shipped_log4j_configuration_and_keep_the_users_last():
    options = logs.java_options("INFO").split()
    config = Path(options[0].removeprefix("-Dlog4j2.configurationFile=file:"))
    assert config.is_file() and "${sys:streamjoin.log.level:-off}" in config.read_text()
    assert options[1] == "-Dstreamjoin.log.level=info"
    merged = logs.merge_java_options(logs.java_options("OFF"), "-Dlog4j2.configurationFile=/mine.properties")
    assert merged.split()[-1] == "-Dlog4j2.configurationFile=/mine.properties"  # the JVM takes the last one


def test_the_session_logs_nothing_from_spark_unless_asked(spark):
    """The test session is started by local_session with STREAMJOIN_LOG_LEVEL unset (or as CI sets it)."""
    jvm = spark.sparkContext._jvm
    expected = logs.spark_level()
    assert str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel()) == expected
    # PySpark's gateway counts as Spark's shell: its logger must not lift the level back to WARN
    gateway = jvm.org.apache.logging.log4j.LogManager.getLogger("org.apache.spark.api.python.PythonGatewayServer")
    assert str(gateway.getLevel()) == expected
    assert "-Dlog4j2.configurationFile=" in spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")


def test_a_full_refresh_drops_the_views_before_the_tables_they_read(spark, tmp_path, monkeypatch):
    """Dropping a view makes Spark read it (to uncache it): with its table gone, Spark logged a
    trace per view although the refresh succeeded."""
    left, right = str(tmp_path / "left"), str(tmp_path / "right")
    write_deltalake(left, pa.table({"k": [1, 2]}))
    write_deltalake(right, pa.table({"k": [2, 3]}))
    inputs = {"l": {"location": left, "changelog_format": "append", "relation": "l_in"},
              "r": {"location": right, "changelog_format": "append", "relation": "r_in"}}
    sql = "SELECT l.k FROM l_in l JOIN r_in r ON l.k = r.k"
    root = str(tmp_path / "models")
    api.run_model(spark, name="fr", sql=sql, inputs=inputs, config={}, root=root, relation="default.fr_view")
    tables = ModelTables(root, "fr")

    seen: list[bool] = []
    drop_views = api._drop_views

    def drop_while_published(spark_, relation):
        seen.append(delta_log.exists(tables.result) and delta_log.exists(tables.changelog))
        drop_views(spark_, relation)

    monkeypatch.setattr(api, "_drop_views", drop_while_published)
    api.run_model(spark, name="fr", sql=sql, inputs=inputs, config={}, root=root, relation="default.fr_view",
                  full_refresh=True)
    assert seen == [True]
    assert [r.k for r in spark.sql("SELECT k FROM default.fr_view").collect()] == [2]
