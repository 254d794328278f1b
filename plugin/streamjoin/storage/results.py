"""A model's two outputs: the changelog table (append-only) and the result table (current rows).

The result holds plain rows — a row that the join produces twice is stored twice — and is
bucketed by a hash of the whole row, so a run rewrites only the buckets its retractions touch
and appends its additions to level 0 (see `stage_result`).
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from functools import reduce
from typing import Callable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from ..errors import ConfigError, StreamJoinError
from ..local_rows import local_frame
from ..one_partition import clustered
from ..row_errors import fail_when
from ..run_values import run_value
from ..spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from ..sql.plan import Join, JoinPlan
from ..types import q
from ..zset import WEIGHT, col, consolidate, to_changelog
from . import bucket_merge, change_data, delta_log, file_reads, filesystem, state
from .tables import ModelTables
from .writes import FileActions, RunWriter, StagedWrite

BUCKET = "_bucket"


def output_schema(output: DataFrame) -> StructType:
    return StructType([f for f in output.schema.fields if f.name != WEIGHT])


def stage_changelog(output: DataFrame, plan: JoinPlan, tables: ModelTables, run_id: int,
                    writer: RunWriter) -> StagedWrite:
    """The run's changelog rows, one per unit of weight, tagged with the run id."""
    rows = _changelog_rows(output, plan).withColumn(RUN_ID_COLUMN, run_value(run_id))
    schema = StructType(list(output_schema(output).fields)
                        + [StructField(ROW_KIND_COLUMN, StringType()), StructField(RUN_ID_COLUMN, LongType())])
    actions = writer.write(rows, tables.changelog)
    return StagedWrite(tables.changelog, actions, schema)


def stage_change_data(output: DataFrame, plan: JoinPlan, tables: ModelTables, writer: RunWriter) -> FileActions | None:
    """The run's change of the result as change data files of the result's Delta change data feed,
    rows as the changelog's with `_change_type` for `_row_kind` (None: the model keeps no feed, or the
    change is in other columns than the output's: a run that replaces the result with new columns,
    whose version a feed reads as the old files deleted and the new ones inserted)."""
    if not plan.config.change_data_feed or [c for c in output.columns if c != WEIGHT] != plan.output_names:
        return None
    if not filesystem.can_create_new(tables.result):
        raise ConfigError(
            f"change_data_feed=true needs the model's tables on a filesystem (a local or mounted path), but its result "
            f"is at {tables.result}: there a version with change data files cannot be committed atomically "
            "(delta-rs's Python API commits no change data files, and pyarrow has no conditional put). Leave "
            f"change_data_feed out and read the changelog table, {plan.model}__changelog (see streamjoin.cdc for Auto "
            f"CDC), or, if one writer at a time writes there, say so with the storage option "
            f"{filesystem.SINGLE_WRITER_OPTION}=true, as delta-rs takes it", model=plan.model)
    types = F.create_map(*[F.lit(x) for pair in change_data.CHANGE_TYPES.items() for x in pair])
    rows = _changelog_rows(output, plan).select(*[col(c) for c in plan.output_names],
                                               types[col(ROW_KIND_COLUMN)].alias(change_data.CHANGE_TYPE))
    return writer.write(rows, tables.result, partition={BUCKET: None}, folder=change_data.FOLDER)


def _changelog_rows(output: DataFrame, plan: JoinPlan) -> DataFrame:
    """A change's rows, one per unit of weight, each with its `_row_kind`."""
    names = [c for c in output.columns if c != WEIGHT]
    return to_changelog(output, names, unique_key=plan.config.output_unique_key, row_kind=ROW_KIND_COLUMN)


def widened(rows: DataFrame, columns: StructType) -> DataFrame:
    """Weighted rows in `columns` (see `plan_change.changelog_columns`): those they lack are NULL."""
    have = {c.lower(): c for c in rows.columns}
    return rows.select(*[col(have[f.name.lower()]).alias(f.name) if f.name.lower() in have
                         else F.lit(None).cast(f.dataType).alias(f.name) for f in columns.fields], col(WEIGHT))


def weight_counts(writer: RunWriter, change: DataFrame) -> dict[str, Future]:
    """Counters, summed in the write pass, of the rows a change adds (`+`) and retracts (`-`)."""
    return {"+": writer.count(change, F.greatest(col(WEIGHT), F.lit(0))),
            "-": writer.count(change, F.greatest(-col(WEIGHT), F.lit(0)))}


