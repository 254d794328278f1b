"""The event-time temporal join, with Flink's TemporalRowTimeJoinOperator semantics, in bulk.

`FROM p [LEFT] JOIN v FOR SYSTEM_TIME AS OF p.time AS v ON p.k = v.k [AND residual]`: the
left input holds the probes, the right input is versioned. The versioned input's
changelog is read as Flink's operator reads it: per key (the join key), each change is an
*entry* at its event time — `+I`/`+U` a version valid from that time, `-D` a deletion from
that time — and a later entry at the same key and time replaces the earlier one (in arrival
order: a later run, then the order within the run). `-U` is ignored: Flink's planner drops
UPDATE_BEFORE on the versioned side, and the `+U` that follows carries the new version.

Per run:

1. The watermark advances: W = max(W_old, min over every event-time input of the model (largest
   event time seen - its watermark_delay), FORMAT.md's one watermark per model); unset until each
   has seen a row.
2. Every probe whose time is <= W and that has not been emitted — stored ones and this run's,
   late ones included — selects the entry of its key with the largest time <= its own among
   the versions state holds plus this run's entries. It joins that version when there is one,
   it is not a deletion and the residual holds; otherwise it is null-padded under LEFT JOIN
   (dropped under INNER). A probe is emitted once, with its weight: as in Flink, the probe
   side may be a changelog, and a `-U`/`-D` probe (weight -1) is joined as its row, when the
   watermark passes its time, and retracts what it joins (the row an earlier run emitted for the
   insert, when state still holds the version it joined). A retraction that waits for the
   watermark takes an insertion of its row that waits too (the two are emitted together and
   cancel); the run that reads one with none to take fails, or under on_missing_retraction='ignore'
   drops it (`held_retractions`). A retraction emitted in the run that reads it retracts the row it
   joins from the result; where the result does not hold that row, the run fails, or under 'ignore'
   the result drops the retraction (`storage.results`). With an insert-only probe side the output is
   append-only.
3. Versions no future on-time probe can select leave state: per key, the last entry at or
   before the horizon H = W - allowed_lateness (0 by default, as in Flink) and every later one
   stay. A late probe (time <= W on arrival) sees only what stays, as in Flink.

A temporal join may probe with the rows of another (Flink's multi temporal join, by the same
time) or of an interval join (by a time its rows keep): its probes are what that join emits this
run, and the watermark that join forwards stands in for the probe input's (Flink forwards the
watermark with the rows).

State: two Delta tables. `<join>_probes` holds probes not yet emitted (`_run`, `_weight`);
a run reads them all (they are the probes inside the watermark delay) and ignores those at or
behind the previous watermark, which earlier runs emitted. `<join>_versions` holds entries
(`_run`, `_pos` the place in the run, `_deleted`). Both are `storage.appended` tables: runs
append their new rows, and now and then a run rewrites a table with its live rows only (pending probes; the
versions that stay), so each table stays bounded by what the watermark horizon keeps plus a
few runs of appends. The clock (watermark, each source's largest time) travels in the
commit metadata of both tables.
"""
from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from ..row_errors import fail_when, user_struct
from ..run_values import run_value
from ..sql.plan import Join, Scan, TemporalSpec, inserts_only
from ..sql.temporal import proc_time_columns
from ..storage.formats import ORDER
from ..storage.appended import AppendedTable
from ..types import RowKind, Side
from ..unions import union_by_name
from ..zset import WEIGHT, col, consolidate, from_changelog
from .event_time import US, Clock, as_text, micros
from .nearest import MATCH, last_before

if TYPE_CHECKING:
    from ..runtime.executor import Executor
    from .regular import JoinSide

META_KEY = "streamjoin.temporal"
RUN, POS, DELETED = "_run", "_pos", "_deleted"
PTIME, VTIME = "_p_time", "_v_time"
PROBE, VERSIONS = "probe", "versions"


