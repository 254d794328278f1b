"""Z-sets: rows with integer weights, the algebra every operator computes in.

A changelog row of kind +I/+U is weight +1, -U/-D is weight -1. `consolidate` sums the
weights of identical rows and drops zeros, so a run's net change has no cancelling pairs.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .one_partition import gathered
from .types import ROW_KINDS, RowKind, q

WEIGHT = "_weight"


@lru_cache(maxsize=4096)
def col(name: str) -> SparkColumn:
    """A column reference that is safe for any name (dots, spaces, backticks).

    Columns are immutable, so one object per name serves every plan (a run builds thousands of
    references, each a round trip to the JVM)."""
    return F.col(q(name))


def consolidate(df: DataFrame, columns: Sequence[str], *, weight: str = WEIGHT) -> DataFrame:
    """Sum the weights of identical rows (NULLs compare equal, as in GROUP BY) and drop zeros."""
    return (
        gathered(df).groupBy(*[col(c) for c in columns])
        .agg(F.sum(col(weight)).cast("long").alias(weight))
        .where(col(weight) != 0)
    )


def from_changelog(df: DataFrame, columns: Sequence[str], op_column: str) -> DataFrame:
    """Turn changelog rows (data + row kind) into weighted rows (data + `_weight`)."""
    weight = F.when(col(op_column).isin(RowKind.INSERT.value, RowKind.UPDATE_AFTER.value), F.lit(1)).otherwise(F.lit(-1))
    return df.select(*[col(c) for c in columns], weight.cast("long").alias(WEIGHT))


def bad_row_kinds_test(op_column: str) -> SparkColumn:
    """True for a row whose row kind is NULL or not one of +I, -U, +U, -D."""
    return col(op_column).isNull() | ~col(op_column).isin(*ROW_KINDS)


def to_changelog(
    zset: DataFrame,
    columns: Sequence[str],
    *,
    unique_key: Sequence[str] = (),
    weight: str = WEIGHT,
    row_kind: str = "_row_kind",
) -> DataFrame:
    """Expand weighted rows into one changelog row per unit of weight.

    With a unique key, a key that both loses and gains rows in the change is written as
    -U/+U (an update); otherwise retractions are -D and additions +I.
    """
    negative = col(weight) < 0
    if unique_key:
        by_key = Window.partitionBy(*[col(c) for c in unique_key])
        updated = (F.max(F.when(negative, 1).otherwise(0)).over(by_key) == 1) & (
            F.max(F.when(~negative, 1).otherwise(0)).over(by_key) == 1
        )
        kind = (
            F.when(negative & updated, F.lit(RowKind.UPDATE_BEFORE.value))
            .when(negative, F.lit(RowKind.DELETE.value))
            .when(updated, F.lit(RowKind.UPDATE_AFTER.value))
            .otherwise(F.lit(RowKind.INSERT.value))
        )
    else:
        kind = F.when(negative, F.lit(RowKind.DELETE.value)).otherwise(F.lit(RowKind.INSERT.value))
    expanded = zset.select(
        *[col(c) for c in columns],
        kind.alias(row_kind),
        F.explode(F.array_repeat(F.lit(1), F.abs(col(weight)).cast("int"))).alias("_unit"),
    )
    return expanded.drop("_unit")


def negate(zset: DataFrame, *, weight: str = WEIGHT) -> DataFrame:
    """The Z-set with every weight's sign flipped."""
    return zset.withColumn(weight, -col(weight))
