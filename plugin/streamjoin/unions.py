"""One union of many frames, analysed once.

`DataFrame.unionByName` is binary: a chain of n frames is n - 1 unions, each a new Dataset whose
plan Spark analyses on the spot, over a tree one level deeper every time. `union_by_name` builds the
one n-ary `Union` that the chain's plans combine into (Spark's `CombineUnions`) and has Spark analyse
it once: the same rows, columns and plan, a round trip per frame instead of an analysis per frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from pyspark.sql import DataFrame


def union_by_name(frames: Sequence[DataFrame], *, allow_missing: bool = False) -> DataFrame:
    """The rows of every frame, columns matched by name (as `DataFrame.unionByName`; with
    `allow_missing`, a column a frame lacks is NULL in its rows)."""
    if len(frames) == 1:
        return frames[0]
    spark = frames[0].sparkSession
    jvm = _JvmHandles.of(spark._jvm)
    plans = jvm.to_seq([frame._jdf.logicalPlan() for frame in frames])
    union = jvm.union(plans, True, allow_missing)
    return DataFrame(jvm.datasets.ofRows(spark._jsparkSession, union), spark)


@dataclass(frozen=True)
class _JvmHandles:
    """The JVM members `union_by_name` calls, looked up once per JVM."""

    to_seq: Any  # PythonUtils.toSeq
    union: Any  # the Union logical plan's constructor
    datasets: Any  # org.apache.spark.sql.classic.Dataset

    @staticmethod
    @lru_cache(maxsize=4)
    def of(jvm: Any) -> "_JvmHandles":
        return _JvmHandles(to_seq=jvm.org.apache.spark.api.python.PythonUtils.toSeq,
                           union=jvm.org.apache.spark.sql.catalyst.plans.logical.Union,
                           datasets=jvm.org.apache.spark.sql.classic.Dataset)
