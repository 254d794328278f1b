"""The run protocol: one incremental run of a model, exactly once across all its tables.

1. Plan the run: its id (last committed run + 1), each input's offsets (the Delta versions
   of its changelog read so far, and up to where this run reads), and the version of every
   model table it reads. If a previous attempt of this run committed some tables, its
   manifest is taken from their commits, so the retry reads exactly what the first did.
2. Read and validate every input's changes; compute the output change (nothing is written
   before validation passed, so a bad input leaves every table as it was).
3. Write data files, then commit table by table — state, changelog, result — each commit
   tagged with the app transaction (`streamjoin:<model>`, run id) and carrying the manifest;
   a table that already holds this run's commit is skipped. The run log commits last and
   marks the run complete.

A plan its state no longer fits is rebuilt side by side and swapped in by a run of its own
(`runtime.rebuild`) under `on_plan_change='rebuild'`; other policies refuse it (`fail`) or leave
it to the caller (`full_refresh`, see `api.run_model`).
"""
from __future__ import annotations

import json
import logging
import posixpath
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .. import jvm_lists, jvm_lookups, one_partition
from ..errors import ConcurrentRunError, InputError, PlanChangedError, StreamJoinError
from ..row_errors import fail_when, raised
from ..run_values import CONSTANT_FOLDING
from ..spec import InputSpec
from ..sql.plan import JoinPlan
from ..storage import delta_log, filesystem, formats
from ..storage.input_schema import check_input_schema
from ..storage.results import stage_change_data, stage_changelog, stage_replaced_result, stage_result, weight_counts
from ..storage.tables import ModelTables
from ..storage.writes import FileActions, RunWriter, StagedWrite
from ..types import RowKind
from ..unions import union_by_name
from ..zset import bad_row_kinds_test, col
from . import lease, rebuild, reprojection
from .executor import Executor
from .intermediates import Intermediates
from .phases import Phases
from .plan_change import OUTLINE_KEY, outline_diff, plan_fingerprint, reprojects, state_fingerprint
from .report import RunReport
from .sizing import compiled_to_java, in_one_partition, shuffle_partitions
from .spark_jobs import JobGroup

log = logging.getLogger("streamjoin")
#: Runs that read at least this many changes log their progress (see `Progress`).
PROGRESS_AT = 1_000_000


def app_id(model: str) -> str:
    return f"streamjoin:{model}"


def manifest_of(path: str) -> dict[str, Any] | None:
    """The manifest of the last run that committed to a table."""
    raw = delta_log.latest_metadata(path, delta_log.MANIFEST_KEY) if delta_log.exists(path) else None
    return json.loads(raw) if raw else None


def row_checks(spec: InputSpec, changes: DataFrame) -> list[tuple[Column, str]]:
    """Tests that flag malformed change rows of an input, each with what such a row violates."""
    checks = [(bad_row_kinds_test(spec.op_column), formats.bad_rows_message(spec))]
    if spec.event_time and spec.event_time in changes.columns:
        checks.append((col(spec.event_time).isNull(),
                       f"row(s) with a NULL event time in column '{spec.event_time}' (the input's watermark needs a "
                       "time on every row, as Flink's does)"))
    return checks


def refuse_foreign_deletions(tables: ModelTables, versions: Mapping[str, int | None]) -> None:
    """Stop a run whose model's tables hold deletion vectors: another engine deleted, updated or merged
    their rows. streamjoin is their only writer (state and result must stay what its runs made them),
    and a file with a deletion vector cannot be replaced through delta-rs's commits."""
    for path in tables.all_tables():
        marked = delta_log.files_with_deletions(path, versions.get(path))
        if marked:
            raise StreamJoinError(
                f"model '{tables.model}': its table {filesystem.relative(path, tables.home)} has deletion vectors "
                f"({len(marked)} file(s), e.g. {marked[0]}): another engine deleted, updated or merged its rows, and "
                "streamjoin must be the only writer of a model's tables. Run the model with --full-refresh to rebuild "
                "them from its inputs (and change rows through the inputs); nothing was committed")


