"""Spark reads one committed version of a Delta table, on any filesystem: the `streamjoin_delta`
Python data source, which the views a model publishes (its result, its changelog, its inputs'
snapshots) read.

A published view must show exactly one committed version, and Spark here has neither a Delta
reader (no delta-spark jar can be installed) nor an object-store connector. The data source lists
the version's data files from the Delta log with delta-rs, and its tasks read them with pyarrow
through the filesystem of their URI: nothing is linked or copied, and any location delta-rs and
pyarrow reach works. Spark registers it in every session of this Python environment by itself
(the module `pyspark_streamjoin`, found by Spark's lookup of `pyspark_*` modules).

Spark keeps no options for a catalog table of a Python data source, so a view passes them in its
table reference (`FROM <schema table> WITH ('path' = ..., 'version' = ...)`) to a table that only
holds the columns: `schema_table` makes one per set of columns and table read (its path, and which
files; a query reads each table at one version), in the `streamjoin_schemas` database; it holds no
data. Two tables read in one query never share one: Spark resolves a table once per query whatever
its options, so a model's two inputs with the same columns read through one schema table both read
the first.

Options: `path` (the table's URI), `version`, `files` (`live`, the version's data files;
`added`, every file the log added up to the version in commit order: an upsert changelog's
history; or `changes`, the live files at version `since` and then the change data feed of the
versions after it, each row with its `delta_log.CHANGE_TYPE`: a `cdf` input's history as a model read
it), `storage_options` (JSON; delta-rs's names, as registered for the location). The columns
`file_reads.FILE_POSITION` and `ROW_POSITION`, when the schema has them, number each row by its file's position
in that order and its position in the file; with `added` and `changes`, `COMMIT_VERSION` is the version
that wrote its file (`since` for the files of the table at that version).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..catalog import table_exists
from ..types import q, text
from . import delta_log, filesystem
from .file_reads import COMMIT_VERSION, read_file

NAME = "streamjoin_delta"
SCHEMAS = "streamjoin_schemas"


def reference(spark: SparkSession, path: str, table_version: int, schema: StructType, *, files: str = "live",
              since: int | None = None) -> str:
    """A table reference (for a FROM clause) that reads `schema`'s columns of the table at `path` as
    of `table_version`, from the `files` the module docstring names (`changes`: after version `since`)."""
    options = {"path": path, "version": str(table_version), "files": files}
    if since is not None:
        options["since"] = str(since)
    storage = filesystem.options_for(path)
    if storage:
        options["storage_options"] = json.dumps(storage, sort_keys=True)
    pairs = ", ".join(f"{text(k)} = {text(v)}" for k, v in options.items())
    read = json.dumps({k: v for k, v in options.items() if k != "version"}, sort_keys=True)
    return f"{schema_table(spark, schema, read)} WITH ({pairs})"


def schema_table(spark: SparkSession, schema: StructType, read: str) -> str:
    """The name of a table of this data source that has `schema`'s columns and nothing else, for the
    reads described by `read` (made once)."""
    ddl = ", ".join(f"{q(f.name)} {f.dataType.simpleString()}" for f in schema.fields)
    digest = hashlib.sha1("\n".join((ddl, read)).encode()).hexdigest()[:20]
    name = f"{SCHEMAS}.s_{digest}"
    if not table_exists(spark, name):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {SCHEMAS}")
        try:
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({ddl}) USING {NAME}")
        except AnalysisException:  # another process made it meanwhile
            if not table_exists(spark, name):
                raise
    return name


#: A task's share of a read, as Spark packs the files of its own scans (`spark.sql.files.maxPartitionBytes`,
#: and `spark.sql.files.openCostInBytes` counted for each file): a small table is one task, not one per file.
TASK_BYTES = 128 * 1024 * 1024
FILE_OPEN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class _File:
    """One data file to read: its position in the version's file order, URI, partition values, the
    positions of the rows its deletion vector deletes, and its size in bytes."""

    ordinal: int
    uri: str
    partition: Mapping[str, str | None]
    deleted: tuple[int, ...] = ()
    size: int = 0


@dataclass(frozen=True)
class _Files(InputPartition):
    """The files one task reads."""

    files: tuple[_File, ...]


def packed(files: Sequence[_File]) -> list[_Files]:
    """`files` in tasks of about TASK_BYTES each (a file's size plus FILE_OPEN_BYTES), in file order."""
    tasks: list[_Files] = []
    share: list[_File] = []
    total = 0
    for f in files:
        cost = f.size + FILE_OPEN_BYTES
        if share and total + cost > TASK_BYTES:
            tasks.append(_Files(tuple(share)))
            share, total = [], 0
        share.append(f)
        total += cost
    return tasks + [_Files(tuple(share))] if share else tasks


class DeltaVersionSource(DataSource):
    """The rows of one version of a Delta table (see the module docstring for the options)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        _register(self.options)
        return from_arrow_schema(delta_log.table_schema(self.options["path"], int(self.options["version"])))

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(dict(self.options), schema)


class _Reader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = options
        self.arrow = delta_log.arrow_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        _register(self.options)
        path, at, files = self.options["path"], int(self.options["version"]), self.options.get("files")
        if files == "changes":
            listed = list(_changes(path, int(self.options["since"]), at))
        elif files == "added":
            listed = [(f, {**f.partition, COMMIT_VERSION: str(f.version)})
                      for f in delta_log.added_between(path, -1, at, what=path)]
        else:
            listed = [(f, dict(f.partition)) for f in delta_log.data_files(path, at)]
        return packed([_File(i, f.uri, values, f.deleted, f.size) for i, (f, values) in enumerate(listed)])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, _Files):  # Spark reads one empty partition of a version without files
            return
        for f in partition.files:
            table = read_file(f.uri, self.arrow, _storage_options(self.options), ordinal=f.ordinal,
                              partition=f.partition, deleted=f.deleted)
            yield from table.to_batches()


def _changes(path: str, since: int, at: int) -> Iterator[tuple[delta_log.DataFile, dict[str, str | None]]]:
    """The files of a table's history as a model reading its change data feed from version `since`
    on reads them, in log order, each with the values that fill its columns (its partition values,
    and the change type of a file whose rows do not carry theirs)."""
    for change, f in delta_log.change_feed(path, None, since, what=path) + delta_log.change_feed(path, since, at, what=path):
        values = {**f.partition, COMMIT_VERSION: str(since if f.version is None else f.version)}
        yield f, values if change is None else {**values, delta_log.CHANGE_TYPE: change}


def _storage_options(options: Mapping[str, str]) -> dict[str, str]:
    return json.loads(options.get("storage_options") or "{}")


def _register(options: Mapping[str, str]) -> None:
    """Register the view's storage options in this process (a Python worker: no registry of the driver's)."""
    filesystem.register(options["path"], _storage_options(options))
