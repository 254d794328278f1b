"""State tables: a join side's rows as a Z-set in a Delta table, bucketed by join key.

Each run appends its changes (weights, and degree changes for sides that track how many
rows of the other side match each row); a read consolidates the rows of the touched
buckets and keeps those of the touched keys. A run therefore writes in proportion to its
changes and reads in proportion to the state of the keys it touches.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from . import delta_log
from .zset import WEIGHT, col

DEGREE = "_degree"
BUCKET = "_bucket"


class StateLayout(str, enum.Enum):
    """How a side's rows are identified, chosen from its key properties as Flink does."""

    JOIN_KEY_CONTAINS_UNIQUE_KEY = "join key contains unique key"  # at most one row per join key
    UNIQUE_KEY = "unique key"  # at most one row per unique key
    NO_UNIQUE_KEY = "no unique key"  # any row, counted

    @classmethod
    def choose(cls, unique_key: Sequence[str], join_key: Sequence[str]) -> "StateLayout":
        if unique_key and set(u.lower() for u in unique_key) <= set(j.lower() for j in join_key):
            return cls.JOIN_KEY_CONTAINS_UNIQUE_KEY
        return cls.UNIQUE_KEY if unique_key else cls.NO_UNIQUE_KEY


@dataclass
class StateTable:
    """One side's state: `columns` (a Spark schema) plus weight, optional degree, and bucket."""

    path: str
    schema: StructType
    key_columns: Sequence[str]
    tracks_degree: bool
    version: int | None  # the version this run reads (pinned at the run's start)

    @property
    def stored_schema(self) -> StructType:
        fields = list(self.schema.fields) + [StructField(WEIGHT, LongType())]
        if self.tracks_degree:
            fields.append(StructField(DEGREE, LongType()))
        return StructType(fields)

    def read(self, spark: SparkSession, touched: DataFrame | None, buckets: list[int] | None, with_keys) -> DataFrame:
        """Stored rows of the touched keys (`touched` has the key columns), found in `buckets`.

        Rows are not consolidated here: the caller sums them together with the run's changes.
        `with_keys` adds the key columns to a frame of state rows. `touched=None` reads all.
        """
        files = delta_log.data_files(self.path, self.version, partitions=buckets, partition_column=BUCKET)
        rows = with_keys(delta_log.read(spark, files, self.stored_schema))
        if touched is not None and files:
            keys = touched.select(*[col(k) for k in self.key_columns])
            cond = None
            for k in self.key_columns:
                c = rows[k].eqNullSafe(keys[k])
                cond = c if cond is None else cond & c
            rows = rows.join(F.broadcast(keys), cond, "left_semi")
        return rows

    def stage(self, changes: DataFrame, *, tag: str) -> list:
        """Write appended rows (schema columns, weight, degree, bucket) as files; commit nothing."""
        names = [f.name for f in self.schema.fields] + [WEIGHT] + ([DEGREE] if self.tracks_degree else []) + [BUCKET]
        return delta_log.write_files(changes.select(*[col(c) for c in names]), self.path,
                                     partition_by=[BUCKET], tag=tag)

    @property
    def commit_schema(self) -> StructType:
        return StructType(list(self.stored_schema.fields) + [StructField(BUCKET, IntegerType())])
