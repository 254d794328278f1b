"""Input formats: how the rows an input's Delta table gained become a changelog.

Every format is read into the same shape — the declared columns plus the row kind column
(`spec.op_column`, +I/-U/+U/-D) — so operators never see the difference:

- `changelog`: rows carry their row kind; `append`: insert-only events (+I).
- `cdf`: the table's Delta change data feed (`cdc` files of a version, else its added files
  as inserts and removed files as deletes, as the Delta protocol defines).
- `debezium`: `before`/`after` structs and an `op` (c, r: +I after; u: -U before, +U after;
  d: -D before); tombstones (all three NULL) are skipped, as Flink's debezium-json does.
- `upsert`: each row is the newest version of its `unique_key` (+U), or its deletion (-D)
  when `delete_column` is true. The `ORDER` column orders a key's versions within a run;
  `operators.upsert` turns them into a changelog against the key's previous version.

A row a format cannot read gets a NULL row kind, which the run reports as bad input.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, DataType, LongType, StringType, StructField, StructType,
                               _parse_datatype_string)

from ..local_rows import empty_frame
from ..spec import InputSpec
from ..types import RowKind
from ..unions import union_by_name
from ..zset import WEIGHT, col, consolidate, from_changelog, q
from . import delta_log, file_reads
from .delta_log import CHANGE_TYPE, DataFile
from .file_reads import FILE_POSITION, ROW_POSITION

ORDER = "_order"  # upsert: (commit version, file, row) of a row, to order a key's versions
CDF_KINDS = {"insert": RowKind.INSERT, "update_preimage": RowKind.UPDATE_BEFORE,
             "update_postimage": RowKind.UPDATE_AFTER, "delete": RowKind.DELETE}
DEBEZIUM_IMAGES = ("before", "after")


@functools.cache
def declared_type(text: str) -> DataType:
    """A declared column type (Spark SQL, e.g. `decimal(10,2)`) as a Spark type; parsed once per text,
    as the parser is the JVM's."""
    return _parse_datatype_string(text)


def data_schema(spec: InputSpec) -> StructType:
    """The declared columns as a Spark schema."""
    return StructType([StructField(c.name, declared_type(c.type)) for c in spec.columns])


def file_schema(spec: InputSpec) -> StructType:
    """What the input's Delta table must hold for its format (checked before every run)."""
    data = data_schema(spec)
    if spec.changelog_format == "changelog":
        return changelog_schema(spec)
    if spec.changelog_format == "debezium":
        return StructType([StructField(i, data) for i in DEBEZIUM_IMAGES] + [StructField(spec.op_column, StringType())])
    if spec.changelog_format == "upsert" and spec.delete_column:
        return StructType(list(data.fields) + [StructField(spec.delete_column, BooleanType())])
    return data


def changelog_schema(spec: InputSpec) -> StructType:
    """The shape every format is read into: the declared columns and the row kind column."""
    return StructType(list(data_schema(spec).fields) + [StructField(spec.op_column, StringType())])


@dataclass(frozen=True)
class Changes:
    """An input's changes of a run as changelog rows, and what the Delta log tells of them unread."""

    rows: DataFrame  # the declared columns plus the row kind column (plus `ORDER` for upsert)
    count: int | None = None  # how many changes, when the files' statistics say
    insert_only: bool | None = None  # whether every change is an insertion, when the statistics say
    bytes: int = 0  # the size of the files read (0 when not known)
    files: tuple[DataFile, ...] | None = None  # the files whose rows are the changes, column for column


