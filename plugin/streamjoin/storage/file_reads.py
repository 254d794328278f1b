"""Reading data files inside a Spark job, the files chosen by a frame computed in that same job.

Spark's Parquet scan fixes its file list when the plan is made, but a run learns which state
buckets it touches only as it computes its changes. Choosing the files on the executors keeps
that inside the run's one job: the candidate files are a small frame (uri, partition value),
semi-joined with the wanted partition values, and each task reads its files with pyarrow
through the filesystem of their URI. No job runs first to bring the wanted values to the driver.

A read can carry the wanted keys too (`read_chosen` with `keys`): each file's row then comes with the keys
of its partition, and the task keeps only the rows whose key is among them (or holds a NULL,
which Arrow's equality cannot decide), so Spark receives the touched keys' rows rather than
whole files.

A file with a deletion vector (`DataFile.deleted`: an input written by an engine that deletes rows
without rewriting files) is read by those tasks too, which drop the rows it deletes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..local_rows import empty_frame, local_frame
from ..one_partition import gathered
from ..unions import union_by_name
from ..zset import col
from .delta_log import DataFile, arrow_schema
from .filesystem import is_local, options_for

URI = "_uri"
KEYS = "_keys"
#: The positions of a listed file's rows that its deletion vector deletes (the column is there when a file has them).
DELETED = "_deleted"
#: With `positions`: a row's file (its position in the files read) and its position in that file.
FILE_POSITION = "__file_position"
ROW_POSITION = "__row_position"
#: A row's commit: the version of the Delta log that added its file (a history's rows, `version_source`).
COMMIT_VERSION = "__commit_version"


@dataclass(frozen=True)
class WantedKeys:
    """The keys a read wants: `wanted`'s rows, each key part a column of `wanted` paired with the
    stored column holding the same values (`keys`; the stored values compare in Arrow as Spark
    compares them, `state.plain_key_columns`)."""

    wanted: DataFrame
    keys: tuple[tuple[str, str], ...]


def read(spark: SparkSession, files: Sequence[DataFile], schema: StructType, *, positions: bool = False,
         keyed: WantedKeys | None = None) -> DataFrame:
    """Read data files under a known schema (no inference, no partition discovery): with Spark's
    Parquet scan where they are local and whole, else with `read_files` (Spark has no connector of its
    own for object stores here: no Hadoop cloud connector can be installed; nor does it read deletion vectors).

    Columns of `schema` that are partition columns of the files get each file's partition value;
    with `positions`, each row gets `FILE_POSITION` and `ROW_POSITION` too. With `keyed` (its stored
    key columns stored in the files), the files are read by `read_files`, whose tasks hand Spark
    only the rows of the wanted keys (and those with a NULL key part): the caller still keeps
    exactly the rows it wants."""
    if positions:
        schema = with_positions(schema)
    if not files:
        return empty_frame(spark, schema)
    partitioned = [f for f in schema.fields if any(f.name in d.partition for d in files)]
    names = {f.name for f in partitioned}
    in_files = StructType([f for f in schema.fields if f.name not in names])
    ordinal = {d.uri: i for i, d in enumerate(files)}
    groups: dict[tuple, list[DataFile]] = {}
    for d in files:
        groups.setdefault(tuple(d.partition.get(f.name) for f in partitioned), []).append(d)
    if keyed is not None and not all(stored in in_files.names for _, stored in keyed.keys):
        keyed = None
    frames = []
    for values, group in groups.items():
        by_name = {f.name: v for f, v in zip(partitioned, values)}
        rows = _scan(spark, files, group, in_files, positions) \
            if keyed is None and all(is_local(d.uri) and not d.deleted for d in group) \
            else read_files(spark, group, in_files, ordinals=[ordinal[d.uri] for d in group] if positions else None,
                            keyed=keyed)
        frames.append(rows.select(*[F.lit(by_name[f.name]).cast(f.dataType).alias(f.name) if f.name in names
                                    else F.col(f.name) for f in schema.fields]) if names else rows)
    return union_by_name(frames)


def with_positions(schema: StructType) -> StructType:
    """`schema` and the columns `FILE_POSITION` and `ROW_POSITION`."""
    return StructType([*schema.fields, StructField(FILE_POSITION, LongType()), StructField(ROW_POSITION, LongType())])


def _scan(spark: SparkSession, files: Sequence[DataFile], group: Sequence[DataFile], schema: StructType,
          positions: bool) -> DataFrame:
    """Spark's Parquet scan of local files (`positions`: numbered by their place in `files`, by name)."""
    rows = gathered(spark.read.schema(StructType([f for f in schema.fields if f.name not in (FILE_POSITION, ROW_POSITION)]))
                .parquet(*[d.uri for d in group]))
    if not positions:
        return rows
    ordinals = local_frame(spark, [(f.uri.rsplit("/", 1)[-1], i) for i, f in enumerate(files)],
                                     f"{URI} string, {FILE_POSITION} long")
    return (rows.select("*", F.col("_metadata.file_name").alias(URI), F.col("_metadata.row_index").alias(ROW_POSITION))
            .join(ordinals, URI).select(*schema.names))


