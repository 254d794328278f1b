"""A run's shared intermediate results: computed once, kept on the executors, plan cut short."""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from ..jvm_handles import JvmHandles
from ..one_partition import gathered


class Intermediates:
    """The intermediate results one run keeps, released together at its end.

    A kept result is an in-memory relation (Spark's cache: columnar blocks in memory, spilling to
    disk), and later plans read it as a leaf: a scan of the cached blocks, not the query that made
    them. Planning cost so stays flat however deep the join tree, and the blocks keep their lineage,
    so a block lost with its executor is recomputed by Spark's task retry (which a local
    checkpoint's could not be).

    The relation is built directly, not registered with the session's cache manager: registering
    plans the query once more, and every later plan of the session would be matched against it.
    Its rows are read from the cached blocks as Spark's in-memory scan reads them (the cache's
    serializer turns them back into rows), without planning a query over the relation: such a query
    cost 20–25 ms for each kept result, and a small run keeps about five.
    The leaf claims no partitioning: Spark cannot canonicalize a scan's partitioning, so two reads
    of one kept result that claimed it would never share an exchange, and a plan that reads the
    result twice (such as a result rewrite and its check) would compute everything above it twice.
    In a run planned in one partition (`one_partition`) the leaf is that partition, and no exchange
    is needed above it at all."""

    def __init__(self) -> None:
        self.cached: list[Any] = []  # the JVM InMemoryRelations

    def keep(self, df: DataFrame) -> DataFrame:
        """`df` computed at most once this run (lazily, by the first job that reads it)."""
        spark = df.sparkSession
        jvm = JvmHandles.of(spark._jvm)
        relation = jvm.relations.apply(jvm.memory_and_disk, df._jdf.queryExecution(), jvm.kept_name)
        self.cached.append(relation)
        builder, columns = relation.cacheBuilder(), relation.output()
        blocks = builder.serializer().convertCachedBatchToInternalRow(
            builder.cachedColumnBuffers(), columns, columns, spark._jsparkSession.sessionState().conf())
        return gathered(DataFrame(spark._jsparkSession.internalCreateDataFrame(blocks, df._jdf.schema(), False), spark))

    def release(self) -> None:
        """Drop the cached blocks of every result kept."""
        for relation in self.cached:
            relation.cacheBuilder().clearCache(False)
        self.cached.clear()

