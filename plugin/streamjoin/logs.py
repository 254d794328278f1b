"""How much Spark, Py4J and Hive say: nothing by default, more with ``STREAMJOIN_LOG_LEVEL``.

Spark logs through log4j inside its JVM, so its level has to be chosen before the JVM starts:
the driver's Java options name the ``log4j2.properties`` shipped here and pass the level as
the system property ``streamjoin.log.level`` (even start-up lines follow it). Py4J, PySpark's
query-context logger and PySpark's pandas warning are Python-side and set by
:func:`quiet_python`. A few lines come from the JVM itself, not log4j (``WARNING: Using
incubator modules``); :func:`launch_jvm` sends the JVM's stderr to a file to keep those too.

>>> java_options("WARN").split()[1]
'-Dstreamjoin.log.level=warn'
>>> merge_java_options("-Dstreamjoin.log.level=off", "-Xss4m -Dderby.system.home=/p")
'-Dstreamjoin.log.level=off -Xss4m -Dderby.system.home=/p'
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Literal, Mapping, get_args

from .errors import ConfigError

#: The environment variable that sets the level (one of :data:`LEVELS`, any case).
ENV_VAR = "STREAMJOIN_LOG_LEVEL"
Level = Literal["OFF", "ERROR", "WARN", "INFO", "DEBUG"]
LEVELS: tuple[str, ...] = get_args(Level)
#: The log4j2 configuration handed to Spark's JVM.
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")

_PYTHON_LEVELS = {"OFF": logging.CRITICAL + 10, "ERROR": logging.ERROR, "WARN": logging.WARNING,
                  "INFO": logging.INFO, "DEBUG": logging.DEBUG}
#: Python loggers that speak for Spark: Py4J's connection chatter, and PySpark's, which logs
#: every SQL error with its Java stack trace as JSON, also errors that are caught and handled.
_PYTHON_LOGGERS = ("py4j", "SQLQueryContextLogger", "DataFrameQueryContextLogger")


def requested_level() -> Level | None:
    """The level ``STREAMJOIN_LOG_LEVEL`` asks for (``WARNING`` reads as ``WARN``); None when unset."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    level = {"WARNING": "WARN"}.get(raw.upper(), raw.upper())
    if level not in LEVELS:
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a log level: set it to one of {', '.join(LEVELS)} "
                          f"(or unset it for quiet output).")
    return level  # type: ignore[return-value]


def spark_level(*, default: Level = "OFF") -> Level:
    """The level Spark, Py4J and Hive log at: ``STREAMJOIN_LOG_LEVEL`` if set, else `default`."""
    return requested_level() or default


def java_options(level: Level) -> str:
    """Driver Java options that configure log4j from the start of the JVM."""
    return f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} -Dstreamjoin.log.level={level.lower()}"


def merge_java_options(ours: str, theirs: str | None) -> str:
    """`ours` followed by `theirs` (a user's ``spark.driver.extraJavaOptions``): the JVM takes the
    last of two equal ``-D`` options, so a user's own log4j configuration wins."""
    return f"{ours} {theirs}".strip() if theirs else ours


def quiet_python(level: Level) -> None:
    """Set Py4J's and PySpark's Python loggers to `level`; below WARN also drop PySpark's
    warning that it does not fully support the installed pandas (it fires once per process)."""
    for name in _PYTHON_LOGGERS:
        _logger(name).setLevel(_PYTHON_LEVELS[level])
    if level in ("OFF", "ERROR"):
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def _logger(name: str) -> logging.Logger:
    """The named logger; PySpark's own loggers must be created as PySpark creates them (they
    take keyword context their callers pass), so ask PySpark for those."""
    if name == "py4j":
        return logging.getLogger(name)
    from pyspark.logger import PySparkLogger

    return PySparkLogger.getLogger(name)


def launch_jvm(conf: Mapping[str, str], *, stderr: Path) -> None:
    """Start Spark's JVM (PySpark's Py4J gateway) for `conf`, its stderr appended to `stderr`.

    Everything the JVM prints goes there: log4j's console and the JVM's own start-up warnings.
    The SparkSession built next (``SparkSession.builder...getOrCreate()`` with the same `conf`)
    runs on this JVM. Does nothing when this process already has one.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    stderr.parent.mkdir(parents=True, exist_ok=True)
    with open(stderr, "ab") as sink:  # the JVM keeps its own copy of the descriptor
        gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(list(conf.items())),
                                 popen_kwargs={"stderr": sink})
    SparkContext._ensure_initialized(gateway=gateway)