def read_changes(spark: SparkSession, spec: InputSpec, start: int | None, end: int,
                 keyed: file_reads.WantedKeys | None = None) -> Changes:
    """The input's changes of versions (start, end] (all of version `end` when start is None). With
    `keyed` (stored columns named as the input declares them), the tasks reading the files hand Spark
    mostly the wanted keys' rows (`file_reads.read`); the caller keeps exactly the ones it wants.
    A Debezium input's keys are inside its row images: it is read whole."""
    fmt, path, name = spec.changelog_format, spec.location, spec.name
    if fmt == "cdf":
        feed = delta_log.change_feed(spec.location, start, end, what=spec.name)
        return Changes(_cdf(spark, spec, feed, keyed), bytes=sum(f.size for _, f in feed), files=tuple(f for _, f in feed))
    if fmt == "upsert":
        files = delta_log.added_between(path, -1 if start is None else start, end, what=name)
        return Changes(_upserts(spark, spec, files, keyed), bytes=sum(f.size for f in files), files=tuple(files))
    files = delta_log.added_between(path, start, end, what=name)
    rows = file_reads.read(spark, files, file_schema(spec), keyed=None if fmt == "debezium" else keyed)
    if fmt == "append":
        return Changes(rows.withColumn(spec.op_column, F.lit(RowKind.INSERT.value)), _count(files), True,
                       sum(f.size for f in files), tuple(files))
    if fmt == "debezium":  # its columns are inside its row images
        return Changes(_debezium(rows, spec), bytes=sum(f.size for f in files))
    return Changes(rows, _count(files), _only_inserts(files, spec.op_column), sum(f.size for f in files), tuple(files))


def _count(files: Sequence[DataFile]) -> int | None:
    """How many rows the files hold, if each one's statistics say."""
    if any(f.stats is None for f in files):
        return None
    return sum(f.num_records - len(f.deleted) for f in files)


def _only_inserts(files: Sequence[DataFile], op_column: str) -> bool | None:
    """Whether every row kind in the files is +I (no NULL among them), if their statistics say (an
    empty file's say nothing of its columns, and need not)."""
    if any(f.stats is None or (f.num_records and f.stat("nullCount", op_column) is None) for f in files):
        return None
    return all(f.num_records == 0 or (f.stat("nullCount", op_column) == 0 and f.stat("minValues", op_column)
                                      == f.stat("maxValues", op_column) == RowKind.INSERT.value) for f in files)


def _cdf(spark: SparkSession, spec: InputSpec, feed: Sequence[tuple[str | None, DataFile]],
         keyed: file_reads.WantedKeys | None) -> DataFrame:
    data = data_schema(spec)
    frames = []
    cdc = [f for change, f in feed if change is None]
    if cdc:
        rows = file_reads.read(spark, cdc, _feed_schema(spec), keyed=keyed)
        kind = F.create_map(*[x for k, v in CDF_KINDS.items() for x in (F.lit(k), F.lit(v.value))])[col(CHANGE_TYPE)]
        frames.append(rows.select(*[col(c) for c in data.names], kind.alias(spec.op_column)))
    for change in ("insert", "delete"):
        files = [f for c, f in feed if c == change]
        if files:
            frames.append(file_reads.read(spark, files, data, keyed=keyed)
                          .withColumn(spec.op_column, F.lit(CDF_KINDS[change].value)))
    if not frames:
        return empty_frame(spark, changelog_schema(spec))
    return union_by_name(frames)


def _debezium(rows: DataFrame, spec: InputSpec) -> DataFrame:
    op = col(spec.op_column)
    names = data_schema(spec).names

    def image(which: str, kind: RowKind) -> SparkColumn:
        present = col(which).isNotNull()
        return F.struct(*[col(which)[n].alias(n) for n in names],
                        F.when(present, F.lit(kind.value)).alias(spec.op_column))

    tombstone = op.isNull() & col("before").isNull() & col("after").isNull()
    images = (F.when(op.isin("c", "r"), F.array(image("after", RowKind.INSERT)))
              .when(op == "u", F.array(image("before", RowKind.UPDATE_BEFORE), image("after", RowKind.UPDATE_AFTER)))
              .when(op == "d", F.array(image("before", RowKind.DELETE)))
              .otherwise(F.array(F.struct(*[F.lit(None).cast(f.dataType).alias(f.name) for f in data_schema(spec).fields],
                                          F.lit(None).cast("string").alias(spec.op_column)))))
    return rows.where(~tombstone).select(F.explode(images).alias("_image")).select("_image.*")


