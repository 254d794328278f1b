"""A run's shared intermediate results: computed once, kept on the executors, plan cut short."""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame


class Intermediates:
    """The intermediate results one run keeps, released together at its end.

    A kept result is cached (memory, spilling to disk) and later plans read it as a leaf: a scan of
    the cached blocks, not the query that made them. Planning cost so stays flat however deep the
    join tree (a plan that carried every level's query would grow with each level it reuses), and
    the blocks keep their lineage, so a block lost with its executor is recomputed by Spark's task
    retry (which a local checkpoint's could not be). This is `Dataset.localCheckpoint` without
    the truncation: the same `LogicalRDD.fromDataset` leaf, over the cache's RDD."""

    def __init__(self) -> None:
        self.cached: list[DataFrame] = []

    def keep(self, df: DataFrame) -> DataFrame:
        """`df` computed at most once this run (lazily, by the first job that reads it)."""
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        spark = df.sparkSession
        jvm = spark._jvm
        logical_rdd = getattr(jvm.org.apache.spark.sql.execution, "LogicalRDD$").__getattr__("MODULE$")
        leaf = logical_rdd.fromDataset(df._jdf.queryExecution().toRdd(), df._jdf, False)
        return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, leaf), spark)

    def release(self) -> None:
        """Drop the cached blocks of every result kept."""
        for df in self.cached:
            df.unpersist(blocking=False)
        self.cached.clear()