def result_columns(path: str, version: int) -> StructType:
    """The output columns of a result table version: its columns but the bucket."""
    return StructType([f for f in from_arrow_schema(delta_log.table_schema(path, version)).fields if f.name != BUCKET])


def weighted_rows(spark: SparkSession, path: str, version: int | None, schema: StructType, weight: int) -> DataFrame:
    """Every row of a result table version in its output columns `schema`, each with `weight`."""
    rows = file_reads.read(spark, delta_log.data_files(path, version), schema)
    return rows.select(*[col(c) for c in schema.names], F.lit(weight).cast("long").alias(WEIGHT))


def _unheld(frame: DataFrame, writer: RunWriter, message: str | None) -> Callable[[], None]:
    """A test, for once the write pass ran, that no row of `frame` has a negative weight: a retraction
    the result cannot apply. The pass counts such rows (and writes none of them); the run then stops
    before its commits with `message` (None: such retractions are dropped, see `_unheld_message`).

    State checks reject retractions of rows never inserted (in the same pass, and those errors are
    the ones a run reports), so a negative weight here means a retraction an event-time temporal
    join's probe side made of a row it never inserted (no state keeps emitted probes), a result
    table changed outside streamjoin, or a streamjoin bug."""
    if message is None:
        return lambda: None
    retracting = frame.where(col(WEIGHT) < 0)
    count = writer.count(retracting, -col(WEIGHT))

    def verify() -> None:
        if count.result():  # the failure path alone reads a few of the rows, to name them
            names = [c for c in frame.columns if c not in (WEIGHT, BUCKET)]
            shown = retracting.select(F.to_json(F.struct(*[col(c) for c in names])).alias("row")).limit(3).collect()
            raise _unheld_error(message, [r["row"] for r in shown], count.result())

    return verify


def _temporal_joins(plan: JoinPlan) -> list[str]:
    """The ids of the plan's event-time temporal joins."""
    return [n.id for n in plan.nodes() if isinstance(n, Join) and n.temporal and not n.temporal.processing_time]


def _unheld_message(plan: JoinPlan, *, inserts_only: bool = False) -> str | None:
    """Why a run fails that retracts a row its result does not hold; None where the run drops such
    retractions instead: a model with an event-time temporal join under on_missing_retraction='ignore',
    whose probe side may retract a row it never inserted as the run emits it (a deletion due on
    arrival, which no state of emitted probes can check), as Flink's sink materializer drops a
    retraction of a row it does not hold. A run planned to insert only (`inserts_only`) retracts
    nothing unless a temporal join's probe does: any other retraction there is a streamjoin bug."""
    temporal = _temporal_joins(plan)
    if temporal and plan.config.on_missing_retraction == "ignore":
        return None
    if inserts_only and not temporal:
        return f"streamjoin bug: model {plan.model}'s run was to insert only, yet its change retracts a row"
    why = (f"a probe's update or deletion reached the temporal join {temporal[0]} with a time, or after a version "
           "change, that makes it join another row than its insert did (its -U/-D must repeat the row as inserted, "
           "or set on_missing_retraction='ignore' to drop such retractions), or the table was changed outside "
           "streamjoin") if temporal else "was the table changed outside streamjoin?"
    return f"model {plan.model}'s run retracts a row its result table does not hold ({why})"


