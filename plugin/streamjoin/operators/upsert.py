"""Upsert inputs to changelogs, as Flink's ChangelogNormalize does, in bulk.

An upsert input says only what each key's row is now. Per run, the newest version of every
key the run touches (its sequence column first, then its place in the Delta log) replaces the
key's previous version, which lives in this operator's state table: the change is the new
row with weight +1 and the previous row with weight -1, consolidated (an unchanged row and a
delete of an absent key change nothing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..run_values import run_value
from ..spec import InputSpec
from ..storage.formats import ORDER, data_schema
from ..storage.state import BUCKET, UPDATED, StateTable
from ..types import RowKind
from ..zset import WEIGHT, col, consolidate, q


@dataclass(frozen=True)
class UpsertKey:
    """The unique key of an upsert input, as state key columns `_uk<i>` and their bucket."""

    spec: InputSpec
    buckets: int

    @property
    def key_columns(self) -> list[str]:
        return [f"_uk{i}" for i in range(len(self.spec.unique_key))]

    @property
    def key_exprs(self) -> list[str]:
        return [q(k) for k in self.spec.unique_key]

    def with_keys(self, df: DataFrame) -> DataFrame:
        return df.select("*", *[F.expr(e).alias(k) for e, k in zip(self.key_exprs, self.key_columns)])

    def bucket(self) -> F.Column:
        return F.pmod(F.xxhash64(*[col(k) for k in self.key_columns]), F.lit(self.buckets)).cast("int")

    def state(self, path: str, version: int | None) -> StateTable:
        return StateTable(path=path, schema=data_schema(self.spec), key_columns=self.key_columns, tracks_degree=False,
                          version=version, bucket_exprs=self.key_exprs, buckets=self.buckets)


def normalize(spark: SparkSession, spec: InputSpec, upserts: DataFrame, key: UpsertKey, state: StateTable,
              now_ms: int, persist: Callable[[DataFrame], DataFrame]) -> tuple[DataFrame, DataFrame]:
    """The run's change of the input (columns + weight) and the rows to append to its state."""
    names = data_schema(spec).names
    newest_first = [col(spec.sequence_column).desc_nulls_last()] if spec.sequence_column else []
    window = Window.partitionBy(*[col(k) for k in spec.unique_key]).orderBy(*newest_first, col(ORDER).desc())
    latest = persist(key.with_keys(upserts.withColumn("_n", F.row_number().over(window)).where(col("_n") == 1)))
    touched = persist(latest.select(*[col(k) for k in key.key_columns]).withColumn(BUCKET, key.bucket()))
    stored = state.read(spark, touched, key.with_keys)
    previous = stored.select(*[col(c) for c in names], (-col(WEIGHT)).alias(WEIGHT))
    current = latest.where(col(spec.op_column) != RowKind.DELETE.value).select(
        *[col(c) for c in names], F.lit(1).cast("long").alias(WEIGHT))
    change = persist(consolidate(previous.unionByName(current), names))
    appends = key.with_keys(change).select(*[col(c) for c in names], col(WEIGHT),
                                           run_value(now_ms).alias(UPDATED), key.bucket().alias(BUCKET))
    return change, appends