def horizon(clock: Clock, lateness_us: int) -> int | None:
    """The time at or before which only the last entry per key stays in state."""
    return None if clock.watermark is None else clock.watermark - lateness_us


class TemporalJoin:
    """One run of an event-time temporal join node."""

    def __init__(self, executor: "Executor", node: Join) -> None:
        self.x = executor
        self.node = node
        self.spec: TemporalSpec = node.temporal  # type: ignore[assignment]
        sides = executor.join_sides(node)
        self.probe: JoinSide = sides[Side.LEFT]
        self.versions: JoinSide = sides[Side.RIGHT]
        #: the probe side's scan; None when it is the rows of another temporal join or of an interval join
        self.probe_scan: Scan | None = node.left if isinstance(node.left, Scan) else None
        self.version_scan: Scan = node.right  # type: ignore[assignment]
        self.lateness_us = executor.plan.config.allowed_lateness // US
        paths = {PROBE: executor.tables.state(f"{node.id}_probes"), VERSIONS: executor.tables.state(f"{node.id}_versions")}
        self.schemas = {
            PROBE: StructType(list(self.probe.schema.fields) + [StructField(RUN, LongType()), StructField(WEIGHT, LongType())]),
            VERSIONS: StructType(list(self.versions.schema.fields) + [
                StructField(RUN, LongType()), StructField(POS, LongType()), StructField(DELETED, BooleanType())]),
        }
        self.tables = {s: AppendedTable(p, executor.versions.get(p), self.schemas[s]) for s, p in paths.items()}

    # -- this run's rows ------------------------------------------------------------------------
    def changes(self, scan: Scan) -> DataFrame:
        """An input's rows of this run as the scan sees them, with row kind and place in the run."""
        spec = self.x.plan.inputs[scan.input]
        raw = self.x.changes[spec.name]
        if ORDER in raw.columns:  # upsert: (file ordinal, row) in the Delta log
            pos = col(ORDER)["_ordinal"] * F.lit(1 << 40) + col(ORDER)["_row"]
        else:  # rows of one file keep their order; files in the order Spark reads them
            pos = F.monotonically_increasing_id()
        return self.x.project(scan, raw.withColumn(POS, pos.cast("long")), col(spec.op_column).alias("_kind"), col(POS))

    def weighted(self, probes: DataFrame, scan: Scan) -> DataFrame:
        """The probe input's changes that pass its scan's filters, weighted (a retraction weighs -1)."""
        passes = reduce(lambda a, b: a & b, [F.coalesce(F.expr(f), F.lit(False)) for f in scan.filters], F.lit(True))
        return consolidate(from_changelog(probes.where(passes), self.probe.columns, "_kind"), self.probe.columns)

    # -- state ----------------------------------------------------------------------------------
    def resolve(self, entries: DataFrame) -> DataFrame:
        """Per key and time, the entry that arrived last (it replaced the others)."""
        by = Window.partitionBy(*[col(k) for k in self.versions.key_columns], col(VTIME)).orderBy(
            col(RUN).desc(), col(POS).desc())
        return entries.withColumn("_n", F.row_number().over(by)).where(col("_n") == 1).drop("_n")

    def clean(self, entries: DataFrame, horizon: int | None) -> DataFrame:
        """The entries that stay once the horizon is `horizon`: per key, the last one at or before
        it and every later one (the others no on-time probe can select any more)."""
        if horizon is None:
            return entries
        h = run_value(horizon)
        last = F.max(F.when(col(VTIME) <= h, col(VTIME))).over(Window.partitionBy(*[col(k) for k in self.versions.key_columns]))
        return entries.withColumn("_last", last).where((col(VTIME) > h) | (col(VTIME) == col("_last"))).drop("_last")

    # -- the join -------------------------------------------------------------------------------
    def select_versions(self, due: DataFrame, entries: DataFrame) -> DataFrame:
        """Each due probe with the entry of its key that it selects, the one with the largest time at
        or before its own (NULL columns when none): `nearest.last_before`, an entry at the probe's time included."""
        picked = [c for c in entries.columns if c not in (*self.versions.key_columns, RUN, POS)]
        chosen = last_before(due, self.probe.key_columns, col(PTIME), entries, self.versions.key_columns, col(VTIME),
                             picked)
        return chosen.select(*[col(c) for c in due.columns], *[col(MATCH)[c].alias(c) for c in picked])

    def run(self) -> DataFrame:
        x, persist = self.x, self.x.persist
        if self.probe_scan is None:  # the rows the temporal join it probes with emitted (it runs first)
            arrived = persist(consolidate(x.delta(self.node.left), self.probe.columns))
        else:
            arrived = self.weighted(persist(self.changes(self.probe_scan)), self.probe_scan)
        incoming = persist(self.changes(self.version_scan))
        old = Clock.load(META_KEY, self.tables[PROBE].path, self.tables[PROBE].version)
        clock = old.advance(*x.watermark_sources({} if self.probe_scan is not None else {PROBE: self.node.left},
                                                 old.max_time))
        w_old, w_new = old.watermark, clock.watermark
        x.watermarks[self.node.id] = w_new

        # probes: this run's and the stored ones not yet emitted
        arrived = arrived.withColumn(RUN, run_value(x.run_id))
        stored_probes = self.tables[PROBE].rows(x.spark)
        if w_old is not None:
            stored_probes = stored_probes.where(micros(col(self.spec.probe_time)) > run_value(w_old))
        cols = [*self.probe.columns, RUN, WEIGHT]
        pending = stored_probes.select(*cols).unionByName(arrived.select(*cols)).withColumn(
            PTIME, micros(col(self.spec.probe_time)))
        is_due = F.lit(False) if w_new is None else col(PTIME) <= run_value(w_new)
        pending = persist(self.held_retractions(pending, is_due))

        # versions: the stored entries that stay (as of the last run), overlaid with this run's
        stored_entries = self.tables[VERSIONS].rows(x.spark)
        entries_cols = [*self.versions.columns, RUN, POS, DELETED]
        with_time = lambda df: self.versions.with_keys(df).withColumn(VTIME, micros(col(self.spec.version_time)))  # noqa: E731
        # the stored entries are resolved together with this run's: which ones `clean` keeps depends on
        # their keys and times alone, so it keeps the same ones unresolved (one window over them less)
        kept = self.clean(with_time(stored_entries), horizon(old, self.lateness_us))
        new_entries = with_time(incoming.where(col("_kind") != RowKind.UPDATE_BEFORE.value).select(
            *[col(c) for c in self.versions.columns], run_value(x.run_id).alias(RUN), col(POS),
            (col("_kind") == RowKind.DELETE.value).alias(DELETED))).where(~self.versions.null_key())
        entries = persist(self.resolve(kept.unionByName(new_entries)))

        # emit the due probes
        due = persist(self.probe.with_keys(pending.where(is_due)))
        chosen = persist(self.select_versions(due, entries))  # read again by the count of unmatched probes
        found = col(VTIME).isNotNull() & ~col(DELETED)
        if self.node.residual:
            found = found & F.coalesce(F.expr(self.node.residual), F.lit(False))
        out_cols = [*self.probe.columns, *self.versions.columns]
        matched = chosen.where(found).select(*[col(c) for c in out_cols], col(WEIGHT))
        outputs = [matched]
        padded = chosen.where(~found)
        if self.node.join_type.preserves(Side.LEFT):
            nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in self.versions.schema.fields]
            outputs.append(padded.select(*[col(c) for c in self.probe.columns], *nulls, col(WEIGHT)))

        # state
        cutoff = horizon(clock, self.lateness_us)
        still = pending.where(~is_due).select(*cols)
        waiting = still.where(col(RUN) == run_value(x.run_id))
        x.staged.append(self.tables[PROBE].stage(x.writer, waiting, still, clock.metadata()))
        x.staged.append(self.tables[VERSIONS].stage(x.writer, new_entries.select(*entries_cols),
                                                    self.clean(entries, cutoff).select(*entries_cols), clock.metadata()))
        self.record(clock, due, padded)
        # a probe is emitted with its weight: only insertions when none is a retraction, stored or new
        adds_only = inserts_only(self.node.left, x.insert_only) and self.tables[PROBE].holds_no_retraction()
        return x.emitted(self.node, union_by_name(outputs), adds_only=adds_only)

    def held_retractions(self, pending: DataFrame, is_due: SparkColumn) -> DataFrame:
        """`pending` (the probes not yet emitted, stored and this run's) where no retraction held back
        lacks an insertion to take. A retraction held back for the watermark cannot retract an emitted
        row (that row's time, its own, is behind the watermark), so it takes a waiting insertion of its
        row, with which it is emitted and cancels; without one it would be emitted runs later as a
        retraction of a row never inserted. Rows are compared without their processing-time columns.
        Where this run's probes retract, under on_missing_retraction='fail' the run's write pass fails
        on the first such row; under 'ignore' this run's retractions of it are dropped (this run's rows
        of a row are one: they share the run's processing time, and `weighted` consolidated them)."""
        scan = self.probe_scan
        if scan is None or scan.input in self.x.insert_only:
            return pending  # nothing retracted, or the rows of another temporal join, which checks its own input
        timed = proc_time_columns(scan, computed=True)  # the time of the run reading a row: not part of it here
        match = [c for c in self.probe.columns if c not in timed]  # the probe time among them: a row waits or not
        per_row = F.sum(WEIGHT).over(Window.partitionBy(*[col(c) for c in match]))  # < 0: retractions lack insertions
        if self.x.plan.config.on_missing_retraction == "ignore":
            lacking = ~is_due & (col("_n") < 0) & (col(RUN) == run_value(self.x.run_id)) & (col(WEIGHT) < 0)
            kept = F.when(lacking, F.least(col(WEIGHT) - col("_n"), F.lit(0))).otherwise(col(WEIGHT))
            return pending.withColumn("_n", per_row).withColumn(WEIGHT, kept).where(col(WEIGHT) != 0).drop("_n")
        message = F.concat(  # built for a failing row only
            F.lit(f"the temporal join {self.node.id} holds the probe row "), F.to_json(user_struct(match)),
            F.lit(" until the watermark passes its time, and this run retracts it "), (-col("_n")).cast("string"),
            F.lit(" time(s) more than it was inserted: each -U/-D must repeat, as inserted (its time included), a row "
                  "that this run or an earlier one inserted, or set on_missing_retraction='ignore' to drop such "
                  "retractions"))
        held = pending.where(~is_due).withColumn("_n", per_row)
        self.x.writer.check(held.where(col("_n") < 0).where(~fail_when(
            F.lit(True), message, model=self.x.plan.model, input_name=scan.input)))
        return pending

    def record(self, clock: Clock, due: DataFrame, padded: DataFrame) -> None:
        """The run's watermark and its emitted and unmatched probe counts (summed in the write pass)."""
        writer = self.x.writer
        counts = {"probes_emitted": writer.count(due, col(WEIGHT)), "probes_unmatched": writer.count(padded, col(WEIGHT))}

        def fill() -> None:
            self.x.metrics[self.node.id] = {"operator": "event-time temporal join", "watermark": as_text(clock.watermark),
                                            **{k: f.result() for k, f in counts.items()}}

        self.x.counted_after_writes.append(fill)


def run_temporal_join(executor: "Executor", node: Join) -> DataFrame:
    """The output change of an event-time temporal join node for this run (append-only when its probes only insert)."""
    return TemporalJoin(executor, node).run()
