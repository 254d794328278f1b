"""A run's table writes, all in one Spark job.

Every table a run writes (each state side, the changelog, the result) is staged as a
DataFrame of its rows. `RunWriter.run` puts them in one wide frame — a target column says
whose row each is — and one `mapInArrow` pass writes every target's rows as Parquet files
inside its table (pyarrow on the executors, through the filesystem of the table's URI),
returning one row per file: its path, size, partition values and statistics. The same pass
evaluates the run's checks (frames whose rows fail the job, see `row_errors`), sums its
counters and gathers a few notes (short texts, such as the names of files a run replaces). The
driver receives file rows, sums and notes; no data.

A table whose rows a run retracts is merged instead (`merge`): its touched buckets' files and their
change go to one task per bucket, which rewrites them in Arrow (`bucket_merge`), in the same job.

A task that fails leaves at most files nobody commits: the run commits only the files of
the attempts whose results reached the driver.
"""
from __future__ import annotations

import json
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from deltalake.transaction import AddAction, RemoveAction
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import StructType

from ..one_partition import clustered
from ..types import q
from ..unions import union_by_name
from ..zset import WEIGHT, col
from .delta_log import arrow_schema
from .filesystem import options_for
from .write_specs import (FILE_ROWS, MERGE_BUCKET, MERGE_URI, MERGE_WEIGHT, NOTE, TARGET, VALUE, FoldSpec,
                          MergeSpec, TargetSpec, merge_column)


Action = AddAction | RemoveAction


class FileActions:
    """One table's file actions for a commit: files being written, and actions known already."""

    def __init__(self, writing: Sequence[Future] = (), known: Sequence[Action] = ()) -> None:
        self.writing = list(writing)
        self.known = list(known)

    def __add__(self, other: FileActions | Sequence[Action]) -> FileActions:
        if isinstance(other, FileActions):
            return FileActions(self.writing + other.writing, self.known + other.known)
        return FileActions(self.writing, self.known + list(other))

    def result(self) -> list[Action]:
        """Every action, once the files are written (a failed write raises here)."""
        return [a for f in self.writing for a in f.result()] + self.known


@dataclass
class StagedWrite:
    """Files written for one table in this run, waiting for the run's commits."""

    path: str
    actions: FileActions
    schema: StructType
    partition_by: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)  # extra commit info (e.g. a watermark)
    optional: bool = False  # commit only if it has actions or metadata (the table exists already)
    overwrite: bool = False  # replace every live file of the table, and its schema (a rebuild's swap)
    changes: FileActions | None = None  # its change data files (None: the table keeps no change data feed)


@dataclass
class _Target:
    spec: TargetSpec
    rows: DataFrame
    done: Future = field(default_factory=Future)
    merge: "Merge | None" = None  # a merge's target: its rows go to `bucket_merge`, not to the wide frame
    merge_slots: tuple[int, int, int] = (0, 0, 0)  # a merge's counter and its two notes: their list positions


@dataclass
class Merge:
    """A staged merge (`RunWriter.merge`): its files, and what the write pass finds, as futures."""

    actions: FileActions  # the files it writes
    replaced: Future  # the URIs of the files they replace
    unheld: Future  # the weight its change retracts beyond the rows held (0 when every retraction applied)
    examples: Future  # a few rows so retracted, as JSON
    schema: StructType  # the rows' columns (without the bucket)


