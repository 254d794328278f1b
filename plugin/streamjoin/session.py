"""The SparkSession streamjoin runs on: local Spark by default, or a cluster; tuned for small, frequent runs."""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from . import class_archive, logs, warm_up

DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # shuffles are sized by their data: a run's changes may be a handful of rows or millions, so
    # adaptive execution coalesces the initial partitions (the most a shuffle can use) to ~32 MiB each
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "32m",
    "spark.sql.shuffle.partitions": "200",
    # also inside a run's persisted intermediate results (else each keeps every initial partition)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    "spark.locality.wait": "0s",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.summary.metadata.level": "NONE",
    "spark.sql.sources.ignoreCorruptFiles": "false",
    # per-call stack capture costs a JVM round trip for every DataFrame call (a third of a small run)
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # `limit(n).collect()` on small results in one job instead of scanning partitions in rounds
    "spark.sql.limit.initialNumPartitions": "100000",
    # a run's plans generate a few hundred Java classes (a 4-way join's runs about 500); with
    # Spark's default of 100 cached classes every run compiled them all again (16 s of Janino in a
    # 4-way case's 20 runs, a fifth of its time). Static: it applies from the session's start
    "spark.sql.codegen.cache.maxEntries": "4096",
}

#: Added for a local master only: the driver is also the executor.
LOCAL_DEFAULTS: dict[str, str] = {"spark.driver.memory": "2g"}


def configure_python() -> None:
    """Make Spark's Python workers use this interpreter (the project's virtualenv)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(*, master: str | None = None, conf: Mapping[str, str] | None = None,
                  app_name: str = "streamjoin") -> SparkSession:
    """A SparkSession with streamjoin's defaults; `conf` overrides them."""
    configure_python()
    master = master or os.environ.get("STREAMJOIN_SPARK_MASTER", "local[2]")
    builder = SparkSession.builder.appName(app_name).master(master)
    local = LOCAL_DEFAULTS if master.startswith("local") else {}
    for key, value in with_quiet_logs({**DEFAULTS, **local, **(conf or {})}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    apply_runtime_defaults(spark)
    warm_up.start(spark)
    return spark


def with_quiet_logs(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with the driver's log4j options at the level of `streamjoin.logs` (nothing from Spark
    unless STREAMJOIN_LOG_LEVEL asks), Py4J's and PySpark's Python loggers set to match."""
    level = logs.spark_level()
    logs.quiet_python(level)
    key = "spark.driver.extraJavaOptions"
    return {**conf, key: driver_java_options(level, conf.get(key))}


def driver_java_options(level: logs.Level, theirs: str | None) -> str:
    """The driver JVM's options: log4j's at `level`, the class archive's (`streamjoin.class_archive`),
    then `theirs` (a user's ``spark.driver.extraJavaOptions``), which win where they overlap."""
    ours = f"{logs.java_options(level)} {class_archive.java_options(theirs)}".strip()
    return logs.merge_java_options(ours, theirs)


def apply_runtime_defaults(spark: SparkSession) -> None:
    """Settings a run relies on, applied to any session (also one dbt or a cluster created)."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.conf.set("spark.sql.limit.initialNumPartitions", DEFAULTS["spark.sql.limit.initialNumPartitions"])
    size_generated_class_cache(spark)


def size_generated_class_cache(spark: SparkSession) -> None:
    """Create Spark's cache of generated classes now, on this driver thread, so that it takes its size
    from the session (`spark.sql.codegen.cache.maxEntries`).

    The cache is sized once per JVM, by whichever thread first generates code; a thread that sees no
    session's settings (Spark's fallback) would size it at Spark's default of 100 for the JVM's life."""
    codegen = spark._jvm.org.apache.spark.sql.catalyst.expressions.codegen
    getattr(codegen, "CodeGenerator$").__getattr__("MODULE$")
