"""A new Spark application's first job, run in the background so that its first run does not pay for it.

A driver's first job costs seconds that later jobs do not: Spark's scheduler, task and result paths
run for the first time (interpreted, until the JIT compiles them), Janino compiles its first
generated classes, and each executor starts its Python daemon and a worker, which imports pyarrow
and the write pass's code. `start` runs one tiny job along those paths (a shuffled join, an
aggregation, a Python map over Arrow batches) in a thread of its own while the caller plans its
first run. Its rows are generated, so it reads and writes no table and runs on any cluster; its job
group is its own, so no run counts its job.
"""
from __future__ import annotations

import logging
import threading
from typing import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

log = logging.getLogger("streamjoin")

JOB_GROUP = "streamjoin-warm-up"
_started: set[str] = set()  # the Spark applications warmed up, by id
_lock = threading.Lock()


def start(spark: SparkSession) -> threading.Thread | None:
    """Warm up `spark`'s application in a daemon thread, once per application (None: done already)."""
    app = spark.sparkContext.applicationId
    with _lock:
        if app in _started:
            return None
        _started.add(app)
    thread = threading.Thread(target=_warm_up, args=(spark,), name=JOB_GROUP, daemon=True)
    thread.start()
    return thread


def _warm_up(spark: SparkSession) -> None:
    try:
        spark.sparkContext.setJobGroup(JOB_GROUP, "streamjoin: a first job for the driver and the executors' "
                                                  "Python workers", interruptOnCancel=False)
        keys = spark.range(8).selectExpr("id % 4 AS k", "id AS v")
        names = spark.range(4).selectExpr("id AS k", "CAST(id AS STRING) AS s")
        summed = keys.join(names, "k", "left").groupBy("k", "s").agg(F.sum("v").alias("v"))
        summed.mapInArrow(_load_write_pass, "rows long").collect()
    except Exception as exc:  # noqa: BLE001 — a run relies on nothing the warm-up does (a stopped session, …)
        log.debug("streamjoin: the warm-up job did not complete: %s", exc)


def _load_write_pass(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """An executor's side of the warm-up: import the write pass's code, count the rows."""
    import streamjoin.storage.bucket_merge  # noqa: F401 — loaded for the runs this worker will serve
    import streamjoin.storage.parquet_files  # noqa: F401

    for batch in batches:
        yield pa.RecordBatch.from_pydict({"rows": pa.array([batch.num_rows], pa.int64())})
