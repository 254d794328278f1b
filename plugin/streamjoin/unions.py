"""One union of many frames, analysed once.

`DataFrame.unionByName` is binary: a chain of n frames is n - 1 unions, each a new Dataset whose
plan Spark analyses on the spot, over a tree one level deeper every time. `union_by_name` builds the
one n-ary `Union` that the chain's plans combine into (Spark's `CombineUnions`) and has Spark analyse
it once: the same rows, columns and plan, a round trip per frame instead of an analysis per frame.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import DataFrame

from .jvm_handles import JvmHandles


def union_by_name(frames: Sequence[DataFrame], *, allow_missing: bool = False) -> DataFrame:
    """The rows of every frame, columns matched by name (as `DataFrame.unionByName`; with
    `allow_missing`, a column a frame lacks is NULL in its rows)."""
    if len(frames) == 1:
        return frames[0]
    spark = frames[0].sparkSession
    jvm = JvmHandles.of(spark._jvm)
    plans = jvm.to_seq([frame._jdf.logicalPlan() for frame in frames])
    union = jvm.union(plans, True, allow_missing)
    return DataFrame(jvm.datasets.ofRows(spark._jsparkSession, union), spark)

