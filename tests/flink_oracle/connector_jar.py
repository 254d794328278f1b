"""Build the ``snapshot-lookup`` connector (lookup_connector/, Java) into a jar Flink can load.

The jar is compiled with ``javac`` against PyFlink's own jars and cached next to the Flink venv,
named by a hash of the connector's sources and of those jars' names
(``.venv-flink/streamjoin-lookup-oracle-<hash>.jar``): a clean clone builds it on first use (a few
seconds), a changed source or Flink version builds a new one. Runs in the Flink venv.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "lookup_connector"


class ConnectorBuildError(RuntimeError):
    """Raised when the connector cannot be compiled; carries javac's output."""


def flink_lib() -> Path:
    """The folder of the jars PyFlink runs Flink with."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent / "lib"


def connector_jar(cache: Path | None = None) -> Path:
    """The connector's jar, built into `cache` (default: the running Flink venv) unless a jar of
    these sources is there. Raises ConnectorBuildError when javac is missing or fails."""
    cache = Path(sys.prefix) if cache is None else cache
    lib = flink_lib()
    files = sorted(p for p in SOURCES.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(" ".join(sorted(p.name for p in lib.glob("*.jar"))).encode())
    jar = cache / f"streamjoin-lookup-oracle-{digest.hexdigest()[:16]}.jar"
    if not jar.exists():
        _build(files, lib, jar)
    return jar


def _build(files: list[Path], lib: Path, jar: Path) -> None:
    javac = shutil.which("javac") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "javac")
    with tempfile.TemporaryDirectory(prefix="streamjoin-lookup-oracle-") as work:
        classes = Path(work) / "classes"
        command = [javac, "-nowarn", "-d", str(classes), "-cp", str(lib / "*"),
                   *[str(p) for p in files if p.suffix == ".java"]]
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:
            raise ConnectorBuildError(f"cannot run javac ({javac}) to build the lookup connector: {error}; "
                                      "install a JDK 17 or set JAVA_HOME") from error
        if done.returncode != 0:
            raise ConnectorBuildError(f"javac failed to build the lookup connector ({' '.join(command)}):\n"
                                      f"{done.stdout}{done.stderr}")
        resources = SOURCES / "resources"
        partial = Path(work) / jar.name
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
            for path in sorted(p for p in resources.rglob("*") if p.is_file()):
                archive.write(path, path.relative_to(resources).as_posix())
        staged = jar.with_name(f"{jar.name}.{os.getpid()}.partial")  # then renamed: never a half-written jar
        shutil.move(partial, staged)
        os.replace(staged, jar)