def read_files(spark: SparkSession, files: Sequence[DataFile], schema: StructType,
               ordinals: Sequence[int] | None = None, *, keyed: WantedKeys | None = None) -> DataFrame:
    """The rows (`schema`) of data files, read by the tasks of the job that uses them (Spark's own
    Parquet scan of many files lists them in a job of its own); with `ordinals` (one per file), each
    row's `FILE_POSITION` is its file's and its `ROW_POSITION` its place in the file.

    With `keyed`, only the rows whose key is among its wanted rows, or has a NULL part: every file is
    read, and its task hands Spark those rows alone."""
    if not files:
        return empty_frame(spark, schema)
    rows = [(f.uri,) if ordinals is None else (f.uri, ordinals[i]) for i, f in enumerate(files)]
    columns = f"{URI} string" + ("" if ordinals is None else f", {FILE_POSITION} long")
    if any(f.deleted for f in files):
        rows, columns = [(*r, list(f.deleted)) for r, f in zip(rows, files)], f"{columns}, {DELETED} array<long>"
    listing = local_frame(spark, rows, columns)
    if keyed is not None:
        listing = listing.crossJoin(gathered(keyed.wanted.select(_collected(keyed.keys))))
    return read_listed(listing, schema, options_for(files[0].uri))


def read_chosen(spark: SparkSession, files: Sequence[DataFile], schema: StructType, *, column: str,
                wanted: DataFrame, keys: Sequence[tuple[str, str]] = ()) -> DataFrame:
    """The rows (`schema`) of those `files` whose partition value of `column` is among `wanted[column]`.

    With `keys` (each key column of `wanted` paired with the stored column of `schema` holding the
    same values), only the rows whose key is among their partition's wanted keys, or has a NULL part."""
    if not files:
        return empty_frame(spark, schema)
    if not keys:
        return read_listed(choose(spark, files, column=column, wanted=wanted), schema, options_for(files[0].uri))
    per_value = wanted.groupBy(column).agg(_collected(keys))
    return read_listed(listing(spark, files, column).join(per_value, column).select(URI, KEYS), schema,
                       options_for(files[0].uri))


def _collected(keys: Sequence[tuple[str, str]]) -> Column:
    """The wanted keys of an aggregated group as `KEYS`: a list of structs of the stored columns' names."""
    return F.collect_list(F.struct(*[col(k).alias(s) for k, s in keys])).alias(KEYS)


def choose(spark: SparkSession, files: Sequence[DataFile], *, column: str, wanted: DataFrame) -> DataFrame:
    """The URIs (column `URI`) of those `files` whose partition value of `column` is among `wanted[column]`."""
    return listing(spark, files, column).join(wanted.select(column).distinct(), column, "left_semi").select(URI)


def listing(spark: SparkSession, files: Sequence[DataFile], column: str) -> DataFrame:
    """The files as a frame of their URIs (`URI`) and their partition value of `column`."""
    return local_frame(spark, [(f.uri, int(f.partition[column])) for f in files], f"{URI} string, {column} int")


def read_listed(listing: DataFrame, schema: StructType, options: Mapping[str, str] | None = None) -> DataFrame:
    """The rows (`schema`) of the files a frame of URIs (column `URI`, and maybe `KEYS`) lists, read
    with the storage options of their location."""
    return gathered(listing.mapInArrow(_reader(arrow_schema(schema), dict(options or {})), schema))  # Spark's Python
    # maps claim no partitioning of their input


def _reader(schema: pa.Schema, options: dict[str, str]):
    """The function each task runs over its batches of file URIs (and wanted keys)."""
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = batch.column(KEYS) if KEYS in batch.schema.names else None
            ordinals = batch.column(FILE_POSITION).to_pylist() if FILE_POSITION in batch.schema.names else None
            deleted = batch.column(DELETED).to_pylist() if DELETED in batch.schema.names else None
            for i, uri in enumerate(batch.column(URI).to_pylist()):
                wanted = pa.Table.from_struct_array(keys[i].values) if keys is not None else None
                table = read_file(uri, schema, options, ordinal=ordinals[i] if ordinals is not None else None,
                                  wanted=wanted, deleted=deleted[i] if deleted is not None else None)
                if wanted is not None:
                    table = rows_with_keys(table, wanted)
                yield from table.to_batches()

    return read


