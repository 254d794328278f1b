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
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Mapping

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ..errors import ConcurrentRunError, InputError
from ..spec import InputSpec
from ..sql.plan import JoinPlan
from ..storage import delta_log, formats
from ..storage.input_schema import check_input_schema
from ..storage.results import stage_changelog, stage_result
from ..storage.tables import ModelTables
from ..storage.writes import FileActions, FileWriter, StagedWrite
from ..types import RowKind
from ..zset import bad_row_kinds_test, col
from . import lease
from .executor import Executor
from .report import RunReport

log = logging.getLogger("streamjoin")


def app_id(model: str) -> str:
    return f"streamjoin:{model}"


def plan_fingerprint(plan: JoinPlan) -> str:
    """A hash of what state depends on; a change means state must be rebuilt (--full-refresh)."""
    shape = f"{plan.explain()}\nbuckets={plan.config.state_buckets}"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


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


def _table_id(path: str) -> str:
    return DeltaTable(path).metadata().id


class Run:
    """One incremental run of a compiled model over its inputs' Delta changelogs."""

    def __init__(self, spark: SparkSession, plan: JoinPlan, tables: ModelTables) -> None:
        self.spark = spark
        self.plan = plan
        self.tables = tables
        self.app = app_id(plan.model)
        self.persisted: list[DataFrame] = []

    def persist(self, df: DataFrame) -> DataFrame:
        """Compute an intermediate result once and cut its lineage, so the plans built on it stay
        small (nested joins would otherwise re-plan every level below them); released by `release`."""
        df = df.localCheckpoint(eager=False)
        self.persisted.append(df)
        return df

    def release(self) -> None:
        """Drop the blocks of every intermediate result this run kept."""
        for df in self.persisted:
            df._jdf.queryExecution().logical().rdd().unpersist(False)
        self.persisted.clear()

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
        fingerprint = plan_fingerprint(self.plan)
        if previous and previous.get("plan") != fingerprint:
            raise InputError("the model's SQL or configuration changed since its last run, so its state no longer "
                             "fits; run it with --full-refresh", model=self.plan.model)
        offsets = {}
        for name, spec in self.plan.inputs.items():
            if spec.location is None or not delta_log.exists(spec.location):
                raise InputError(f"no Delta table at {spec.location!r}", model=self.plan.model, input_name=name)
            consumed = previous.get("offsets", {}).get(name, {})
            offsets[name] = {"start": consumed.get("end"), "end": delta_log.version(spec.location),
                             "table_id": _table_id(spec.location)}
            self.check_not_rebuilt(name, spec, consumed, offsets[name])
        versions = {path: delta_log.version(path) for path in self.tables.all_tables()}
        manifest = {"run": run_id, "plan": fingerprint, "offsets": offsets, "versions": versions,
                    "started": time.time()}
        return run_id, manifest, False

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

    def read_changes(self, manifest: Mapping[str, Any]) -> tuple[dict[str, DataFrame], dict[str, int], frozenset[str]]:
        """Every input's changes for this run, validated; how many changes each has; and the inputs
        whose changes this run are all insertions (a row kind the upsert format derives later excepted)."""
        changes = {}
        for name, spec in self.plan.inputs.items():
            off = manifest["offsets"][name]
            check_input_schema(spec, self.plan.model)
            changes[name] = self.persist(formats.read_changes(self.spark, spec, off["start"], off["end"]))
        checks = {name: row_checks(self.plan.inputs[name], df) for name, df in changes.items()}
        retraction = {name: col(spec.op_column).isin(RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)
                      for name, spec in self.plan.inputs.items()}
        counts = [df.agg(F.lit(name).alias("input"), F.count(F.lit(1)).alias("n"),
                         F.count_if(retraction[name]).alias("retractions"),
                         *[F.count_if(test).alias(f"bad{i}") for i, (test, _) in enumerate(checks[name])])
                  for name, df in changes.items()]
        totals = {r["input"]: r for r in reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), counts).collect()}
        for name, row in totals.items():
            for i, (test, message) in enumerate(checks[name]):
                if row[f"bad{i}"]:
                    sample = "; ".join(str(r.asDict()) for r in changes[name].where(test).limit(3).collect())
                    raise InputError(f"{row[f'bad{i}']} {message}, e.g. {sample}", model=self.plan.model, input_name=name)
        insert_only = frozenset(name for name, row in totals.items()
                                if not row["retractions"] and self.plan.inputs[name].changelog_format != "upsert")
        return changes, {name: row["n"] for name, row in totals.items()}, insert_only

    def execute(self) -> RunReport:
        with lease.holding(self.tables, "run", exclusive_of=("maintain",)):
            return self._execute()

    def _execute(self) -> RunReport:
        started = time.time()
        run_id, manifest, resumed = self.prepare()
        offsets = manifest["offsets"]
        if not resumed and all(o["start"] == o["end"] for o in offsets.values()):
            return RunReport(self.plan.model, None, "no changes", offsets=offsets, previous_run=run_id - 1)
        phases = {"plan": time.time() - started}
        writer = FileWriter()
        try:
            changes, counts, insert_only = self.read_changes(manifest)
            phases["read"] = time.time() - started - sum(phases.values())
            versions = {k: v for k, v in manifest["versions"].items()}
            executor = Executor(self.spark, self.plan, self.tables, versions, run_id, changes, insert_only, self.persist,
                                writer, int(manifest["started"] * 1000))
            output = self.persist(executor.output())
            # the result computes the output on every core (its bucket counts, else its append) before the
            # changelog's one-file write reads it; one job at a time computes a lazily checkpointed frame
            inserts_only = executor.output_inserts_only()
            result = stage_result(self.spark, output, self.plan, self.tables, versions, run_id, writer,
                                  inserts_only=inserts_only)
            changelog = stage_changelog(output, self.plan, self.tables, run_id, writer,
                                        after=result.write.actions if inserts_only else None)
            staged = [*executor.staged, changelog, result.write]
            phases["join_and_write"] = time.time() - started - sum(phases.values())
            written = {w.path: w.actions.result() for w in executor.staged}
            state_rows = {os.path.basename(p): delta_log.rows_after(p, versions.get(p), written.get(p, []))
                          for p in sorted(set(self.tables.state_tables()) | set(written))}
            rows_out = result.counted()
            for count in executor.counted_after_writes:
                count()
            metrics = {**executor.metrics, "state_rows": state_rows,
                       "phases_s": {k: round(v, 3) for k, v in phases.items()}, "master": self.spark.sparkContext.master}
            report = RunReport(self.plan.model, run_id, "committed", offsets=offsets, changes_in=counts,
                               rows_out=rows_out, metrics=metrics)
            staged.append(self.stage_run_log(run_id, manifest, report))
            self.commit(staged, run_id, manifest)
        finally:
            writer.close()
            self.release()
        report.seconds = time.time() - started
        log.info(report.summary())
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
        planned it, that run got there first and this one stops."""
        metadata = {delta_log.MANIFEST_KEY: json.dumps(manifest), "streamjoin.run": str(run_id)}
        written = [(write, write.actions.result()) for write in staged]  # a failed write stops the run here
        for write, actions in written:
            if write.optional and not actions and not write.metadata:
                continue  # a state table this run did not change
            if (delta_log.app_version(write.path, self.app) or 0) >= run_id:
                if manifest_of(write.path) != manifest:
                    raise ConcurrentRunError(
                        f"another run of the same model committed {write.path} first (run {run_id}); this run stops "
                        "before writing more: rerun it to pick up where the other left off")
                continue  # a previous attempt of this run committed this table already
            delta_log.commit(write.path, actions, write.schema, partition_by=write.partition_by,
                             app_id=self.app, run_id=run_id, metadata={**metadata, **write.metadata},
                             read_version=manifest["versions"].get(write.path))


def run_once(spark: SparkSession, plan: JoinPlan, tables: ModelTables) -> RunReport:
    """Perform one incremental run of `plan` with its state under `tables`."""
    return Run(spark, plan, tables).execute()
