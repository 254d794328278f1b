"""Frames of the few rows the driver holds (file listings, empty inputs), as Spark's local relations.

PySpark's `createDataFrame` of a Python list makes an RDD of pickled rows: a plan leaf that Spark
cannot see into, so an empty one stays in every union above it, and each of its partitions is one
more task in the stage that reads it. Built from an Arrow table, the same rows are a
`LocalRelation`: its rows travel in the plan, and an empty one is pruned by the optimizer.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from .one_partition import gathered


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: StructType | str) -> DataFrame:
    """A frame of `rows` (tuples in the order of `schema`'s fields; `schema` a StructType or DDL)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    struct = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    arrow = to_arrow_schema(struct, timezone="UTC")
    columns = list(zip(*rows)) if rows else [()] * len(struct.fields)
    table = pa.table([pa.array(values, f.type) for values, f in zip(columns, arrow)], schema=arrow)
    frame = spark.createDataFrame(table, struct)
    return gathered(frame) if rows else frame  # an empty one is pruned: no partition to claim


@lru_cache(maxsize=256)
def empty_frame(spark: SparkSession, schema: StructType | str) -> DataFrame:
    """A frame with `schema` and no rows: one per session and schema (a frame is immutable, and each
    run of a model asks for the same few, at about 8 ms each to build)."""
    return local_frame(spark, [], schema)
