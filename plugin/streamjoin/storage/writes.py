"""A run's data-file writes, started as soon as they are staged and run side by side.

Each write is one Spark job. Started on a few threads, the jobs of a run's tables (state,
changelog, result) overlap with each other and with the driver's planning of what comes
next; the run waits for all of them before its first commit.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from deltalake.transaction import AddAction, RemoveAction
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType
from pyspark.util import inheritable_thread_target

from . import delta_log

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


class FileWriter:
    """Starts data-file writes on its threads; `close` waits for every write it started."""

    def __init__(self, threads: int = 4) -> None:
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="streamjoin-write")
        self.started: list[Future] = []

    def write(self, df: DataFrame, path: str, *, partition_by: Sequence[str] = (), tag: str,
              after: FileActions | None = None, partition: Mapping[str, str | None] | None = None) -> FileActions:
        """Start writing a DataFrame's rows as new files of the table at `path` (see `delta_log.write_files`),
        once the writes of `after` are done (when they compute intermediate results `df` reads)."""
        def write() -> list[Action]:
            if after is not None:
                after.result()
            return delta_log.write_files(df, path, partition_by=partition_by, tag=tag, partition=partition)

        job = inheritable_thread_target(df.sparkSession)(write)
        future = self.pool.submit(job)
        self.started.append(future)
        return FileActions([future])

    def close(self) -> None:
        """Wait for every started write (also after a failure, so no job outlives the run's data)."""
        wait(self.started)
        self.pool.shutdown()


@dataclass
class StagedWrite:
    """Files written for one table in this run, waiting for the run's commits."""

    path: str
    actions: FileActions
    schema: StructType
    partition_by: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)  # extra commit info (e.g. a watermark)
    optional: bool = False  # commit only if it has actions or metadata (the table exists already)