def _unheld_error(message: str, rows: list[str], retracted: int) -> StreamJoinError:
    return StreamJoinError(f"{message}: {', '.join(rows)} ({retracted} row(s) retracted); nothing was committed")


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
    """Apply the run's change to the result, inside the run's write pass.

    A change that holds no retraction (`inserts_only`) goes to level 0, as in state tables: files
    of rows of any bucket (partition NULL), written with no shuffle. Any other change folds level 0
    into buckets and rewrites the buckets it retracts from; which ones those are is found in the
    pass itself, and the files it replaced come back to the driver as notes. A change without
    retractions that finds level 0 holding `LEVEL0_FILES` files writes level 0 and itself to their
    buckets. A bucket holding `state.COMPACT_AT` files is compacted by the next run that writes to
    buckets: a fold merges its small files with the rows it brings (`state.merged_files`; a result's
    files are plain rows, so merging them is writing them together), a retracting run merges it whole
    as it merges the buckets it retracts from. The rows added and retracted are counters."""
    names = plan.output_names
    schema = output_schema(output)
    path, version = tables.result, versions.get(tables.result)
    if plan.config.output_unique_key:
        writer.check(unique_key_violations(spark, output, plan, path, version, schema))
    row_bucket = _row_bucket(plan)
    change = output.withColumn(BUCKET, row_bucket)
    counts = weight_counts(writer, change)
    files = delta_log.data_files(path, version)
    crowded = state.crowded_buckets(files)
    if inserts_only:  # what a retraction here means: see `_unheld`
        verify = _unheld(change, writer, _unheld_message(plan, inserts_only=True))
        added = _expand(change.where(col(WEIGHT) > 0), names)
        level0 = state.level0(files)
        if len(level0) < state.LEVEL0_FILES:
            actions = writer.write(added.drop(BUCKET), path, partition={BUCKET: None})
        else:  # level 0 is full: its rows, the crowded buckets' small files and the change go to new bucket files
            merged = level0 + [f for fs in crowded.values() for f in state.merged_files(fs)]
            held = file_reads.read(spark, merged, schema).select(*[col(c) for c in names], row_bucket.alias(BUCKET))
            actions = writer.write(clustered(held.unionByName(added), col(BUCKET)), path, partition_by=[BUCKET]) \
                + delta_log.remove_actions(merged)
    else:
        rewrite = _merge if bucket_merge.mergeable(schema) else _rewrite
        rows, replaced, verify = rewrite(spark, change, schema, row_bucket, plan, path, files, writer, sorted(crowded))
        actions = writer.write(clustered(rows, col(BUCKET)), path, partition_by=[BUCKET]) + replaced
    return StagedResult(StagedWrite(path, actions, _with_bucket(schema), (BUCKET,)),
                        lambda: {k: f.result() for k, f in counts.items()}, verify)


def stage_replaced_result(spark: SparkSession, rows: DataFrame, change: DataFrame, plan: JoinPlan,
                          tables: ModelTables, writer: RunWriter) -> StagedResult:
    """Replace the result whole by `rows` (weighted, in the output's columns), inside the run's write
    pass: for a run whose output columns changed (`plan_change.changelog_columns`). The rows added
    and retracted are those of the run's `change`."""
    names, schema, path = plan.output_names, output_schema(rows), tables.result
    if plan.config.output_unique_key:
        writer.check(unique_key_violations(spark, rows, plan, path, None, schema))
    bucketed = rows.withColumn(BUCKET, _row_bucket(plan))
    counts = weight_counts(writer, change)
    verify = _unheld(bucketed, writer, f"streamjoin bug: model {plan.model}'s new result holds a row a negative "
                                       "number of times")
    actions = writer.write(clustered(_expand(bucketed.where(col(WEIGHT) > 0), names), col(BUCKET)), path,
                           partition_by=[BUCKET])
    return StagedResult(StagedWrite(path, actions, _with_bucket(schema), (BUCKET,), overwrite=True),
                        lambda: {k: f.result() for k, f in counts.items()}, verify)


def _rewritten_buckets(spark: SparkSession, change: DataFrame, crowded: list[int]) -> DataFrame:
    """The buckets (column `BUCKET`) a retracting change rewrites: those it retracts from, and the crowded ones."""
    retracted = change.where(col(WEIGHT) < 0).select(BUCKET)
    if crowded:
        retracted = retracted.unionByName(local_frame(spark, [(b,) for b in crowded], f"{BUCKET} int"))
    return retracted.distinct()


def _with_bucket(schema: StructType) -> StructType:
    """A result table's schema: its output columns, then the bucket."""
    return StructType(list(schema.fields) + [StructField(BUCKET, IntegerType())])


def _row_bucket(plan: JoinPlan) -> Column:
    """A result row's bucket: a hash of the whole row."""
    return F.pmod(F.xxhash64(*[col(c) for c in plan.output_names]), F.lit(plan.config.state_buckets)).cast("int")


