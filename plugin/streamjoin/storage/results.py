"""A model's two outputs: the changelog table (append-only) and the result table (current rows).

The result holds plain rows — a row that the join produces twice is stored twice — and is
bucketed by a hash of the whole row, so a run rewrites only the buckets its retractions touch
and appends its additions to level 0 (see `stage_result`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from ..errors import ConfigError, StreamJoinError
from ..row_errors import fail_when
from ..spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from ..sql.plan import JoinPlan
from ..zset import WEIGHT, col, consolidate, to_changelog
from . import delta_log, state
from .tables import ModelTables
from .writes import RunWriter, StagedWrite

BUCKET = "_bucket"


def output_schema(output: DataFrame) -> StructType:
    return StructType([f for f in output.schema.fields if f.name != WEIGHT])


def stage_changelog(output: DataFrame, plan: JoinPlan, tables: ModelTables, run_id: int,
                    writer: RunWriter) -> StagedWrite:
    """The run's changelog rows, one per unit of weight, tagged with the run id."""
    names = plan.output_names
    rows = to_changelog(output, names, unique_key=plan.config.output_unique_key, row_kind=ROW_KIND_COLUMN)
    rows = rows.withColumn(RUN_ID_COLUMN, F.lit(run_id).cast("long"))
    schema = StructType(list(output_schema(output).fields)
                        + [StructField(ROW_KIND_COLUMN, StringType()), StructField(RUN_ID_COLUMN, LongType())])
    actions = writer.write(rows, tables.changelog)
    return StagedWrite(tables.changelog, actions, schema)


def _unheld(frame: DataFrame, writer: RunWriter, message: str) -> Callable[[], None]:
    """A test, for once the write pass ran, that no row of `frame` has a negative weight: a retraction
    the result cannot apply. The pass counts such rows (and writes none of them); the run then stops
    before its commits with `message`.

    State checks reject retractions of rows never inserted (in the same pass, and those errors are
    the ones a run reports), so a negative weight here means a streamjoin bug or a result table
    changed outside streamjoin."""
    retracting = frame.where(col(WEIGHT) < 0)
    count = writer.count(retracting, -col(WEIGHT))

    def verify() -> None:
        if count.result():  # the failure path alone reads a few of the rows, to name them
            names = [c for c in frame.columns if c not in (WEIGHT, BUCKET)]
            shown = retracting.select(F.to_json(F.struct(*[col(c) for c in names])).alias("row")).limit(3).collect()
            raise StreamJoinError(f"{message}: {', '.join(r['row'] for r in shown)} ({count.result()} row(s) "
                                  "retracted); nothing was committed")

    return verify


def _nothing_to_verify() -> None:
    """The test of a change that holds no retraction."""


def _expand(df: DataFrame, names: list[str]) -> DataFrame:
    return df.select(*[col(c) for c in names], col(BUCKET),
                     F.explode(F.array_repeat(F.lit(1), col(WEIGHT).cast("int"))).alias("_unit")).drop("_unit")


@dataclass
class StagedResult:
    """The staged result update, and how it counts the rows it adds and retracts."""

    write: StagedWrite
    counted: Callable[[], dict[str, int]]  # {"+": rows added, "-": rows retracted}, once the write ran
    verify: Callable[[], None]  # raises if the change retracts rows the result does not hold, once the write ran


def stage_result(spark: SparkSession, output: DataFrame, plan: JoinPlan, tables: ModelTables,
                 versions: Mapping[str, int | None], writer: RunWriter, *,
                 inserts_only: bool) -> StagedResult:
    """Apply the run's change to the result.

    Additions go to level 0, as in state tables: files of rows of any bucket (partition NULL),
    written with no shuffle. A change with retractions rewrites the buckets it retracts from, and
    folds level 0 into buckets with them; so does a run that finds level 0 holding `LEVEL0_FILES`
    files. A change that holds no retraction (`inserts_only`) is counted by its files."""
    names = plan.output_names
    schema = output_schema(output)
    path, version = tables.result, versions.get(tables.result)
    if plan.config.output_unique_key:
        writer.check(unique_key_violations(spark, output, plan, path, version, schema))
    row_bucket = F.pmod(F.xxhash64(*[col(c) for c in names]), F.lit(plan.config.state_buckets)).cast("int")
    change = output.withColumn(BUCKET, row_bucket)
    if inserts_only:
        verify = _unheld(change, writer, f"streamjoin bug: model {plan.model}'s run was to insert only, yet its "
                                         "change retracts a row")
        counts, rewrite = None, []
    else:
        counts, rewrite = _retracting_buckets(change)
    level0 = state.level0(delta_log.data_files(path, version, partition_column=BUCKET))
    if not rewrite and len(level0) < state.LEVEL0_FILES:
        if not inserts_only:  # no bucket is retracted from: no weight is negative
            verify = _nothing_to_verify
        old_files: list[delta_log.DataFile] = []
        actions = writer.write(_expand(change.where(col(WEIGHT) > 0), names).drop(BUCKET), path,
                               partition={BUCKET: None})
    else:
        rows, old_files, verify = _rewrite(spark, change, schema, row_bucket, plan, path, version, rewrite, writer)
        actions = (writer.write(rows.repartition(col(BUCKET)), path, partition_by=[BUCKET])
                   + delta_log.remove_actions(old_files, path))
    table_schema = StructType(list(schema.fields) + [StructField(BUCKET, IntegerType())])
    rewritten = sum(f.num_records for f in old_files)
    counted = (lambda: counts) if counts is not None else \
        (lambda: {"+": delta_log.added_rows(actions.result()) - rewritten, "-": 0})
    return StagedResult(StagedWrite(path, actions, table_schema, (BUCKET,)), counted, verify)