def read_file(uri: str, schema: pa.Schema, options: Mapping[str, str], *, ordinal: int | None = None,
              partition: Mapping[str, str | None] | None = None, wanted: pa.Table | None = None,
              deleted: Sequence[int] | None = None) -> pa.Table:
    """One data file's rows under `schema`, read with pyarrow through the filesystem of its URI (in a
    task): columns in `partition` take its values (as the Delta log gives them), and `FILE_POSITION`
    and `ROW_POSITION`, where `schema` has them, are `ordinal` and each row's place in the file.
    Columns the file lacks (written before the table gained them) are NULL, as Delta reads them.
    With `wanted` (keys, in columns named as the file's), the row groups whose statistics show no
    wanted key and no NULL are skipped (`row_groups_with`): the caller still keeps the rows it wants.
    The rows at the positions `deleted` (its deletion vector's) are left out."""
    import numpy as np
    import pyarrow.parquet as pq

    from .filesystem import filesystem

    partition = partition or {}
    fs, path = filesystem(uri, options)
    computed = {FILE_POSITION, ROW_POSITION, *partition}
    with fs.open_input_file(path) as source:
        stored = pq.ParquetFile(source)
        columns = [f.name for f in schema if f.name not in computed and f.name in stored.schema_arrow.names]
        groups = None if wanted is None else row_groups_with(stored.metadata, wanted)
        rows = stored.read(columns=columns) if groups is None else stored.read_row_groups(groups, columns=columns)
    def positions() -> np.ndarray:
        """Each row's place in the file."""
        if groups is None:
            return np.arange(rows.num_rows)
        starts = np.cumsum([0] + [stored.metadata.row_group(g).num_rows for g in range(stored.metadata.num_row_groups)])
        return np.concatenate([np.arange(starts[g], starts[g + 1]) for g in groups] or [np.arange(0)])

    at = positions() if deleted or ROW_POSITION in schema.names else None
    if deleted:
        kept = ~np.isin(at, np.asarray(deleted, dtype=np.int64))
        rows, at = rows.filter(pa.array(kept)), at[kept]
    n = rows.num_rows

    def column(field: pa.Field) -> pa.Array | pa.ChunkedArray:
        if field.name == FILE_POSITION:
            return pa.array([ordinal] * n, field.type)
        if field.name == ROW_POSITION:
            return pa.array(at).cast(field.type)
        if field.name in partition:
            return pa.array([partition[field.name]] * n, pa.string()).cast(field.type)
        if field.name not in rows.column_names:
            return pa.nulls(n, field.type)
        return rows[field.name].cast(field.type)

    return pa.table([column(f) for f in schema], schema=schema)


def row_groups_with(meta: "pq.FileMetaData", wanted: pa.Table) -> list[int] | None:
    """The row groups of a Parquet file that may hold one of `wanted`'s keys, by the statistics of the
    column named as `wanted`'s first (an integer column: its statistics are exact); a row group with a
    NULL there, or without statistics, may. None where the file cannot tell (read it whole).

    >>> import pyarrow.parquet as pq, io
    >>> sink = io.BytesIO()
    >>> pq.write_table(pa.table({"k": [1, 2, 5, 6, None, 9]}), sink, row_group_size=2)
    >>> row_groups_with(pq.ParquetFile(sink).metadata, pa.table({"k": [6, 7]}))
    [1, 2]
    """
    import numpy as np

    name = wanted.column_names[0]
    stored = meta.schema.to_arrow_schema()
    if name not in stored.names or not all(pa.types.is_integer(t) for t in (wanted.schema.field(name).type,
                                                                            stored.field(name).type)):
        return None
    column = [meta.schema.column(i).path for i in range(meta.num_columns)].index(name)
    keys = np.unique(wanted[name].drop_null().to_numpy().astype(np.int64))
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max or not stats.has_null_count or stats.null_count:
            groups.append(g)
            continue
        at = np.searchsorted(keys, stats.min)
        if at < len(keys) and keys[at] <= stats.max:
            groups.append(g)
    return groups


def rows_with_keys(table: pa.Table, wanted: pa.Table) -> pa.Table:
    """The rows of `table` whose values in `wanted`'s columns equal one of `wanted`'s rows, and the rows
    with a NULL in any of those columns (NULL-safe keys may match them; Spark decides).

    Values compare as Spark compares them: integers, dates and timestamps as 64-bit integers, strings
    by their bytes (`plain_key_columns` admits no other type).

    >>> t = pa.table({"k": pa.array([1, 2, None, 3], pa.int32()), "v": ["a", "b", "c", "d"]})
    >>> rows_with_keys(t, pa.table({"k": pa.array([3, 1, 7], pa.int64())}))["v"].to_pylist()
    ['a', 'c', 'd']
    """
    import numpy as np
    import pyarrow.compute as pc

    if not table.num_rows:
        return table  # (pyarrow 22 crashes on indices_nonzero of a chunked array without chunks)
    names = wanted.column_names
    probe = pa.table({**{n: _comparable(table[n]) for n in names}, "_i": pa.array(np.arange(table.num_rows))})
    found = probe.join(pa.table({n: _comparable(wanted[n]) for n in names}), keys=names, join_type="left semi")
    null = reduce(pc.or_, [table[n].is_null() for n in names])
    chosen = pc.unique(pa.concat_arrays([found["_i"].combine_chunks(), pc.indices_nonzero(null.combine_chunks()).cast(pa.int64())]))
    return table.take(chosen.sort())


def _comparable(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    kind = values.type
    if pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        return values.cast(pa.int64())
    if pa.types.is_date32(kind):
        return values.cast(pa.int32()).cast(pa.int64())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values.cast(pa.large_string())
    raise TypeError(f"no Arrow comparison of {kind} keys matches Spark's")