def unique_key_violations(spark: SparkSession, output: DataFrame, plan: JoinPlan, path: str, version: int | None,
                          schema: StructType) -> DataFrame:
    """A frame for `RunWriter.check` that fails the write pass if the result would hold more than
    one row for a key of the model's `output_unique_key`.

    Only keys this run adds a row to can break it. Their rows after the run are their rows in the
    result (every file of the version the run read: the result is bucketed by row, not by key,
    so a key's rows may be in any file; read on the executors, inside the pass, where the tasks keep
    those keys' rows alone when the key's columns compare in Arrow as in Spark) plus the run's
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

    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    plain = state.plain_key_columns(schema, [q(k) for k in key], [types[k] for k in key])
    stored = file_reads.read_files(spark, delta_log.data_files(path, version), schema,
                                   keyed=file_reads.WantedKeys(gaining, tuple(zip(key, plain))) if plain else None)
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


def _rewrite(spark: SparkSession, change: DataFrame, schema: StructType, row_bucket: Column, plan: JoinPlan,
             path: str, files: list[delta_log.DataFile], writer: RunWriter,
             crowded: list[int]) -> tuple[DataFrame, FileActions, Callable[[], None]]:
    """The rows to write for a change that may retract: level 0 and the buckets the change retracts
    from (and the `crowded` ones), rewritten with the change applied, and the change's additions to
    the other buckets; the removal of the files they replace (the chosen buckets' files are named by
    the write pass); and the test that every retraction found its row."""
    names = plan.output_names
    level0 = state.level0(files)
    bucketed = [f for f in files if f.partition[BUCKET] is not None]
    chosen = file_reads.choose(spark, bucketed, column=BUCKET, wanted=_rewritten_buckets(spark, change, crowded)) \
        if bucketed else None
    old = file_reads.read(spark, level0, schema)
    if chosen is not None:
        old = old.unionByName(file_reads.read_listed(chosen, schema, filesystem.options_for(path)))
    merged = (old.withColumn(BUCKET, row_bucket).select(*[col(c) for c in names], col(BUCKET),
                                                         F.lit(1).cast("long").alias(WEIGHT))
              .unionByName(change)
              .groupBy(*[col(c) for c in names], col(BUCKET)).agg(F.sum(WEIGHT).cast("long").alias(WEIGHT)))
    verify = _unheld(merged, writer, _unheld_message(plan))
    replaced = _removals(level0, bucketed, writer.note(chosen, col(file_reads.URI)) if chosen is not None else None)
    return _expand(merged.where(col(WEIGHT) > 0), names), replaced, verify


def _merge(spark: SparkSession, change: DataFrame, schema: StructType, row_bucket: Column, plan: JoinPlan,
           path: str, files: list[delta_log.DataFile], writer: RunWriter,
           crowded: list[int]) -> tuple[DataFrame, FileActions, Callable[[], None]]:
    """As `_rewrite`, with the buckets the change retracts from (and the `crowded` ones) merged in
    Arrow by the tasks that read them (`bucket_merge`): level 0's rows and the change's go to the
    bucket merges where they fall in such a bucket, and are written as they are to their buckets otherwise."""
    names = plan.output_names
    level0 = state.level0(files)
    bucketed = [f for f in files if f.partition[BUCKET] is not None]
    rows = file_reads.read(spark, level0, schema).select(*[col(c) for c in names], row_bucket.alias(BUCKET),
                                                         F.lit(1).cast("long").alias(WEIGHT)).unionByName(change)
    retracted = _rewritten_buckets(spark, change, crowded)
    listed = file_reads.listing(spark, bucketed, BUCKET).join(retracted, BUCKET, "left_semi")
    merge = writer.merge(rows.join(retracted, BUCKET, "left_semi"), listed, path, bucket=BUCKET, schema=schema,
                         uri=file_reads.URI, spread=sum(f.size for f in bucketed) >= bucket_merge.SPREAD_BYTES)
    replaced = _removals(level0, bucketed, merge.replaced) + merge.actions

    message = _unheld_message(plan)

    def verify() -> None:
        if message is not None and merge.unheld.result():
            raise _unheld_error(message, merge.examples.result(), merge.unheld.result())

    return _expand(rows.join(retracted, BUCKET, "left_anti").where(col(WEIGHT) > 0), names), replaced, verify


def _removals(level0: list[delta_log.DataFile], bucketed: list[delta_log.DataFile],
              replaced: Future | None) -> FileActions:
    """The removal of level 0's files, and of the bucket files whose URIs the write pass names in
    `replaced` (None: it replaces none)."""
    removals = FileActions(known=delta_log.remove_actions(level0))
    if replaced is None:
        return removals
    by_uri = {f.uri: f for f in bucketed}
    return removals + FileActions([_then(replaced, lambda uris: delta_log.remove_actions([by_uri[u] for u in uris]))])


def _then(done: Future, make: Callable[[list[str]], list]) -> Future:
    """A future of `make(done's result)`, failing as `done` fails."""
    after: Future = Future()

    def settle(f: Future) -> None:
        if f.exception() is not None:
            after.set_exception(f.exception())
        else:
            after.set_result(make(f.result()))

    done.add_done_callback(settle)
    return after