def unique_key_violations(spark: SparkSession, output: DataFrame, plan: JoinPlan, path: str, version: int | None,
                          schema: StructType) -> DataFrame:
    """A frame for `RunWriter.check` that fails the write pass if the result would hold more than
    one row for a key of the model's `output_unique_key`.

    Only keys this run adds a row to can break it. Their rows after the run are their rows in the
    result (every file of the version the run read: the result is bucketed by row, not by key,
    so a key's rows may be in any file; read on the executors, inside the pass) plus the run's
    change of them. The first key holding two or more rows fails the job with an `InputError`
    naming the model, the key, one of its rows and the fix; nothing is committed.
    """
    by_name = {n.lower(): n for n in plan.output_names}
    missing = [k for k in plan.config.output_unique_key if k.lower() not in by_name]
    if missing:
        raise ConfigError(f"output_unique_key names {', '.join(map(repr, missing))}, which the model's output does not "
                          f"have (its columns: {', '.join(plan.output_names)}); name output columns", model=plan.model)
    key = [by_name[k.lower()] for k in plan.config.output_unique_key]
    names = plan.output_names
    gaining = output.where(col(WEIGHT) > 0).select(*[col(k) for k in key]).distinct()

    def of_gaining(rows: DataFrame) -> DataFrame:
        cond = reduce(lambda a, b: a & b, [rows[k].eqNullSafe(gaining[k]) for k in key])
        return rows.join(gaining, cond, "left_semi")

    stored = _read_files(spark, delta_log.data_files(path, version, partition_column=BUCKET), schema)
    rows = of_gaining(stored.select(*[col(c) for c in names], F.lit(1).cast("long").alias(WEIGHT))).unionByName(
        of_gaining(output.select(*[col(c) for c in names], col(WEIGHT))))
    live = consolidate(rows, names).where(col(WEIGHT) > 0)
    shown = F.to_json(F.struct(*[col(c) for c in names]), {"ignoreNullFields": "false"})
    per_key = live.groupBy(*[col(k) for k in key]).agg(F.sum(WEIGHT).alias("n"), F.min(shown).alias("row"))
    key_text = ", ".join(key)
    message = F.concat(
        F.lit(f"output_unique_key ({key_text}) is not unique: key "),
        F.to_json(F.struct(*[col(k) for k in key]), {"ignoreNullFields": "false"}), F.lit(" would have "),
        col("n").cast("string"), F.lit(" rows in the result, e.g. "), col("row"),
        F.lit(f". Make the model's SQL give one row per {key_text} (join on a unique key of each input, or add "
              f"the columns that tell the rows apart to output_unique_key), or drop output_unique_key from the "
              "model's config; nothing was committed"))
    return per_key.where(col("n") > 1).where(~fail_when(F.lit(True), message, model=plan.model, input_name=""))


def _read_files(spark: SparkSession, files: list[delta_log.DataFile], schema: StructType) -> DataFrame:
    """The rows (`schema`) of data files, read with pyarrow by the tasks of the job that uses them
    (Spark's own Parquet reader lists many files in a job of its own)."""
    if not files:
        return spark.createDataFrame([], schema)
    arrow = delta_log.arrow_schema(schema)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        for batch in batches:
            for uri in batch.column("uri").to_pylist():
                filesystem, where = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), uri)
                yield from pq.read_table(where, filesystem=filesystem, columns=arrow.names).cast(arrow).to_batches()

    return spark.createDataFrame([(f.uri,) for f in files], "uri string").mapInArrow(read, schema)


def _retracting_buckets(change: DataFrame) -> tuple[dict[str, int], list[int]]:
    """How many rows a change adds and retracts, and the buckets it retracts from (one Spark job)."""
    added = F.sum(F.when(col(WEIGHT) > 0, col(WEIGHT)).otherwise(0))
    retracted = F.sum(F.when(col(WEIGHT) < 0, -col(WEIGHT)).otherwise(0))
    per_bucket = change.groupBy(BUCKET).agg(added.alias("added"), retracted.alias("retracted")).collect()
    counts = {"+": sum(r["added"] for r in per_bucket), "-": sum(r["retracted"] for r in per_bucket)}
    return counts, sorted(r[BUCKET] for r in per_bucket if r["retracted"])


def _rewrite(spark: SparkSession, change: DataFrame, schema: StructType, row_bucket: Column, plan: JoinPlan,
             path: str, version: int | None, rewrite: list[int],
             writer: RunWriter) -> tuple[DataFrame, list[delta_log.DataFile], Callable[[], None]]:
    """The rows to write for a change that retracts from buckets `rewrite` (or folds level 0): level 0
    and those buckets, rewritten with the change applied (their files to remove), and the additions
    to the other buckets; and the test that every retraction found its row."""
    names = plan.output_names
    in_rewrite = col(BUCKET).isin(rewrite)
    old_files = delta_log.data_files(path, version, partitions=rewrite, partition_column=BUCKET)
    old = delta_log.read(spark, old_files, schema).withColumn(BUCKET, row_bucket)
    merged = (old.select(*[col(c) for c in names], col(BUCKET), F.lit(1).cast("long").alias(WEIGHT))
              .unionByName(change.where(in_rewrite))
              .groupBy(*[col(c) for c in names], col(BUCKET)).agg(F.sum(WEIGHT).cast("long").alias(WEIGHT)))
    verify = _unheld(merged, writer, f"model {plan.model}'s run retracts a row its result table does not hold "
                                     "(was the table changed outside streamjoin?)")
    rows = _expand(merged.where(col(WEIGHT) > 0), names).unionByName(
        _expand(change.where(~in_rewrite & (col(WEIGHT) > 0)), names))
    return rows, old_files, verify