class RunWriter:
    """Collects a run's table writes, checks and counters, and performs them in one Spark job."""

    def __init__(self, *, tag: str, parallelism: int) -> None:
        self.tag = tag
        self.parallelism = max(1, parallelism)
        self.targets: list[_Target] = []
        self.checks: list[DataFrame] = []
        self.counters: list[tuple[DataFrame | None, Future]] = []  # None: a merge's, summed by its tasks
        self.notes: list[tuple[DataFrame | None, Future]] = []  # None: a merge's, noted by its tasks
        self.slots: dict[str, list[str]] = {}  # a data type's wide columns, in order
        self.ran = False

    def write(self, df: DataFrame, path: str, *, partition_by: Sequence[str] = (),
              partition: Mapping[str, str | None] | None = None, folder: str = "data",
              fold: FoldSpec | None = None) -> FileActions:
        """Stage a DataFrame's rows as new files of the table at `path` (under its `folder`); its
        actions come with `run`.

        `partition_by` columns split the rows into Hive-style partition folders (and are not stored
        in the files); rows written without them get the fixed `partition` values in every file.
        With `fold` the tasks consolidate the rows before writing them (`arrow_fold`): `df` must hold
        each value of the fold's partition column in one partition, its rows one after another."""
        fields = df.schema.fields
        spec = TargetSpec(root=path, folder=f"{folder}/{self.tag}-{uuid.uuid4().hex[:12]}",
                          wide=self._slots([f.dataType.simpleString() for f in fields]),
                          names=tuple(f.name for f in fields),
                          partition_by=tuple(partition_by), partition=tuple((partition or {}).items()),
                          options=tuple(options_for(path).items()), fold=fold)
        target = _Target(spec, df)
        self.targets.append(target)
        return FileActions([target.done])

    def merge(self, change: DataFrame, files: DataFrame, path: str, *, bucket: str, schema: StructType,
              uri: str, spread: bool) -> Merge:
        """Stage the merge of a weighted change (`schema`'s columns, `bucket` and `zset.WEIGHT`) into the
        files of its buckets that `files` lists (`bucket`, and the file's URI in `uri`): each bucket's
        files are replaced by one with its rows and the change summed (`bucket_merge`), in the write pass.
        With `spread` its buckets go to tasks on every core also in a run planned in one partition
        (`one_partition.clustered`)."""
        listed = files.select(col(bucket).alias(MERGE_BUCKET), col(uri).alias(MERGE_URI))
        rows = change.select(col(bucket).alias(MERGE_BUCKET),
                             *[col(n).alias(merge_column(i)) for i, n in enumerate(schema.names)],
                             col(WEIGHT).alias(MERGE_WEIGHT))
        frame = clustered(rows.unionByName(listed, allowMissingColumns=True), col(MERGE_BUCKET), spread=spread)
        spec = TargetSpec(root=path, folder=f"data/{self.tag}-{uuid.uuid4().hex[:12]}", wide=(),
                          names=tuple(schema.names), partition_by=(bucket,), partition=(),
                          options=tuple(options_for(path).items()))
        target = _Target(spec, frame, merge_slots=(len(self.counters), len(self.notes), len(self.notes) + 1))
        target.merge = merge = Merge(FileActions([target.done]), Future(), Future(), Future(), schema)
        self.targets.append(target)
        self.counters.append((None, merge.unheld))
        self.notes += [(None, merge.replaced), (None, merge.examples)]
        return merge

    def check(self, failing: DataFrame) -> None:
        """Evaluate a frame in the write pass; its rows fail the job (see `row_errors.fail_when`)."""
        self.checks.append(failing)

    def count(self, df: DataFrame, value: Column) -> Future:
        """The sum of `value` over `df`'s rows, computed in the write pass."""
        done: Future = Future()
        self.counters.append((df.select(value.cast("long").alias(VALUE)), done))
        return done

    def note(self, df: DataFrame, text: Column) -> Future:
        """The distinct values of `text` over `df`'s rows (a few: they travel to the driver), gathered
        in the write pass."""
        done: Future = Future()
        self.notes.append((df.select(text.cast("string").alias(NOTE)).distinct(), done))
        return done

    def run(self) -> None:
        """Write every staged target, evaluate every check and counter: one Spark job."""
        self.ran = True
        waiting = self._waiting()
        try:
            passes = [self._wide().mapInArrow(_writer(tuple(t.spec for t in self.targets)), FILE_ROWS)]
            passes += [t.rows.mapInArrow(_merger(self._merge_spec(i)), FILE_ROWS)
                       for i, t in enumerate(self.targets) if t.merge is not None]
            rows = union_by_name(passes).collect()
        except BaseException as exc:
            for f in waiting:
                f.set_exception(exc)
            raise
        actions: list[list[AddAction]] = [[] for _ in self.targets]
        sums = [0] * len(self.counters)
        notes: list[set[str]] = [set() for _ in self.notes]
        for r in rows:
            if r["target"] < 0:
                notes[-2 - r["target"]].add(r["path"])
            elif r["target"] < len(self.targets):
                actions[r["target"]].append(AddAction(
                    path=r["path"], size=r["size"], partition_values=json.loads(r["partition"]),
                    modification_time=0, data_change=True, stats=r["stats"]))
            else:
                sums[r["target"] - len(self.targets)] += r["value"] or 0
        for target, adds in zip(self.targets, actions):
            target.done.set_result(sorted(adds, key=lambda a: a.path))
        for (_, done), total in zip(self.counters, sums):
            done.set_result(total)
        for (_, done), texts in zip(self.notes, notes):
            done.set_result(sorted(texts))

    def close(self) -> None:
        """Fail the actions of a writer that never ran (its run stopped before writing)."""
        if not self.ran:
            for f in self._waiting():
                f.set_exception(RuntimeError("the run stopped before its files were written"))
            self.ran = True

    def _slots(self, types: Sequence[str]) -> tuple[str, ...]:
        """The wide columns of a target whose columns have these types: its k-th column of a type
        takes that type's k-th slot, which every target shares. A wide row belongs to one target and
        fills only its slots, so the frame is as wide as the widest target per type, not as all
        targets together (each null cell costs Spark's Arrow conversion and the write pass)."""
        wide, seen = [], dict.fromkeys(types, 0)
        for kind in types:
            slots = self.slots.setdefault(kind, [])
            if seen[kind] == len(slots):
                slots.append(f"_s{sum(map(len, self.slots.values()))}")
            wide.append(slots[seen[kind]])
            seen[kind] += 1
        return tuple(wide)

    def _merge_spec(self, index: int) -> MergeSpec:
        """The executors' spec of the merge staged as target `index`: where its answers go."""
        target = self.targets[index]
        assert target.merge is not None
        counter, replaced, examples = target.merge_slots
        return MergeSpec(target.spec, arrow_schema(target.merge.schema), files=index,
                         unheld=len(self.targets) + counter, replaced=-2 - replaced, examples=-2 - examples)

    def _waiting(self) -> list[Future]:
        return [t.done for t in self.targets] + [d for _, d in self.counters] + [d for _, d in self.notes]

    def _wide(self) -> DataFrame:
        """Every target's rows, every counter's values and every check in one frame of wide rows
        (each branch fills only its own columns; the union makes the others null)."""
        n = len(self.targets)
        frames = [t.rows.selectExpr(f"{i} AS {TARGET}", *[f"{q(c)} AS {w}" for w, c in zip(t.spec.wide, t.spec.names)])
                  for i, t in enumerate(self.targets) if t.merge is None]
        frames += [df.selectExpr(f"{n + i} AS {TARGET}", VALUE)
                   for i, (df, _) in enumerate(self.counters) if df is not None]
        frames += [df.selectExpr(f"{-2 - i} AS {TARGET}", NOTE)
                   for i, (df, _) in enumerate(self.notes) if df is not None]
        frames += [df.selectExpr(f"-1 AS {TARGET}") for df in self.checks]
        wide = union_by_name(frames, allow_missing=True)
        return wide.coalesce(self.parallelism)


def _writer(specs: tuple[TargetSpec, ...]):
    """The function each task of the write pass runs over its wide Arrow batches."""
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from .parquet_files import write_task  # executors import the writing code, not the driver's state

        yield from write_task(batches, specs)

    return write


def _merger(spec: MergeSpec):
    """The function each task of a merge runs over its batches (`bucket_merge.merge_task`)."""
    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from .bucket_merge import merge_task

        yield from merge_task(batches, spec)

    return merge
