"""A model's two outputs: the changelog table (append-only) and the result table (current rows).

The result holds plain rows — a row that the join produces twice is stored twice — and is
bucketed by a hash of the whole row, so a run rewrites only the buckets its retractions touch
and appends its additions elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from . import delta_log
from .executor import StagedWrite
from .plan import JoinPlan
from .spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from .tables import ModelTables
from .writes import FileActions, FileWriter
from .zset import WEIGHT, col, to_changelog

BUCKET = "_bucket"


def output_schema(output: DataFrame) -> StructType:
    return StructType([f for f in output.schema.fields if f.name != WEIGHT])


def stage_changelog(output: DataFrame, plan: JoinPlan, tables: ModelTables, run_id: int,
                    writer: FileWriter, *, after: FileActions | None = None) -> StagedWrite:
    """The run's changelog rows, one per unit of weight, tagged with the run id; written after `after`."""
    names = plan.output_names
    rows = to_changelog(output, names, unique_key=plan.config.output_unique_key, row_kind=ROW_KIND_COLUMN)
    rows = rows.withColumn(RUN_ID_COLUMN, F.lit(run_id).cast("long"))
    schema = StructType(list(output_schema(output).fields)
                        + [StructField(ROW_KIND_COLUMN, StringType()), StructField(RUN_ID_COLUMN, LongType())])
    actions = writer.write(rows.coalesce(1), tables.changelog, tag=f"r{run_id}", after=after)
    return StagedWrite(tables.changelog, actions, schema)


def _added_or_fail(names: list[str], message: str) -> Column:
    """True for rows to add, false for rows that sum to nothing; a negative weight fails the write
    (and so the run, which then commits nothing) with `message` and the row.

    State checks reject retractions of rows never inserted before any output is computed, so a
    negative weight here means a streamjoin bug or a result table changed outside streamjoin."""
    shown = F.concat(F.lit(f"{message}: "), F.to_json(F.struct(*[col(c) for c in names])))
    return F.when(col(WEIGHT) >= 0, col(WEIGHT) > 0).otherwise(F.raise_error(shown))


def _expand(df: DataFrame, names: list[str]) -> DataFrame:
    return df.select(*[col(c) for c in names], col(BUCKET),
                     F.explode(F.array_repeat(F.lit(1), col(WEIGHT).cast("int"))).alias("_unit")).drop("_unit")


@dataclass
class StagedResult:
    """The staged result update, and how it counts the rows it adds and retracts."""

    write: StagedWrite
    counted: Callable[[], dict[str, int]]  # {"+": rows added, "-": rows retracted}, once the write ran


def stage_result(spark: SparkSession, output: DataFrame, plan: JoinPlan, tables: ModelTables,
                 versions: Mapping[str, int | None], run_id: int, writer: FileWriter, *,
                 inserts_only: bool) -> StagedResult:
    """Apply the run's change to the result: rewrite buckets with retractions, append the rest.

    A change that holds no retraction (`inserts_only`) is appended as it is, and counted by its files."""
    names = plan.output_names
    schema = output_schema(output)
    buckets = plan.config.state_buckets
    row_bucket = F.pmod(F.xxhash64(*[col(c) for c in names]), F.lit(buckets)).cast("int")
    change = output.withColumn(BUCKET, row_bucket)
    if inserts_only:
        rows = _expand(change.where(_added_or_fail(names, f"streamjoin bug: model {plan.model}'s run was to insert "
                                                          "only, yet its change retracts a row")), names)
        old_files, counts = [], None
    else:
        rows, old_files, counts = _apply_retractions(spark, change, schema, row_bucket, plan, tables.result,
                                                     versions.get(tables.result))
    actions = writer.write(rows.repartition(col(BUCKET)), tables.result, partition_by=[BUCKET], tag=f"r{run_id}")
    if old_files:
        actions += delta_log.remove_actions(old_files, tables.result)
    table_schema = StructType(list(schema.fields) + [StructField(BUCKET, IntegerType())])
    counted = (lambda: counts) if counts is not None else \
        (lambda: {"+": delta_log.added_rows(actions.result()), "-": 0})
    return StagedResult(StagedWrite(tables.result, actions, table_schema, (BUCKET,)), counted)


def _apply_retractions(spark: SparkSession, change: DataFrame, schema: StructType, row_bucket: Column,
                       plan: JoinPlan, path: str, version: int | None
                       ) -> tuple[DataFrame, list[delta_log.DataFile], dict[str, int]]:
    """The rows to write for a change with retractions: the buckets it retracts from, rewritten with
    the change applied (their files to remove), and the additions to the other buckets; with counts."""
    names = plan.output_names
    added = F.sum(F.when(col(WEIGHT) > 0, col(WEIGHT)).otherwise(0))
    retracted = F.sum(F.when(col(WEIGHT) < 0, -col(WEIGHT)).otherwise(0))
    per_bucket = change.groupBy(BUCKET).agg(added.alias("added"), retracted.alias("retracted")).collect()
    counts = {"+": sum(r["added"] for r in per_bucket), "-": sum(r["retracted"] for r in per_bucket)}
    rewrite = sorted(r[BUCKET] for r in per_bucket if r["retracted"])
    if not rewrite:
        return _expand(change.where(col(WEIGHT) > 0), names), [], counts
    in_rewrite = col(BUCKET).isin(rewrite)
    old_files = delta_log.data_files(path, version, partitions=rewrite, partition_column=BUCKET)
    old = delta_log.read(spark, old_files, schema).withColumn(BUCKET, row_bucket)
    merged = (old.select(*[col(c) for c in names], col(BUCKET), F.lit(1).cast("long").alias(WEIGHT))
              .unionByName(change.where(in_rewrite))
              .groupBy(*[col(c) for c in names], col(BUCKET)).agg(F.sum(WEIGHT).cast("long").alias(WEIGHT)))
    held = _added_or_fail(names, f"model {plan.model}'s run retracts a row its result table does not hold "
                                 "(was the table changed outside streamjoin?)")
    rows = _expand(merged.where(held), names).unionByName(
        _expand(change.where(~in_rewrite & (col(WEIGHT) > 0)), names))
    return rows, old_files, counts