def bad_rows_message(spec: InputSpec) -> str:
    """What a row with a NULL or unknown row kind violated, in the input's own terms, and how to recover."""
    recover = (" (nothing was committed; to recover, fix or remove these rows in the input's Delta table and rerun "
               "the model, with --full-refresh if it has read this input before: a changelog input only grows, so "
               "a run cannot read rows rewritten in place)")
    if spec.changelog_format == "debezium":
        return (f"Debezium row(s) without op c, r, u or d in column '{spec.op_column}' or without the image it "
                "needs ('after' for c/r/u, 'before' for u/d; a NULL 'before' on an update means the source "
                "table's replica identity is not FULL)" + recover)
    return f"row(s) with a row kind that is not one of +I, -U, +U, -D in column '{spec.op_column}'" + recover


def _upserts(spark: SparkSession, spec: InputSpec, files: Sequence[DataFile],
             keyed: file_reads.WantedKeys | None) -> DataFrame:
    """Upsert rows with their row kind (+U, or -D when deleted) and their `ORDER` in the log."""
    rows = file_reads.read(spark, files, file_schema(spec), positions=True, keyed=keyed)
    order = F.struct(col(FILE_POSITION).alias("_ordinal"), col(ROW_POSITION).alias("_row"))
    deleted = F.coalesce(col(spec.delete_column), F.lit(False)) if spec.delete_column else F.lit(False)
    kind = F.when(deleted, F.lit(RowKind.DELETE.value)).otherwise(F.lit(RowKind.UPDATE_AFTER.value))
    return rows.select(*[col(c) for c in data_schema(spec).names], kind.alias(spec.op_column), order.alias(ORDER))


def snapshot(spark: SparkSession, spec: InputSpec, version: int,
             keep: Callable[[DataFrame], DataFrame] | None = None,
             keyed: file_reads.WantedKeys | None = None) -> DataFrame:
    """The input's rows at `version`, as weighted rows of its declared columns: its changelog
    consolidated (upsert: each key's newest row unless deleted), as `snapshot_sql` reads it.
    `keep` filters the changelog rows first; it must keep every row of a key or none of them, and
    `keyed` (`read_changes`) may say which keys it keeps, so that the files' reads drop the others."""
    rows = read_changes(spark, spec, None, version, keyed).rows
    if keep is not None:
        rows = keep(rows)
    names = spec.column_names
    if spec.changelog_format == "upsert":
        order = ([col(spec.sequence_column).desc()] if spec.sequence_column else []) + [col(ORDER).desc()]
        newest = F.row_number().over(Window.partitionBy(*[col(k) for k in spec.unique_key]).orderBy(*order))
        return (rows.withColumn("_n", newest).where((col("_n") == 1) & (col(spec.op_column) != RowKind.DELETE.value))
                .select(*[col(c) for c in names], F.lit(1).cast("long").alias(WEIGHT)))
    return consolidate(from_changelog(rows, names, spec.op_column), names).where(col(WEIGHT) > 0)


def snapshot_sql(spec: InputSpec, source: str) -> str:
    """SQL for the input's rows at a version, given `source`: the table's live files as a relation
    (upsert: every file the log added, each row with its position in the log,
    `FILE_POSITION` and `ROW_POSITION`)."""
    cols = ", ".join(q(c) for c in spec.column_names)
    if spec.changelog_format in ("append", "cdf"):  # as declared
        return f"SELECT {_typed(spec)} FROM {source}"
    if spec.changelog_format == "upsert":
        key = ", ".join(q(k) for k in spec.unique_key)
        order = (f"{q(spec.sequence_column)} DESC, " if spec.sequence_column else "") + \
            f"{q(FILE_POSITION)} DESC, {q(ROW_POSITION)} DESC"
        deleted = f"coalesce({q(spec.delete_column)}, false)" if spec.delete_column else "false"
        return (f"SELECT {cols} FROM (SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY {order}) AS `__n`, "
                f"{deleted} AS `__deleted` FROM {source}) WHERE `__n` = 1 AND NOT `__deleted`")
    if spec.changelog_format == "debezium":
        op = q(spec.op_column)
        after = ", ".join(f"after.{q(c)} AS {q(c)}" for c in spec.column_names)
        before = ", ".join(f"before.{q(c)} AS {q(c)}" for c in spec.column_names)
        signed = (f"SELECT {after}, 1 AS `__w` FROM {source} WHERE {op} IN ('c', 'r', 'u') UNION ALL "
                  f"SELECT {before}, -1 AS `__w` FROM {source} WHERE {op} IN ('u', 'd')")
    else:
        signed = (f"SELECT {cols}, CASE WHEN {q(spec.op_column)} IN ('+I', '+U') THEN 1 ELSE -1 END AS `__w` "
                  f"FROM {source}")
    return (f"SELECT {cols} FROM (SELECT {cols}, SUM(`__w`) AS `__weight` FROM ({signed}) GROUP BY {cols}) "
            "LATERAL VIEW explode(array_repeat(1, CAST(`__weight` AS INT))) `__copies` AS `__copy`")


