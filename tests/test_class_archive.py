"""The Spark driver's class archive (streamjoin.class_archive): `make setup` builds it, and a driver
that streamjoin starts maps Spark's classes from it instead of loading them from the jars."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamjoin import class_archive
from streamjoin.session import driver_java_options

#: A driver started by `local_session` that logs where the JVM loaded each class from.
DRIVER = """
import sys
from streamjoin.session import local_session
spark = local_session(app_name="class-archive-test",
                      conf={"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={sys.argv[1]}"})
spark.range(3).collect()
"""


def test_make_setup_built_the_archive_for_this_spark_and_java() -> None:
    archive = class_archive.path()
    assert archive.is_file(), f"no class archive at {archive}: `make setup` builds it"
    assert archive.stat().st_size > 10_000_000  # tens of thousands of classes, not an empty dump


def test_a_driver_maps_spark_s_classes_from_the_archive(tmp_path: Path) -> None:
    loads = tmp_path / "class-load.log"
    subprocess.run([sys.executable, "-c", DRIVER, str(loads)], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = loads.read_text().splitlines()
    for name in ("org.apache.spark.SparkContext", "org.apache.spark.sql.classic.Dataset"):
        [loaded] = [line for line in lines if f" {name} source: " in line]
        assert loaded.endswith("source: shared objects file (top)"), loaded  # (top): the dynamic archive


def test_without_an_archive_a_driver_gets_no_archive_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.CACHE_ENV_VAR, str(tmp_path))
    assert class_archive.java_options() == ""
    assert "SharedArchiveFile" not in driver_java_options("OFF", None)


def test_a_user_s_own_class_sharing_options_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.CACHE_ENV_VAR, str(tmp_path))
    class_archive.path().write_bytes(b"")  # an archive exists
    assert f"-XX:SharedArchiveFile={class_archive.path()}" in driver_java_options("OFF", "-Xss4m")
    for theirs in ("-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/new.jsa"):
        assert str(class_archive.path()) not in driver_java_options("OFF", theirs), theirs