def _table_id(path: str) -> str:
    return delta_log.table(path).metadata().id


EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
SEMI_JOIN_PUSHDOWN = "org.apache.spark.sql.catalyst.optimizer.PushDownLeftSemiAntiJoin"
CODEGEN_FACTORY = "spark.sql.codegen.factoryMode"
#: Spark's `arrow.maxBytesPerBatch` at this value (Int.MaxValue) skips its per-row size check.
ARROW_NO_BYTE_LIMIT = 2**31 - 1

#: Settings a run's Spark plans need: no broadcast joins (each broadcast is a Spark job of its own;
#: a run joins in shuffles inside its one write pass instead).
#: No adaptive execution either: each of its query stages is a job too; `sizing` sizes shuffles instead.
#: A run's kept intermediate results (`Intermediates`) live for the run only: stored uncompressed,
#: they cost less to build than they would save in memory (a 1M-change q20 run 7.4 s -> 6.9 s).
#: Shuffle partitions and codegen (whole-stage, and of expressions: Spark's `codegen.factoryMode`,
#: `FALLBACK` its default, `NO_CODEGEN` interpreted) are set from the run's size once it is known (`sizing`).
#: A join whose sides are both one partition is planned in that partition (`one_partition`), however
#: large Spark estimates them: a kept result has no size of its own, and Spark's default for one (the
#: largest long) would overflow the estimate of any join above it, so a run assumes 1 MiB instead
#: (broadcasts and adaptive execution, which would act on estimates, are off in a run).
#: The optimizer rules a run excludes are the session's own until the run's size decides (`sized`).
#: Spark's byte limit on an Arrow batch is checked after every row a Python task is sent, by sizing
#: every column of the batch being built: about a tenth of a large run's task time (the write pass's
#: rows are wide). A run lifts it (`ARROW_NO_BYTE_LIMIT`, the value Spark reads as no limit), so its
#: batches are bounded by Spark's row limit alone (`maxRecordsPerBatch`, 10,000 rows by default):
#: eight 1M-change q20 runs took 69 s against 78 s, each of them faster.
#: Spark caches the code it generates by its source, and a whole-stage class is named after its
#: stage's number in the plan: a stage whose code a run generated before, numbered otherwise in this
#: run's plan (another input's branch before it, say), was compiled again, by Janino and then the JIT.
#: A run's classes are not numbered (`useIdInClassName`): of four 1M-change q20 runs, the fourth
#: compiled 3 classes instead of 43.
RUN_CONF: dict[str, str | None] = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_NO_BYTE_LIMIT),
    "spark.sql.codegen.useIdInClassName": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.adaptive.enabled": "false",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.sql.shuffle.partitions": "1", "spark.sql.codegen.wholeStage": "true", CODEGEN_FACTORY: "FALLBACK",
    "spark.sql.maxSinglePartitionBytes": str(2**63 - 1), "spark.sql.defaultSizeInBytes": str(2**20),
    EXCLUDED_RULES: None}


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str | None]) -> Iterator[None]:
    """Set session settings for the block, and put back what was there (also for a key set to None:
    left as it is, for the block to change)."""
    saved = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        if value is not None:
            spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def sized(spark: SparkSession, change_bytes: int, read_bytes: int) -> bool:
    """Size the run's plans (its shuffles, and whether its stages and expressions compile to Java)
    from the bytes of its changes and of all it reads; True when they are planned in one partition
    (`one_partition`).

    The optimizer keeps the run's values out of the code Spark generates for its plans (`run_values`).
    In one partition, a semi or anti join is not pushed below the leaf's coalescing to one partition
    (Spark's `PushDownLeftSemiAntiJoin` would, and the join would then shuffle its input)."""
    parallelism = spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions(read_bytes, parallelism)))
    compiled = compiled_to_java(change_bytes, read_bytes)
    spark.conf.set("spark.sql.codegen.wholeStage", str(compiled).lower())
    spark.conf.set(CODEGEN_FACTORY, "FALLBACK" if compiled else "NO_CODEGEN")
    single = in_one_partition(change_bytes, read_bytes)
    theirs = [r for r in (spark.conf.get(EXCLUDED_RULES, None) or "").split(",") if r.strip()]
    excluded = [*theirs, CONSTANT_FOLDING, *([SEMI_JOIN_PUSHDOWN] if single else [])]
    spark.conf.set(EXCLUDED_RULES, ",".join(dict.fromkeys(excluded)))
    return single


