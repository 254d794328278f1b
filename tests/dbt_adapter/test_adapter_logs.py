"""Where dbt's SparkSession sends Spark's log: a file by default, the console under --debug or
STREAMJOIN_LOG_LEVEL (no JVM is started here: the launch is recorded)."""
from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.streamjoin import session
from dbt.adapters.streamjoin.session import SessionPlan
from streamjoin import logs


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict, Path]]:
    started: list[tuple[dict, Path]] = []
    monkeypatch.setattr(logs, "launch_jvm", lambda conf, *, stderr: started.append((dict(conf), stderr)))
    monkeypatch.setattr(logs, "quiet_python", lambda level: None)  # keep this process's loggers as they are
    monkeypatch.delenv(logs.ENV_VAR, raising=False)
    return started


def plan(tmp_path: Path) -> SessionPlan:
    return SessionPlan.embedded(local_dir=tmp_path, state_root=str(tmp_path / "state"),
                                server_side_parameters={"spark.driver.extraJavaOptions": "-Xss4m"})


def test_by_default_the_jvm_logs_to_a_file(tmp_path, monkeypatch, launches) -> None:
    monkeypatch.setattr(session, "_dbt_debug", lambda: False)
    conf = session._with_log_settings(plan(tmp_path))
    options = conf["spark.driver.extraJavaOptions"]
    assert launches == [(conf, tmp_path / "logs" / "spark.log")]
    assert "-Dlog4j2.configurationFile=" in options and "-Dstreamjoin.log.level=warn" in options
    assert options.endswith(" -Xss4m")  # the plan's own options kept, after ours


def test_dbt_debug_keeps_spark_on_the_console_at_warn(tmp_path, monkeypatch, launches) -> None:
    monkeypatch.setattr(session, "_dbt_debug", lambda: True)
    conf = session._with_log_settings(plan(tmp_path))
    assert launches == [] and "-Dstreamjoin.log.level=warn" in conf["spark.driver.extraJavaOptions"]


def test_the_environment_variable_sets_the_level_on_the_console(tmp_path, monkeypatch, launches) -> None:
    monkeypatch.setattr(session, "_dbt_debug", lambda: False)
    monkeypatch.setenv(logs.ENV_VAR, "debug")
    conf = session._with_log_settings(plan(tmp_path))
    assert launches == [] and "-Dstreamjoin.log.level=debug" in conf["spark.driver.extraJavaOptions"]


@pytest.mark.parametrize("flags, debug", [({"DEBUG": True}, True), ({"LOG_LEVEL": "debug"}, True),
                                          ({"DEBUG": False, "LOG_LEVEL": "info"}, False), ({}, False)])
def test_dbt_debug_is_read_from_dbts_flags(monkeypatch, flags, debug) -> None:
    from argparse import Namespace

    import dbt.flags

    monkeypatch.setattr(dbt.flags, "GLOBAL_FLAGS", Namespace(**flags))
    assert session._dbt_debug() is debug
