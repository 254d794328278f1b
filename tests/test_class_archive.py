"""The Spark driver's class archive (streamjoin.class_archive): `make setup` builds it, and a driver
that streamjoin starts maps Spark's classes from it instead of loading them from the jars."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from streamjoin import class_archive
from streamjoin.__main__ import main as streamjoin_cli
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


def _archive(cache: Path, name: str, jars: Path | None) -> Path:
    """A stand-in archive in `cache`, with an owner file naming `jars` unless None."""
    archive = cache / f"spark-driver-{name}.jsa"
    archive.write_bytes(b"archive")
    if jars is not None:
        archive.with_suffix(".jars").write_text(str(jars))
    return archive


def test_pruning_removes_the_archives_of_spark_installations_gone_or_installed_again(tmp_path: Path) -> None:
    cache, ours, other = tmp_path / "cache", tmp_path / "venv" / "jars", tmp_path / "other" / "jars"
    for folder in (cache, ours, other):
        folder.mkdir(parents=True)
    keep = _archive(cache, "new", ours)
    reinstalled = _archive(cache, "old", ours)  # the same folder before Spark was installed again
    gone = _archive(cache, "gone", tmp_path / "deleted-venv" / "jars")
    elsewhere = _archive(cache, "elsewhere", other)  # another installation still in use
    legacy = _archive(cache, "legacy", None)  # built before owner files: whose it is is unknown
    assert sorted(class_archive.prune(keep)) == sorted([reinstalled, gone])
    left = [legacy, *(p for a in (keep, elsewhere) for p in (a, a.with_suffix(".jars")))]
    assert sorted(cache.iterdir()) == sorted(left)


def test_pruning_skips_an_archive_another_build_removes_meanwhile(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds on one cache (two clean clones setting up at once) prune side by side: an owner file
    listed by one and removed by the other before it is read is no error."""
    cache, ours = tmp_path / "cache", tmp_path / "venv" / "jars"
    for folder in (cache, ours):
        folder.mkdir(parents=True)
    keep = _archive(cache, "new", ours)
    gone = _archive(cache, "gone", tmp_path / "deleted-venv" / "jars")
    listed = sorted(cache.glob("spark-driver-*.jars"))
    for path in (gone, gone.with_suffix(".jars")):
        path.unlink()  # the other build's prune, after this one listed the folder
    monkeypatch.setattr(Path, "glob", lambda folder, pattern: iter(listed))
    assert class_archive.prune(keep) == []
    assert keep.exists() and keep.with_suffix(".jars").exists()


def test_building_records_the_installation_and_removes_stale_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """`python -m streamjoin class-archive` (what `make setup` runs), its JVM stood in for."""
    monkeypatch.setenv(class_archive.CACHE_ENV_VAR, str(tmp_path))
    gone = _archive(tmp_path, "gone", tmp_path / "deleted-venv" / "jars")

    def jvm_writes_the_archive(command: list[str], **_: object) -> subprocess.CompletedProcess:
        Path(command[-1]).write_bytes(b"classes")  # the JVM's archive at exit, without the 45 s
        return subprocess.CompletedProcess(command, 0, "")

    monkeypatch.setattr(class_archive.subprocess, "run", jvm_writes_the_archive)
    assert streamjoin_cli(["class-archive", "--force"]) == 0
    built = class_archive.path()
    assert built.read_bytes() == b"classes"
    assert built.with_suffix(".jars").read_text() == str(Path(pyspark.__file__).resolve().parent / "jars")
    assert not gone.exists() and not gone.with_suffix(".jars").exists()
    said = capsys.readouterr().out.strip()
    assert said.endswith(f"{built}; removed 1 older archive (Spark installations gone or installed again)"), said