@contextmanager
def input_errors() -> Iterator[None]:
    """Raise bad input that a Spark job found (see `row_errors`) as the InputError it names."""
    try:
        yield
    except Exception as exc:  # a Spark job's failure: Py4J or PySpark's own error classes
        found = raised(exc)
        if found is None:
            raise
        raise found from None


class Progress:
    """A long run's progress on the `streamjoin` logger at INFO: a line as each phase ends, naming
    the phase, the rows it handled and the seconds since the run started. A run is long when it
    reads `PROGRESS_AT` changes or more (known once its inputs are read); shorter runs log only
    their one-line summary."""

    def __init__(self, model: str, run_id: int, phases: Phases) -> None:
        self.head = f"streamjoin {model} run {run_id}"
        self.phases = phases
        self.changes = 0

    def read(self, counts: Mapping[str, int]) -> None:
        self.changes = sum(counts.values())
        self.done("read", lambda: f"{self.changes:,} changes in ({', '.join(f'{k} {v:,}' for k, v in counts.items())})")

    def done(self, phase: str, rows: Callable[[], str]) -> None:
        """Log that `phase` ended, and what `rows` says it handled (called only for a long run)."""
        if self.changes >= PROGRESS_AT:
            log.info("%s: %s done: %s; %.1fs elapsed", self.head, phase, rows(), self.phases.total())


