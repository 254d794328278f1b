"""What the write pass's tasks and the driver agree on (`writes`): the wide frame's columns, the rows
a task returns, and the specs of a task's tables. Executors import this, not the driver's writer, so
a fresh Python worker's writer imports neither delta-rs nor the driver's side of the write pass."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

TARGET = "_target"
VALUE = "_value"
NOTE = "_note"
#: What the write pass returns per file written, and per counter and task.
#: A note's row carries its text as `path`.
FILE_ROWS = "target int, path string, size long, partition string, stats string, value long"
#: A merge's frame (`RunWriter.merge`): a row's bucket; a file of the bucket (on a row of its own,
#: NULL on the change's rows); a change row's weight. Its row columns are named by position
#: (`merge_column`), as the wide frame's slots are: Spark's Python maps resolve every column by name.
MERGE_BUCKET = "__merge_bucket"
MERGE_URI = "__merge_uri"
MERGE_WEIGHT = "__merge_weight"


def merge_column(position: int) -> str:
    """The name in a merge's frame of the rows' column at `position`."""
    return f"__merge_{position}"


@dataclass(frozen=True)
class FoldSpec:
    """How a task consolidates a target's rows before writing them (`arrow_fold`): the rows of a Z-set
    (`state.StateTable.stage`), arriving grouped by `partition`; one row per distinct row is written."""

    sums: tuple[str, ...]  # summed per distinct row; a row whose sums are all 0 is dropped
    latest: str  # its largest value per distinct row is kept
    partition: str  # the column the rows arrive grouped by (each value's rows one after another)
    expire_before: int | None = None  # rows of the `expiring` partitions whose `latest` is below it are dropped
    expiring: tuple[int, ...] = ()


@dataclass(frozen=True)
class TargetSpec:
    """What an executor needs to write one table's rows: where, which wide columns, how partitioned."""

    root: str  # the table's URI or path
    folder: str  # new files go under root/folder
    wide: tuple[str, ...]  # the target's columns in the wide frame (slots it shares with other targets)
    names: tuple[str, ...]  # their names in the table
    partition_by: tuple[str, ...]  # columns whose values make the files' partition folders
    partition: tuple[tuple[str, str | None], ...]  # fixed partition values of every file
    options: tuple[tuple[str, str], ...] = ()  # the root's storage options (see `storage.filesystem`)
    fold: FoldSpec | None = None  # consolidate the rows before writing them


@dataclass(frozen=True)
class MergeSpec:
    """What a task needs to merge its buckets (`bucket_merge`): the table, the rows' Arrow schema, and
    where its file rows, counter and notes go in the write pass's answer (`FILE_ROWS`)."""

    target: TargetSpec  # the table; its `partition_by` is the bucket's partition column
    schema: pa.Schema  # the stored rows' columns (the bucket is the partition value, not stored)
    files: int  # the target of the files it writes
    unheld: int  # the counter of weight retracted beyond the rows held
    replaced: int  # the note of the URIs of the files it replaced
    examples: int  # the note of a few rows retracted beyond those held, as JSON
