"""The Spark driver's class archive: the JVM's classes as it loads them for a run, mapped at start-up.

A Spark driver JVM spends much of its start-up loading, parsing and verifying classes from Spark's
jars. Java's class data sharing (a dynamic CDS archive, `-XX:SharedArchiveFile`) maps them
instead, already parsed and verified: on this 2-core machine a SparkSession starts in about 2.8 s
instead of 4.5 s and answers its first SQL in 0.6 s instead of 1.4 s. Each `dbt run`, Airflow task
and test process that starts Spark pays that once.

`build()` makes the archive by running a small streamjoin model in a JVM started with
`-XX:ArchiveClassesAtExit` (about 45 s, once per Spark installation and Java runtime; `make setup`
does it, as does `python -m streamjoin class-archive`, which then removes the archives of
installations that are gone or were installed again: `prune`, each is about 175 MB).
`java_options()` names it to every driver streamjoin starts (`streamjoin.session`, the dbt adapter)
when it exists. The archive belongs to one Java runtime and one Spark class path: a JVM that cannot
use it (another Java, a driver class path of its own) starts as without it, silently. Only the
driver uses it; a cluster's executors start as before.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Overrides where archives are kept (default: $XDG_CACHE_HOME/streamjoin, else ~/.cache/streamjoin).
CACHE_ENV_VAR = "STREAMJOIN_CACHE_DIR"
#: The JVM warns on stdout when it cannot use an archive; it then starts as without one.
QUIET = "-Xlog:cds*=off"
#: Java options of a user's that settle class sharing themselves (ours would conflict).
_OWN_CHOICE = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")


def cache_dir() -> Path:
    """Where archives are kept."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "streamjoin"


def path() -> Path:
    """The archive for this Spark installation (its jars, where and when installed) and Java runtime
    (it need not exist)."""
    import pyspark

    java = shutil.which(java_command())
    # the JVM checks the jars' times too: a Spark installed again in the same place needs a new archive
    jars = spark_jars()
    installed = str(jars.stat().st_mtime_ns) if jars.is_dir() else ""
    identity = "\n".join([pyspark.__version__, str(jars), installed, os.path.realpath(java) if java else ""])
    return cache_dir() / f"spark-driver-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.jsa"


def java_command() -> str:
    """The java that Spark's launcher runs: JAVA_HOME's when it is set, else the first on PATH (`java`
    when there is none)."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"


def spark_jars() -> Path:
    """The folder of this Spark installation's jars, resolved."""
    import pyspark

    return Path(os.path.realpath(Path(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)) / "jars"))


def _owner(archive: Path) -> Path:
    """The file beside an archive that names the jars folder it was built for."""
    return archive.with_suffix(".jars")


def _owned_by(owner: Path) -> str | None:
    """The jars folder an owner file names; None once a concurrent build's `prune` removed it."""
    try:
        return owner.read_text()
    except FileNotFoundError:
        return None


def prune(keep: Path) -> list[Path]:
    """Remove the archives no JVM can use any more, all but `keep`: those of a Spark installation whose
    jars folder is gone (a deleted virtualenv or checkout) or was installed again (the same folder as
    `keep`'s). Each is about 175 MB. Archives without an owner file (built before streamjoin wrote
    one) are left alone, as are those another process removes meanwhile. Returns the archives removed."""
    ours = _owned_by(_owner(keep))
    removed = []
    for owner in keep.parent.glob("spark-driver-*.jars"):
        archive = owner.with_suffix(".jsa")
        jars = _owned_by(owner)
        if jars is not None and archive != keep and (jars == ours or not os.path.isdir(jars)):
            archive.unlink(missing_ok=True)
            owner.unlink(missing_ok=True)
            removed.append(archive)
    return removed


def java_options(theirs: str | None = None) -> str:
    """Driver Java options that map the archive: nothing when there is none, or when `theirs` (a
    user's `spark.driver.extraJavaOptions`) already choose what the JVM shares."""
    archive = path()
    if not archive.is_file() or any(flag in (theirs or "") for flag in _OWN_CHOICE):
        return ""
    return f"-XX:SharedArchiveFile={archive} {QUIET}"


def build() -> Path:
    """Make the archive, replacing any: a small model's runs in a JVM that writes the classes it loaded
    when it exits, and an owner file naming this installation for `prune`. Concurrent builds each
    write their own file; the last one renamed into place wins, and a JVM starting meanwhile maps the
    one it found."""
    archive = path()
    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=archive.stem + ".", suffix=".partial", dir=archive.parent)
    os.close(fd)
    os.unlink(partial)  # the JVM writes it afresh
    try:
        done = subprocess.run([sys.executable, "-m", "streamjoin.class_archive", partial],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0 or not os.path.isfile(partial):
            raise RuntimeError(f"building the Spark driver's class archive failed:\n{done.stdout[-4000:]}")
        os.replace(partial, archive)
        with open(partial, "w") as owner:  # renamed into place whole: a concurrent prune never reads it half written
            owner.write(str(spark_jars()))
        os.replace(partial, _owner(archive))
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return archive


def _load_classes(partial: str) -> None:
    """In a process of its own: the demo model's runs, then the JVM's exit, which writes the archive."""
    from pyspark import SparkContext

    from .conformance import run_case
    from .demo import CASE
    from .session import local_session

    spark = local_session(app_name="streamjoin-class-archive",
                          conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial}"})
    outcome = run_case(spark, CASE)
    if not outcome["ok"]:
        raise RuntimeError(f"the demo model's runs failed: {outcome['error']}")
    spark.sql("SELECT 1").collect()
    jvm = SparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()  # PySpark's gateway exits when its stdin closes; the archive is written on exit
    jvm.wait()


if __name__ == "__main__":
    _load_classes(sys.argv[1])