class Run:
    """One incremental run of a compiled model over its inputs' Delta changelogs."""

    def __init__(self, spark: SparkSession, plan: JoinPlan, tables: ModelTables, *,
                 swap_from: ModelTables | None = None, budget: int | None = None, label: str | None = None) -> None:
        self.spark = spark
        self.plan = plan
        self.tables = tables
        self.label = label or plan.model  # how its report and log lines name the run's model
        self.swap_from = swap_from  # a rebuilt model to swap in (`runtime.rebuild`) instead of a run of changes
        self.budget = budget  # the most changes of each input this run reads (a rebuild's run), None: all
        self.app = app_id(plan.model)
        self.intermediates = Intermediates()

    def prepare(self) -> tuple[int, dict[str, Any], bool]:
        """The run id and manifest; `resumed` when a previous attempt already committed part of it."""
        last = delta_log.app_version(self.tables.runs, self.app) or 0
        run_id = last + 1
        for path in self.tables.all_tables():
            if delta_log.app_version(path, self.app) == run_id:
                manifest = manifest_of(path)
                if manifest is not None:
                    return run_id, manifest, True
        previous = manifest_of(self.tables.runs) or {}
        if self.swap_from is not None:
            return run_id, self.swap_manifest(run_id, previous), False
        reproject = reprojects(self.plan, previous, self.tables)
        offsets = {}
        for name, spec in self.plan.inputs.items():
            if spec.location is None or not delta_log.exists(spec.location):
                raise InputError(f"no Delta table at {spec.location!r}", model=self.plan.model, input_name=name)
            consumed = previous.get("offsets", {}).get(name, {})
            end = delta_log.version(spec.location)
            if self.budget is not None:
                end = rebuild.budgeted_end(spec.location, consumed.get("end"), end, self.budget, what=name)
            offsets[name] = {"start": consumed.get("end"), "end": end, "table_id": _table_id(spec.location),
                             "first": consumed.get("first") if consumed else end}
            self.check_not_rebuilt(name, spec, consumed, offsets[name])
        versions = {path: delta_log.version(path) for path in self.tables.all_tables()}
        manifest = {"run": run_id, "plan": plan_fingerprint(self.plan), "state": state_fingerprint(self.plan),
                    "offsets": offsets, "versions": versions, "started": time.time(),
                    **({"reproject": True} if reproject else {})}
        return run_id, manifest, False

    def swap_manifest(self, run_id: int, previous: Mapping[str, Any]) -> dict[str, Any]:
        """The swap's manifest: the new plan's fingerprints, the offsets the rebuilt model read to
        (from what the model itself had read: the swap's input), the model's table versions and
        the rebuilt model's (`rebuild.swap_source`)."""
        assert self.swap_from is not None
        built = manifest_of(self.swap_from.runs)
        assert built is not None, "a swap follows a run of the rebuilt model"
        offsets = {name: {**o, "start": previous.get("offsets", {}).get(name, {}).get("end")}
                   for name, o in built["offsets"].items()}
        return {"run": run_id, "plan": plan_fingerprint(self.plan), "state": state_fingerprint(self.plan),
                "offsets": offsets, "versions": {path: delta_log.version(path) for path in self.tables.all_tables()},
                "started": time.time(), "swap": rebuild.swap_source(self.swap_from)}

    def check_not_rebuilt(self, name: str, spec: InputSpec, consumed: Mapping[str, Any], now: Mapping[str, Any]) -> None:
        """An input table that is not the one this model read before (recreated, or older than the
        version already consumed) was rebuilt: its changes since the offset are not its history."""
        if consumed.get("end") is None:
            return
        replaced = consumed.get("table_id") not in (None, now["table_id"])
        if replaced or now["end"] < consumed["end"]:
            what = "was replaced by a new table" if replaced else \
                f"is at version {now['end']}, older than version {consumed['end']} this model already consumed"
            raise InputError(f"its Delta table at {spec.location} {what}, so it was rebuilt; run this model with "
                             "--full-refresh", model=self.plan.model, input_name=name)

    def read_inputs(self, manifest: Mapping[str, Any]) -> dict[str, formats.Changes]:
        """Every input's changes for this run, as read (`kept_changes` checks and keeps them)."""
        reads = {}
        for name, spec in self.plan.inputs.items():
            off = manifest["offsets"][name]
            check_input_schema(spec, self.plan.model, has_state=off["start"] is not None, version=off["end"])
            reads[name] = formats.read_changes(self.spark, spec, off["start"], off["end"])
        return reads

    def kept_changes(self, reads: Mapping[str, formats.Changes]) -> tuple[dict[str, DataFrame], dict[str, int], frozenset[str]]:
        """Every input's changes, checked where they are read (a malformed row fails the first job
        that reads it); how many changes each has; and the inputs whose changes this run are all
        insertions (a row kind the upsert format derives later excepted). Counts come from the Delta
        log's file statistics; one Spark job counts the inputs whose statistics do not say."""
        changes, counts, insert_only = {}, {}, set()
        for name, read in reads.items():
            rows = read.rows
            for test, message in row_checks(self.plan.inputs[name], rows):
                shown = F.concat(F.lit(f"{message}, e.g. "), F.to_json(F.struct(*[col(c) for c in rows.columns]),
                                                                    {"ignoreNullFields": "false"}))
                rows = rows.where(fail_when(test, shown, model=self.plan.model, input_name=name))
            changes[name] = self.intermediates.keep(one_partition.gathered(rows))
            if read.count is not None and read.insert_only is not None:
                counts[name] = read.count
                if read.insert_only:
                    insert_only.add(name)
        unknown = [name for name in changes if name not in counts]
        if unknown:
            retraction = {name: col(self.plan.inputs[name].op_column).isin(RowKind.UPDATE_BEFORE.value,
                                                                            RowKind.DELETE.value) for name in unknown}
            totals = union_by_name([
                changes[name].agg(F.lit(name).alias("input"), F.count(F.lit(1)).alias("n"),
                                  F.count_if(retraction[name]).alias("retractions")) for name in unknown]).collect()
            for row in totals:
                counts[row["input"]] = row["n"]
                if not row["retractions"] and self.plan.inputs[row["input"]].changelog_format != "upsert":
                    insert_only.add(row["input"])
        return changes, {name: counts[name] for name in changes}, frozenset(insert_only)

    def execute(self) -> RunReport:
        with lease.holding(self.tables, "run", exclusive_of=("maintain",)), delta_log.pinned_versions():
            return self._execute()

    def _execute(self) -> RunReport:
        phases = Phases()
        with phases("plan"), delta_log.latest_once():
            run_id, manifest, resumed = self.prepare()
        if "swap" in manifest:
            return self.swap(run_id, manifest, resumed, phases)
        offsets = manifest["offsets"]
        reproject = bool(manifest.get("reproject"))
        if reproject and not resumed:
            log.warning("streamjoin %s: only its projection (output columns, filters after its last join) changed "
                        "since its last run; run %d re-projects its result from state, with no rebuild. What "
                        "changed:\n%s", self.plan.model, run_id, outline_diff(self.tables, self.plan))
        if not resumed and not reproject and all(o["start"] == o["end"] for o in offsets.values()):
            return RunReport(self.label, None, "no changes", offsets=offsets, previous_run=run_id - 1)
        writer = RunWriter(tag=f"r{run_id}", parallelism=self.spark.sparkContext.defaultParallelism)
        try:
            with JobGroup(self.spark, f"streamjoin {self.label} run {run_id}") as jobs, input_errors(), \
                    session_conf(self.spark, RUN_CONF), one_partition.scope() as plan_in_one:
                with phases("read"):
                    with delta_log.latest_once():
                        reads = self.read_inputs(manifest)
                    versions = dict(manifest["versions"])
                    refuse_foreign_deletions(self.tables, versions)
                    state_bytes = sum(delta_log.table_bytes(p, versions.get(p)) for p in self.tables.state_tables())
                    change_bytes = sum(r.bytes for r in reads.values())
                    plan_in_one(sized(self.spark, change_bytes, change_bytes + state_bytes))
                    changes, counts, insert_only = self.kept_changes(reads)
                progress = Progress(self.label, run_id, phases)
                progress.read(counts)
                with phases("join"):
                    executor = Executor(self.spark, self.plan, self.tables, versions, run_id, changes, insert_only,
                                        self.intermediates.keep, writer, int(manifest["started"] * 1000),
                                        {name: o["end"] for name, o in offsets.items()},
                                        {name: o["start"] for name, o in offsets.items()},
                                        input_files={name: read.files for name, read in reads.items()})
                    output, replaced = executor.output(), None
                    if reproject:
                        output, replaced = reprojection.output_change(executor, output,
                                                                      {name: o["start"] for name, o in offsets.items()})
                    output = self.intermediates.keep(output)
                    if replaced is None:
                        result = stage_result(self.spark, output, self.plan, self.tables, versions, writer,
                                              inserts_only=executor.output_inserts_only() and not reproject)
                    else:  # the output's columns changed: the result is replaced whole
                        result = stage_replaced_result(self.spark, self.intermediates.keep(replaced), output,
                                                       self.plan, self.tables, writer)
                    result.write.changes = stage_change_data(output, self.plan, self.tables, writer)
                    staged = [*executor.staged, stage_changelog(output, self.plan, self.tables, run_id, writer),
                              result.write]
                progress.done("join", lambda: f"{len(staged)} tables staged for one write pass over {progress.changes:,} changes")
                with phases("write"):
                    writer.run()
                    result.verify()
                progress.done("write", lambda: f"{sum(len(w.actions.result()) for w in staged)} file actions for {len(staged)} tables")
                spark_jobs, spark_stages = jobs.jobs(), jobs.stages()
            with phases("count"):
                written = {w.path: w.actions.result() for w in staged}
                state_rows = {posixpath.basename(p): delta_log.rows_after(p, versions.get(p), written.get(p, []))
                              for p in sorted(set(self.tables.state_tables()) | set(written))
                              if p not in (self.tables.changelog, self.tables.result, self.tables.late_rows)}
                rows_out = result.counted()
                for count in executor.counted_after_writes:
                    count()
            progress.done("count", lambda: f"rows out {', '.join(f'{k}{v:,}' for k, v in rows_out.items()) or '-'}")
            metrics = {**executor.metrics, **({"reprojected": True} if reproject else {}), "state_rows": state_rows,
                       "spark_jobs": spark_jobs, "spark_stages": spark_stages, "phases_s": phases.seconds,
                       "master": self.spark.sparkContext.master, OUTLINE_KEY: self.plan.explain()}
            report = RunReport(self.label, run_id, "committed", offsets=offsets, changes_in=counts,
                               rows_out=rows_out, metrics=metrics)
            with phases("commit"):
                staged.append(self.stage_run_log(run_id, manifest, report))
                self.commit(staged, run_id, manifest)
            progress.done("commit", lambda: f"{len(staged)} tables")
        finally:
            writer.close()
            self.intermediates.release()
        report.seconds = phases.total()
        log.info(report.summary())
        return report

    def swap(self, run_id: int, manifest: Mapping[str, Any], resumed: bool, phases: Phases) -> RunReport:
        """Swap the rebuilt model in (`runtime.rebuild`): its tables copied over the model's, the net
        change of the result into the changelog, in one write pass and the usual commits."""
        shadow, pinned, versions = rebuild.shadow_of(manifest), manifest["swap"]["versions"], manifest["versions"]
        writer = RunWriter(tag=f"r{run_id}", parallelism=self.spark.sparkContext.defaultParallelism)
        try:
            with JobGroup(self.spark, f"streamjoin {self.plan.model} run {run_id} (swap)") as jobs, \
                    session_conf(self.spark, RUN_CONF):
                with phases("join"):
                    change = self.intermediates.keep(rebuild.net_change(self.spark, self.plan, self.tables, versions,
                                                                        shadow, pinned))
                    counts = weight_counts(writer, change)
                    changelog = stage_changelog(change, self.plan, self.tables, run_id, writer)
                with phases("write"):
                    staged = rebuild.replacements(self.tables, shadow, pinned, tag=f"r{run_id}", committed=lambda p: (
                        delta_log.app_version(p, self.app) or 0) >= run_id) + [changelog]
                    for write in staged:
                        if write.path == self.tables.result:
                            write.changes = stage_change_data(change, self.plan, self.tables, writer)
                    writer.run()
                spark_jobs, spark_stages = jobs.jobs(), jobs.stages()
            report = RunReport(self.plan.model, run_id, "committed", offsets=manifest["offsets"],
                               rows_out={k: f.result() for k, f in counts.items()},
                               metrics={"swapped_in": shadow.home, "spark_jobs": spark_jobs, "spark_stages": spark_stages,
                                        "phases_s": phases.seconds, "master": self.spark.sparkContext.master,
                                        OUTLINE_KEY: self.plan.explain()})
            with phases("commit"):
                staged.append(self.stage_run_log(run_id, manifest, report))
                self.commit(staged, run_id, manifest)
        finally:
            writer.close()
            self.intermediates.release()
        rebuild.clean_up(self.tables, shadow)
        report.seconds = phases.total()
        log.info("%s (%s the rebuilt model)", report.summary(),
                 "completed swapping in" if resumed else "swapped in")
        return report

    def stage_run_log(self, run_id: int, manifest: Mapping[str, Any], report: RunReport) -> StagedWrite:
        schema = StructType([StructField("run_id", LongType()), StructField("manifest", StringType()),
                             StructField("changes_in", StringType()), StructField("rows_out", StringType()),
                             StructField("metrics", StringType())])
        row = pa.table({"run_id": pa.array([run_id], pa.int64()), "manifest": [json.dumps(manifest)],
                        "changes_in": [json.dumps(report.changes_in)], "rows_out": [json.dumps(report.rows_out)],
                        "metrics": [json.dumps(report.metrics, default=str)]})
        return StagedWrite(self.tables.runs, FileActions(known=delta_log.write_small(row, self.tables.runs, tag=f"r{run_id}")),
                           schema)

    def commit(self, staged: list[StagedWrite], run_id: int, manifest: Mapping[str, Any]) -> None:
        """Commit table by table, once every table's files are written (so a failed write commits
        nothing). A table that already holds this run is skipped only if an earlier attempt with this
        very manifest committed it (a resumed run takes its manifest from there); if another run
        planned it, that run got there first and this one stops. A table with no version after the one
        the run read holds no other commit: it is checked at that version, its log not replayed again
        (a 1k-change q20 run's commits took 31 ms so, 57 ms before)."""
        metadata = {delta_log.MANIFEST_KEY: json.dumps(manifest), "streamjoin.run": str(run_id)}
        written = [(write, write.actions.result(), None if write.changes is None else write.changes.result())
                   for write in staged]  # a failed write stops the run here
        for write, actions, changes in written:
            if write.optional and not actions and not write.metadata:
                continue  # a state table this run did not change
            read = manifest["versions"].get(write.path)
            unmoved = read is not None and not delta_log.committed_after(write.path, read)
            if (delta_log.app_version(write.path, self.app, read if unmoved else None) or 0) >= run_id:
                if manifest_of(write.path) != manifest:
                    raise ConcurrentRunError(
                        f"another run of the same model committed {write.path} first (run {run_id}); this run stops "
                        "before writing more: rerun it to pick up where the other left off")
                continue  # a previous attempt of this run committed this table already
            delta_log.commit(write.path, actions, write.schema, partition_by=write.partition_by,
                             app_id=self.app, run_id=run_id, metadata={**metadata, **write.metadata},
                             read_version=read, overwrite=write.overwrite,
                             changes=changes)