LOG_KIND, LOG_ORDER, LOG_VERSION = "__log_kind", "__log_order", "__log_version"


def history_schema(spec: InputSpec) -> StructType:
    """What `changelog_sql` reads from its source: the format's columns (a change data feed's:
    the declared ones and `CHANGE_TYPE`), each row's position in the log and its commit."""
    columns = _feed_schema(spec) if spec.changelog_format == "cdf" else file_schema(spec)
    return StructType([*file_reads.with_positions(columns).fields, StructField(file_reads.COMMIT_VERSION, LongType())])


def _feed_schema(spec: InputSpec) -> StructType:
    """The rows of a change data feed: the declared columns and `CHANGE_TYPE`."""
    return StructType(list(data_schema(spec).fields) + [StructField(CHANGE_TYPE, StringType())])


def changelog_sql(spec: InputSpec, source: str) -> str:
    """SQL for the input's changelog rows in log order, given `source`: the rows of `history_schema`
    (a `cdf` input: its change data feed, the table as the model first read it first; any other:
    every file the log added). Columns: the declared ones (typed), the row kind (`LOG_KIND`),
    `LOG_ORDER`, which sorts the rows as they were written (a Debezium update's before image first),
    and `LOG_VERSION`, the version that wrote the row."""
    def rows(kind: str, image: int = 0, columns: str = _typed(spec), where: str = "true") -> str:
        order = f"named_struct('file', {q(FILE_POSITION)}, 'row', {q(ROW_POSITION)}, 'image', {image})"
        return (f"SELECT {columns}, {kind} AS {q(LOG_KIND)}, {order} AS {q(LOG_ORDER)}, "
                f"{q(file_reads.COMMIT_VERSION)} AS {q(LOG_VERSION)} FROM {source} WHERE {where}")

    fmt, op = spec.changelog_format, q(spec.op_column)
    if fmt == "append":
        return rows(f"'{RowKind.INSERT.value}'")
    if fmt == "cdf":
        return rows("CASE " + " ".join(f"WHEN {q(CHANGE_TYPE)} = '{t}' THEN '{k.value}'" for t, k in CDF_KINDS.items())
                    + " END")
    if fmt == "changelog":
        return rows(op)
    if fmt == "upsert":
        deleted = f"coalesce({q(spec.delete_column)}, false)" if spec.delete_column else "false"
        return rows(f"CASE WHEN {deleted} THEN '{RowKind.DELETE.value}' ELSE '{RowKind.UPDATE_AFTER.value}' END")
    kind_before = f"CASE {op} WHEN 'u' THEN '{RowKind.UPDATE_BEFORE.value}' ELSE '{RowKind.DELETE.value}' END"
    kind_after = f"CASE {op} WHEN 'u' THEN '{RowKind.UPDATE_AFTER.value}' ELSE '{RowKind.INSERT.value}' END"
    return (rows(kind_before, 0, _typed(spec, "before."), f"{op} IN ('u', 'd')") + " UNION ALL "
            + rows(kind_after, 1, _typed(spec, "after."), f"{op} IN ('c', 'r', 'u')"))


def _typed(spec: InputSpec, prefix: str = "") -> str:
    """SQL: the declared columns (read from `prefix` + name), each cast to its declared type."""
    return ", ".join(f"CAST({prefix}{q(c.name)} AS {c.type}) AS {q(c.name)}" for c in spec.columns)
