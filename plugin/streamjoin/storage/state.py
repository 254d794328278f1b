"""State tables: a join side's rows as a Z-set in a Delta table, bucketed by join key.

Each run appends its changes (weights, and degree changes for sides that track how many
rows of the other side match each row) as a few *level-0* files holding rows of every
bucket (partition value NULL), written as they come, with no shuffle and no file per bucket.
Every so often a run folds level 0 into per-bucket files instead, and merges the small files of
a bucket that holds many (size-tiered: a large file is rewritten only once the smaller ones add
up to its size, see `merged_files`). A read takes level 0 and
the files of the touched buckets, and keeps the rows of the touched keys; the caller sums
them. Where the join key is a stored column Arrow compares as Spark does, the tasks reading
the bucket files keep only the touched keys' rows, so Spark receives those rather than whole
buckets; so do the tasks reading level 0 once it holds `LEVEL0_ROWS` rows (after a large run).
Level 0 is folded once it holds `LEVEL0_FILES` files or `LEVEL0_ROWS` rows, so a run
reads few rows of it. A fold's rows are summed in Arrow as the write pass writes them
(`arrow_fold`), where Arrow groups the columns as Spark does. A run therefore writes in
proportion to its changes and hands Spark rows in proportion to the state of the keys it touches.
"""
from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass
from functools import reduce
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (ByteType, DataType, DateType, IntegerType, LongType, ShortType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from ..errors import InputError
from ..one_partition import clustered
from ..run_values import run_value
from ..zset import WEIGHT, col
from . import bucket_merge, delta_log, file_reads
from .file_reads import read_chosen
from .write_specs import FoldSpec
from .writes import FileActions, RunWriter

COMPACT_AT = 8  # files in one bucket that trigger its compaction
LEVEL0_FILES = 16  # level-0 files that trigger folding them into per-bucket files
LEVEL0_ROWS = 20_000  # level-0 rows (by file statistics) that trigger it too: every run reads all of level 0
DEGREE = "_degree"
BUCKET = "_bucket"
UPDATED = "_updated"  # run time (epoch ms) a row's state was last written, for state_ttl


_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
#: Spark types of a key whose stored values Arrow compares exactly as Spark does (`file_reads.rows_with_keys`).
_ARROW_EXACT: dict[str, tuple[type[DataType], ...]] = {
    "tinyint": _INTEGRAL, "smallint": _INTEGRAL, "int": _INTEGRAL, "bigint": _INTEGRAL, "string": (StringType,),
    "date": (DateType,), "timestamp": (TimestampType,), "timestamp_ntz": (TimestampNTZType,)}


def plain_key_columns(schema: StructType, key_exprs: Sequence[str], key_types: Sequence[str]) -> tuple[str, ...]:
    """The stored columns that are the join key, in order, when each key part is a bare column of
    `schema` whose values Arrow compares as Spark compares the key's type; else () (reads then keep
    the touched keys' rows in Spark only)."""
    fields = {f.name: f.dataType for f in schema.fields}
    out = []
    for expr, key_type in zip(key_exprs, key_types):
        name = expr.strip()
        name = name[1:-1].replace("``", "`") if name.startswith("`") and name.endswith("`") else name
        stored = fields.get(name)
        if stored is None or type(stored) not in _ARROW_EXACT.get(key_type, ()):
            return ()
        out.append(name)
    return tuple(out)


def level0(files: Sequence[delta_log.DataFile]) -> list[delta_log.DataFile]:
    """The files of level 0 (partition `_bucket` NULL: rows of any bucket) among a table's files."""
    return [f for f in files if f.partition[BUCKET] is None]


def holds_many_rows(level0_files: Sequence[delta_log.DataFile]) -> bool:
    """Whether level 0's files hold `LEVEL0_ROWS` rows or more (by file statistics), as after a large run."""
    return sum(f.num_records for f in level0_files) >= LEVEL0_ROWS


def crowded_buckets(files: Sequence[delta_log.DataFile]) -> dict[int, list[delta_log.DataFile]]:
    """The files of each bucket that holds `COMPACT_AT` files or more, by bucket."""
    per_bucket: dict[int, list[delta_log.DataFile]] = defaultdict(list)
    for f in files:
        if f.partition[BUCKET] is not None:
            per_bucket[int(f.partition[BUCKET])].append(f)
    return {b: fs for b, fs in per_bucket.items() if len(fs) >= COMPACT_AT}


def merged_files(files: Sequence[delta_log.DataFile], least: int | None = None) -> list[delta_log.DataFile]:
    """The files of a crowded bucket that its compaction merges: its `least` smallest (by default
    half of `COMPACT_AT`, at least 2), then each next larger one no larger than those taken together.
    A bucket's files are Z-set fragments that reads sum, so any of them merge into one; a large file
    stays until the smaller ones add up to its size, so a row is rewritten about log2(bucket / fold)
    times rather than at every few folds.

    >>> sizes = lambda fs: [f.size for f in fs]
    >>> files = [delta_log.DataFile("", {}, 0, size=s) for s in (1000, 9, 10, 30, 2)]
    >>> sizes(merged_files(files, 2)), sizes(merged_files(files, 4)), sizes(merged_files(files, 5))
    ([2, 9, 10], [2, 9, 10, 30], [2, 9, 10, 30, 1000])
    """
    least = max(2, COMPACT_AT // 2) if least is None else least
    taken: list[delta_log.DataFile] = []
    for f in sorted(files, key=lambda f: f.size):
        if len(taken) >= least and f.size > sum(t.size for t in taken):
            break
        taken.append(f)
    return taken


def no_retraction_in(files: Sequence[delta_log.DataFile]) -> bool:
    """True when every row of a state table's `files` has a positive weight, as their statistics say: no
    retraction is stored apart from the row it retracts, so rows read as stored only add."""
    return all(f.num_records == 0 or (f.stat("minValues", WEIGHT) or 0) > 0 for f in files)


class StateLayout(str, enum.Enum):
    """How a side's rows are identified, chosen from its key properties as Flink does."""

    JOIN_KEY_CONTAINS_UNIQUE_KEY = "join key contains unique key"  # at most one row per join key
    UNIQUE_KEY = "unique key"  # at most one row per unique key
    NO_UNIQUE_KEY = "no unique key"  # any row, counted

    @classmethod
    def choose(cls, unique_key: Sequence[str], key_exprs: Sequence[str]) -> "StateLayout":
        """The layout of a side with `unique_key` (its input's column names) joined on `key_exprs`
        (over internal names, `<alias>__<column>`)."""
        join_key = {e.strip("`").split("__", 1)[-1].lower() for e in key_exprs}
        if unique_key and {u.lower() for u in unique_key} <= join_key:
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
    bucket_exprs: Sequence[str] = ()  # Spark SQL computing the bucket's hash inputs from a stored row
    buckets: int = 16
    file_keys: tuple[str, ...] = ()  # the stored columns that are the key, if reads may filter by them

    @property
    def stored_schema(self) -> StructType:
        fields = list(self.schema.fields) + [StructField(WEIGHT, LongType())]
        if self.tracks_degree:
            fields.append(StructField(DEGREE, LongType()))
        fields.append(StructField(UPDATED, LongType()))
        return StructType(fields)

    def holds_no_retraction(self) -> bool:
        """True when every stored fragment has a positive weight (`no_retraction_in`)."""
        return no_retraction_in(delta_log.data_files(self.path, self.version))

    def check_layout(self, join: str, model: str) -> None:
        """Refuse a table an earlier streamjoin wrote for `join` (e.g. "the ASOF join j1") as an appended
        table, read whole every run (it has no `_bucket` column): the model needs one rebuild."""
        if self.version is not None and BUCKET not in delta_log.table_schema(self.path, self.version).names:
            raise InputError(f"{join}'s state was written by an earlier streamjoin, which read it whole every run; "
                             "this one keeps it by key. Rebuild the model once: dbt run --full-refresh --select "
                             f"{model}", model=model)

    def read(self, spark: SparkSession, touched: DataFrame | None, with_keys, carry: Sequence[str] = ()) -> DataFrame:
        """Stored rows of the touched keys, found in level 0 and the files of their buckets.

        `touched` has the key columns and their bucket (one row per key); `touched=None` reads all. Rows
        are not consolidated here: the caller sums them together with the run's changes. `with_keys` adds
        the key columns to a frame of state rows; each row also gets its key's `carry` columns of `touched`.
        The touched buckets' files are chosen inside the run's job (`file_reads`), so no job runs to learn
        the buckets first.
        """
        files = delta_log.data_files(self.path, self.version)
        if touched is None:
            return with_keys(file_reads.read(spark, files, self.stored_schema))
        bucketed = [f for f in files if f.partition[BUCKET] is not None]
        stored_keys = tuple(zip(self.key_columns, self.file_keys))
        chosen = read_chosen(spark, bucketed, self.stored_schema, column=BUCKET, wanted=touched, keys=stored_keys)
        unbucketed = level0(files)
        keyed = file_reads.WantedKeys(touched, stored_keys) if stored_keys and holds_many_rows(unbucketed) else None
        held = file_reads.read(spark, unbucketed, self.stored_schema, keyed=keyed)
        rows = with_keys(held.unionByName(chosen))
        # touched's columns renamed, as the file choice above reads touched too: a self-join otherwise
        renamed = [f"_touched{i}" for i in range(len(self.key_columns))]
        keys = touched.select(*[col(k).alias(r) for k, r in zip(self.key_columns, renamed)],
                              *[col(c).alias(f"_touched_{c}") for c in carry])
        cond = None
        for k, r in zip(self.key_columns, renamed):
            c = col(k).eqNullSafe(col(r))
            cond = c if cond is None else cond & c
        if not carry:
            return rows.join(keys, cond, "left_semi")
        return rows.join(keys, cond, "inner").select(*rows.columns, *[col(f"_touched_{c}").alias(c) for c in carry])

    def stage(self, spark: SparkSession, changes: DataFrame, writer: RunWriter, *,
              expire_before: int | None = None) -> FileActions:
        """Stage appended rows (schema columns, weight, degree, updated, bucket) with the run's writer.

        The rows go to level 0. Once level 0 holds `LEVEL0_FILES` files or `LEVEL0_ROWS` rows, or a bucket
        `COMPACT_AT` files, the run compacts instead: level 0, the crowded buckets' small files (`merged_files`)
        and its changes are consolidated into per-bucket files (dropping rows that summed to nothing), and
        the old files removed. With `expire_before` the crowded buckets are merged whole, as expiry needs
        every row of a key in hand, and rows idle since before it are dropped from them.
        """
        names = [f.name for f in self.stored_schema.fields]
        files = delta_log.data_files(self.path, self.version)
        unbucketed = level0(files)
        crowded = crowded_buckets(files)
        if not crowded and len(unbucketed) < LEVEL0_FILES and not holds_many_rows(unbucketed):
            return writer.write(changes.select(*[col(c) for c in names]), self.path, partition={BUCKET: None})
        old_files = unbucketed + [f for b in sorted(crowded) for f in (
            crowded[b] if expire_before is not None else merged_files(crowded[b]))]
        old = file_reads.read(spark, old_files, self.stored_schema).withColumn(
            BUCKET, F.pmod(F.xxhash64(*[F.expr(e) for e in self.bucket_exprs]), F.lit(self.buckets)).cast("int"))
        stored = [col(c) for c in names + [BUCKET]]
        rows = old.select(*stored).unionByName(changes.select(*stored))
        expiring = tuple(sorted(crowded)) if expire_before is not None else ()
        fold = FoldSpec(sums=(WEIGHT, DEGREE) if self.tracks_degree else (WEIGHT,), latest=UPDATED, partition=BUCKET,
                        expire_before=expire_before, expiring=expiring)
        if not bucket_merge.mergeable(self.schema):
            rows, fold = self._folded(rows, fold), None
        # each bucket's file sorted by key: a read of a few keys skips the row groups that hold none (`file_reads`)
        sorted_rows = clustered(rows, col(BUCKET)).sortWithinPartitions(col(BUCKET), *[col(k) for k in self.file_keys])
        actions = writer.write(sorted_rows, self.path, partition_by=[BUCKET], fold=fold)
        return actions + delta_log.remove_actions(old_files)

    def _folded(self, rows: DataFrame, fold: FoldSpec) -> DataFrame:
        """`rows` folded by Spark as the write pass folds them in Arrow (`arrow_fold.folded`): for columns
        that Arrow does not group as Spark does."""
        names = [c.name for c in self.commit_schema.fields]
        summed = [F.sum(col(s)).cast("long").alias(s) for s in fold.sums]
        rows = (rows.groupBy(*[col(c) for c in names if c not in fold.sums and c != fold.latest])
                .agg(*summed, F.max(col(fold.latest)).alias(fold.latest))
                .where(reduce(lambda a, b: a | b, [col(s) != 0 for s in fold.sums])))
        if fold.expiring:
            kept = col(fold.latest) >= run_value(fold.expire_before)
            rows = rows.where(kept | ~col(BUCKET).isin(list(fold.expiring)))
        return rows.select(*[col(c) for c in names])

    @property
    def commit_schema(self) -> StructType:
        return StructType(list(self.stored_schema.fields) + [StructField(BUCKET, IntegerType())])