def run_once(spark: SparkSession, plan: JoinPlan, tables: ModelTables) -> RunReport:
    """Perform one incremental run of `plan` with its state under `tables`. Under
    `on_plan_change='rebuild'`, a plan the state no longer fits is rebuilt side by side and
    swapped in (`runtime.rebuild`): the report is the swap's, or says "rebuilding" while a
    rebuild held to `rebuild_budget` has not caught up with the inputs (nothing of the model's
    own changed)."""
    jvm_lookups.install()
    jvm_lists.install()
    try:
        return Run(spark, plan, tables).execute()
    except PlanChangedError as exc:  # raised before the run wrote anything
        if plan.config.on_plan_change != "rebuild" or not exc.rebuildable:
            raise
        log.warning("streamjoin %s: the SQL or configuration changed: %s; rebuilding it side by side from its inputs "
                    "while its tables keep the old result, then swapping it in (on_plan_change='rebuild'). What "
                    "changed:\n%s", plan.model, exc.what, exc.diff)
    shadow = rebuild.shadow_tables(tables, plan)
    Run(spark, plan, shadow, budget=plan.config.rebuild_budget, label=f"{plan.model} (rebuild)").execute()
    behind = rebuild.behind(plan, manifest_of(shadow.runs)) if plan.config.rebuild_budget else None
    if behind:
        report = RunReport(plan.model, None, "rebuilding", metrics={"rebuild": behind})
        log.info(report.summary())
        return report
    return Run(spark, plan, tables, swap_from=shadow).execute()
