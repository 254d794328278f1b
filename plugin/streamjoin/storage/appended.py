"""A state table that runs append their rows to, rewritten with its live rows now and then.

The temporal and window joins keep each side this way: a run reads the whole table (as of
the version the run pinned), appends this run's rows, and once the table holds `COMPACT_AT` files
rewrites it with the rows that are still live instead, so it stays bounded by the live rows plus
a few runs of appends. Nothing is committed here: the run commits the staged write with the rest.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from . import delta_log, file_reads
from .state import no_retraction_in
from .writes import RunWriter, StagedWrite

COMPACT_AT = 8  # files in the table that make a run rewrite it with its live rows


class AppendedTable:
    """One appended state table as a run sees it: its files at the pinned version, and its schema."""

    def __init__(self, path: str, version: int | None, schema: StructType) -> None:
        self.path = path
        self.version = version
        self.schema = schema
        self.files = delta_log.data_files(path, version)

    def rows(self, spark: SparkSession) -> DataFrame:
        return file_reads.read(spark, self.files, self.schema)

    def holds_no_retraction(self) -> bool:
        """True when every row has a positive weight (`state.no_retraction_in`)."""
        return no_retraction_in(self.files)

    def stage(self, writer: RunWriter, appends: DataFrame, live: DataFrame,
              metadata: dict[str, str] | None = None) -> StagedWrite:
        """Write this run's `appends`, or, once the table holds `COMPACT_AT` files, all of it again as
        `live` (its old files removed in the same commit)."""
        if len(self.files) >= COMPACT_AT:
            actions = writer.write(live, self.path) + delta_log.remove_actions(self.files)
        else:
            actions = writer.write(appends, self.path)
        return StagedWrite(self.path, actions, self.schema, (), dict(metadata or {}))
