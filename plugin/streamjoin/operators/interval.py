"""The interval (time-windowed) join, with Flink's RowTimeIntervalJoin semantics, in bulk.

Both inputs are append-only and carry an event time; a left row l and a right row r join
when their keys (and residual) match and `lower <= l.time - r.time <= upper`. The left side may
be the rows of another join that carry the time, as Flink plans it: an interval join's (a
cascade) or an event-time temporal join's. Its rows of the run arrive as they are emitted there,
and the watermark it forwards stands in for that side's largest event time: a temporal join's as
it is, an interval join's held back by the longest a row waits there for a partner (Flink's
`getMaxOutputDelay`). Per run:

1. Every change is joined first: Δ(L ⋈ R) = ΔL ⋈ (R_state ∪ ΔR) + L_state ⋈ ΔR, where the
   states hold only rows that could still be matched when the run began.
2. The watermark advances: W = max(W_old, min over every event-time input of the model (largest
   event time seen - its watermark_delay), as FORMAT.md defines one watermark per model, and
   over a cascade's side the watermark the join below forwards); it stays unset until each of
   them has one.
3. Rows no future row can match leave state. Future rows have event time >= W' = W -
   allowed_lateness, so a left row stays alive while l.time >= W' + lower and a right row
   while r.time >= W' - upper (one microsecond later for a strict bound): each side's
   *alive_from* time, which never decreases. A row of a preserved (outer) side that leaves
   state — or arrives already behind it, or has a NULL key or event time — without ever
   having matched is emitted null-padded in this run. An empty window (lower > upper) can
   match nothing: no row is kept and outer rows are padded as they arrive, as Flink's
   planner does for a negative window size.

State is a Delta table per side, partitioned by a time slice of the event time: rows are
appended with their arrival run (`_run`; rows are told apart by value and run), their count
(`_weight`) and, on outer sides, fragments of their match count (`_degree`, which only
grows). A run reads only the slices its new rows can match and the slices that expire;
whole slices behind alive_from are dropped with remove actions. A slice still partly alive
keeps its dead rows until it drops, so a side stores at most one slice of dead rows.
The watermark, each side's largest event time and alive_from, and the slice width travel
in the commit metadata of the state tables.

Late rows. A row is *late* when its event time is behind W' = W - allowed_lateness as its run
began. Only late rows lose pairs, as in Flink: if a partner had left state (or was never kept)
when the later of the two arrived, that later row's time is below W' (the bound puts it there).
A late row still joins what state holds when it arrives, so the result lies between the batch
join over the on-time rows and the batch join over all rows. Each run records its late rows,
as they were read from their input, in the model's `late_rows` table (`_run_id`, `_join`,
`_side`, `_input`, and the row as a struct column named after its input), written in the run's
one write pass, and counts them per input in the run log (`rows_late`); `streamjoin.matches_batch`
compares the result with both batch joins (see `api.publish`).
"""
from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import reduce
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ..errors import InputError
from ..one_partition import gathered
from ..row_errors import retraction_examples
from ..run_values import run_value
from ..sql.plan import Join, JoinPlan, Node, Scan, TimeBound, scans
from ..storage import delta_log, file_reads
from ..storage.formats import data_schema
from ..storage.writes import FileActions, RunWriter, StagedWrite
from ..types import RowKind, Side
from ..unions import union_by_name
from ..zset import WEIGHT, col, consolidate
from .event_time import US, advanced, as_text, computed, micros
from .regular import JoinSide

if TYPE_CHECKING:
    from ..runtime.executor import Executor

META_KEY = "streamjoin.interval"
RUN, DEGREE, SLICE = "_run", "_degree", "_slice"
MIN_SLICE = timedelta(minutes=1)


def _us(d: timedelta) -> int:
    return d // US


LATE_META = ("_run_id", "_join", "_side", "_input")  # the late rows table's bookkeeping columns
INPUT_ROW = "_input_row"


def late_sides(plan: JoinPlan) -> list[tuple[str, str, str]]:
    """(join id, side, input) of every interval join side that reads an input, in plan order."""
    return [(node.id, s.value, scan.input) for node in plan.nodes()
            if isinstance(node, Join) and node.time_bound is not None
            for s, scan in ((Side.LEFT, node.left), (Side.RIGHT, node.right)) if isinstance(scan, Scan)]


def late_rows_schema(plan: JoinPlan) -> StructType:
    """The late rows table of a model: bookkeeping, then a struct of declared columns per input
    an interval join reads (a row fills its own input's)."""
    inputs = dict.fromkeys(i for _, _, i in late_sides(plan))
    return StructType([StructField(c, LongType() if c == "_run_id" else StringType()) for c in LATE_META]
                      + [StructField(i, data_schema(plan.inputs[i])) for i in inputs])


@dataclass(frozen=True)
class Clock:
    """The timing an interval join carries from run to run (all times in microseconds)."""

    slice_us: int
    watermark: int | None = None
    max_time: dict[str, int | None] = field(default_factory=dict)  # per source its watermark follows
    alive_from: dict[str, int | None] = field(default_factory=lambda: {s.value: None for s in Side})

    def metadata(self) -> dict[str, str]:
        body = {"slice_us": self.slice_us, "watermark": self.watermark, "watermark_utc": as_text(self.watermark),
                "max_time": self.max_time, "alive_from": self.alive_from}
        return {META_KEY: json.dumps(body)}

    @classmethod
    def load(cls, path: str, version: int | None, default_slice: int) -> "Clock":
        """The clock committed with a state table's version; a fresh one before the first run."""
        raw = delta_log.latest_metadata(path, META_KEY, version) if version is not None else None
        if not raw:
            return cls(slice_us=default_slice)
        body = json.loads(raw)
        return cls(slice_us=int(body["slice_us"]), watermark=body["watermark"], max_time=body["max_time"],
                   alive_from=body["alive_from"])

    def advance(self, run_max: dict[str, int | None], delays: dict[str, int], bound: TimeBound,
                lateness_us: int) -> "Clock":
        """The clock after a run whose sources' largest times were `run_max` (`Executor.watermark_sources`)."""
        watermark, max_time = advanced(self.watermark, self.max_time, run_max, delays)
        alive_from = dict(self.alive_from)
        if watermark is not None:
            w = watermark - lateness_us
            limits = {Side.LEFT.value: w + _us(bound.lower) + int(bound.lower_strict),
                      Side.RIGHT.value: w - _us(bound.upper) + int(bound.upper_strict)}
            alive_from = {s: limits[s] if old is None else max(old, limits[s]) for s, old in alive_from.items()}
        return replace(self, watermark=watermark, max_time=max_time, alive_from=alive_from)


@dataclass
class IntervalState:
    """One side's state table: its columns, `_run`, `_weight`, (`_degree`), partitioned by `_slice`."""

    path: str
    schema: StructType
    tracks_degree: bool
    version: int | None
    slice_us: int

    def __post_init__(self) -> None:
        self.files = delta_log.data_files(self.path, self.version)

    @property
    def stored_schema(self) -> StructType:
        extra = [StructField(RUN, LongType()), StructField(WEIGHT, LongType())]
        if self.tracks_degree:
            extra.append(StructField(DEGREE, LongType()))
        return StructType(list(self.schema.fields) + extra)

    @property
    def commit_schema(self) -> StructType:
        return StructType(list(self.stored_schema.fields) + [StructField(SLICE, LongType())])

    def slice_of(self, us: SparkColumn) -> SparkColumn:
        return ((us - F.pmod(us, F.lit(self.slice_us))) / F.lit(self.slice_us)).cast("long")

    def _slice(self, f: delta_log.DataFile) -> int:
        return int(f.partition[SLICE])

    def read(self, spark: SparkSession, ranges: Sequence[tuple[int | None, int | None]]) -> DataFrame:
        """Stored rows of the slices overlapping any of the closed time ranges (None: unbounded)."""
        def wanted(s: int) -> bool:
            lo_s, hi_s = s * self.slice_us, (s + 1) * self.slice_us - 1
            return any((lo is None or hi_s >= lo) and (hi is None or lo_s <= hi) for lo, hi in ranges)

        files = [f for f in self.files if wanted(self._slice(f))]
        return file_reads.read(spark, files, self.stored_schema)

    def stage(self, appends: DataFrame, alive_from: int | None, writer: RunWriter) -> FileActions:
        """Stage appended rows (with their slice); remove the slices wholly behind `alive_from`."""
        names = [f.name for f in self.stored_schema.fields]
        actions = writer.write(appends.select(*[col(c) for c in names], col(SLICE)), self.path, partition_by=[SLICE])
        if alive_from is not None:
            gone = [f for f in self.files if (self._slice(f) + 1) * self.slice_us <= alive_from]
            if gone:
                actions += delta_log.remove_actions(gone)
        return actions


@dataclass(frozen=True)
class _Names:
    """The helper columns one side's rows carry inside the operator (`_l_time`, `_r_w`, ...)."""

    time: str
    run: str
    w: str
    deg: str
    inc: str
    identity: tuple[str, ...]  # what tells two stored rows apart: their values and arrival run

    @classmethod
    def of(cls, side: JoinSide) -> "_Names":
        p = f"_{side.side.value[0]}_"
        return cls(p + "time", p + "run", p + "w", p + "deg", p + "inc", (*side.columns, p + "run"))


class IntervalJoin:
    """One run of an interval join node."""

    def __init__(self, executor: "Executor", node: Join) -> None:
        self.executor = executor
        self.node = node
        self.bound: TimeBound = node.time_bound  # type: ignore[assignment]
        self.sides = executor.join_sides(node)
        self.names = {s: _Names.of(self.sides[s]) for s in Side}
        self.children: dict[Side, Node] = {Side.LEFT: node.left, Side.RIGHT: node.right}
        #: the sides read from an input (the left of a cascade is the rows of another interval join)
        self.scans = {s: n for s, n in self.children.items() if isinstance(n, Scan)}
        self.time_column = {Side.LEFT: self.bound.left_time, Side.RIGHT: self.bound.right_time}
        self.specs = {s: executor.plan.inputs[scan.input] for s, scan in self.scans.items()}
        self.model = executor.plan.model
        self.lateness_us = _us(executor.plan.config.allowed_lateness)

    # -- inputs -------------------------------------------------------------------------------
    def changes(self, s: Side) -> DataFrame:
        """This run's rows of a side: internal columns, weight, row kind, and whether they pass the
        scan's filters. A side that is a join's rows is that join's output change this run."""
        time = micros(col(self.time_column[s]))
        if s not in self.scans:
            rows = self.executor.delta(self.children[s])
            kind = F.when(col(WEIGHT) < 0, F.lit(RowKind.DELETE.value)).otherwise(F.lit(RowKind.INSERT.value))
            return rows.withColumns({"_kind": kind, "_passes": F.lit(True), self.names[s].time: time})
        scan, spec = self.scans[s], self.specs[s]
        raw = self.executor.changes[scan.input]
        row = F.struct(*[col(c) for c in spec.column_names]).alias(INPUT_ROW)  # as read: for the late rows table
        renamed = self.executor.project(scan, raw, col(spec.op_column).alias("_kind"), row,
                                        F.lit(1).cast("long").alias(WEIGHT))
        passes = reduce(lambda a, b: a & b, [F.coalesce(F.expr(f), F.lit(False)) for f in scan.filters], F.lit(True))
        return renamed.withColumn("_passes", passes).withColumn(self.names[s].time, time)

    def statistics(self, changes: dict[Side, DataFrame]) -> dict[Side, Any]:
        """Per side: time range of the joining rows, retractions. From the side's files where their
        footers and statistics tell them (`Executor.stored_time_range`; the range then covers rows the
        scan's filters drop too, so a run may read a little more state), else in one Spark job."""
        known, parts = {}, []
        for s in Side:
            stored = (self.executor.scan_time_range(self.scans[s], self.time_column[s], append_only=True)
                      if s in self.scans else None)
            if stored is not None:
                known[s] = {"lo": stored.lo, "hi": stored.hi, "retractions": 0}
                continue
            t = col(self.names[s].time)
            parts.append(changes[s].agg(
                F.lit(s.value).alias("side"),
                F.min(F.when(col("_passes"), t)).alias("lo"), F.max(F.when(col("_passes"), t)).alias("hi"),
                F.count_if(col("_passes") & (col("_kind") != RowKind.INSERT.value)).alias("retractions")))
        return {**known, **{Side(r["side"]): r.asDict() for r in computed(parts)}}

    def reject_retractions(self, s: Side, changes: DataFrame, n: int) -> None:
        examples = retraction_examples(changes.where(col("_passes")), self.sides[s].columns)
        child = self.children[s]
        source = "" if s in self.scans else f" from the rows of {child.id}"  # a temporal join's: its probes retract
        raise InputError(
            f"interval joins need append-only inputs, as in Flink: {n} change(s) of kind -U/+U/-D reached the "
            f"interval join {self.node.id}{source}, e.g. {examples}. Feed it an insert-only changelog (only +I "
            "rows, or changelog_format 'append'), or drop the time bound to make it a regular join",
            model=self.model, input_name=scans(child)[0].input)

    def new_rows(self, s: Side, changes: DataFrame) -> DataFrame:
        """The side's joining rows of this run, consolidated: columns, weight, keys, time."""
        side, n = self.sides[s], self.names[s]
        rows = consolidate(changes.where(col("_passes")), side.columns)
        return side.with_keys(rows.withColumnRenamed(WEIGHT, n.w)).withColumn(n.time, micros(col(self.time_column[s])))

    def never_matching(self, s: Side) -> SparkColumn:
        return self.sides[s].null_key() | col(self.names[s].time).isNull()

    # -- state --------------------------------------------------------------------------------
    def state_rows(self, s: Side, state: IntervalState, ranges: list[tuple[int | None, int | None]],
                   alive_from: int | None) -> DataFrame:
        """Consolidated stored rows of the slices in `ranges` that were alive when the run began."""
        side, n = self.sides[s], self.names[s]
        stored = state.read(self.executor.spark, ranges)
        degree = [F.sum(DEGREE).cast("long").alias(n.deg)] if side.tracks_degree else []
        rows = (stored.groupBy(*[col(c) for c in side.columns], col(RUN).alias(n.run))
                .agg(F.sum(WEIGHT).cast("long").alias(n.w), *degree).where(col(n.w) != 0))
        rows = side.with_keys(rows).withColumn(n.time, micros(col(self.time_column[s])))
        return rows if alive_from is None else rows.where(col(n.time) >= run_value(alive_from))

    def read_ranges(self, s: Side, stats: dict[Side, Any], old: Clock, new: Clock) -> list[tuple[int | None, int | None]]:
        """The time ranges of side `s`'s state this run needs: what the other side's new rows can
        match, and what expires."""
        ranges: list[tuple[int | None, int | None]] = []
        other = stats[s.other]
        lower, upper = _us(self.bound.lower), _us(self.bound.upper)
        if other["lo"] is not None:
            if s is Side.LEFT:  # l in [r + lower, r + upper]
                ranges.append((other["lo"] + lower, other["hi"] + upper))
            else:  # r in [l - upper, l - lower]
                ranges.append((other["lo"] - upper, other["hi"] - lower))
        start, end = old.alive_from[s.value], new.alive_from[s.value]
        if end is not None and (start is None or end > start):
            ranges.append((start, end - 1))
        return ranges

    # -- the join -----------------------------------------------------------------------------
    def condition(self, left: DataFrame, right: DataFrame) -> SparkColumn:
        ls, rs = self.sides[Side.LEFT], self.sides[Side.RIGHT]
        conds = [left[a].eqNullSafe(right[b]) if safe else left[a] == right[b]
                 for a, b, safe in zip(ls.key_columns, rs.key_columns, ls.null_safe)]
        diff = col(self.names[Side.LEFT].time) - col(self.names[Side.RIGHT].time)
        lower, upper = F.lit(_us(self.bound.lower)), F.lit(_us(self.bound.upper))
        conds.append(diff > lower if self.bound.lower_strict else diff >= lower)
        conds.append(diff < upper if self.bound.upper_strict else diff <= upper)
        if self.node.residual:
            conds.append(F.expr(self.node.residual))
        return reduce(lambda a, b: a & b, conds)

    def pair_columns(self, s: Side) -> list[str]:
        return [*self.names[s].identity, self.names[s].w]

    def pairs(self, new: dict[Side, DataFrame], state: dict[Side, DataFrame]) -> DataFrame:
        """ΔL ⋈ (R_state ∪ ΔR) + L_state ⋈ ΔR: each side's columns, run and weight."""
        keep = {s: self.pair_columns(s) + self.sides[s].key_columns + [self.names[s].time] for s in Side}
        right_all = state[Side.RIGHT].select(*keep[Side.RIGHT]).unionByName(new[Side.RIGHT].select(*keep[Side.RIGHT]))
        out = []
        for left, right in ((new[Side.LEFT].select(*keep[Side.LEFT]), right_all),
                            (state[Side.LEFT].select(*keep[Side.LEFT]), new[Side.RIGHT].select(*keep[Side.RIGHT]))):
            joined = left.join(right, self.condition(left, right), "inner")
            out.append(joined.select(*[col(c) for c in self.pair_columns(Side.LEFT) + self.pair_columns(Side.RIGHT)]))
        return out[0].unionByName(out[1])

    def degrees(self, s: Side, new: DataFrame, state: DataFrame, pairs: DataFrame) -> DataFrame:
        """Every touched row of a preserved side: weight, stored degree, matches this run (`inc`), time."""
        n, other = self.names[s], self.names[s.other]
        zero = F.lit(0).cast("long")
        ident = [col(c) for c in n.identity]
        parts = [
            state.select(*ident, col(n.w), col(n.deg), zero.alias(n.inc)),
            new.select(*ident, col(n.w), zero.alias(n.deg), zero.alias(n.inc)),
            pairs.select(*ident, zero.alias(n.w), zero.alias(n.deg), col(other.w).alias(n.inc)),
        ]
        grouped = gathered(union_by_name(parts)).groupBy(*ident).agg(
            *[F.sum(c).cast("long").alias(c) for c in (n.w, n.deg, n.inc)])
        return grouped.withColumn(n.time, micros(col(self.time_column[s])))

    def padded(self, s: Side, rows: DataFrame, weight: str) -> DataFrame:
        """Rows of side `s` as output rows, the other side's columns NULL."""
        mine = set(self.sides[s].columns)
        out = [col(f.name) if f.name in mine else F.lit(None).cast(f.dataType).alias(f.name)
               for side in (self.sides[Side.LEFT], self.sides[Side.RIGHT]) for f in side.schema.fields]
        return rows.select(*out, col(weight).alias(WEIGHT))

    def run(self) -> DataFrame:
        x, persist = self.executor, self.executor.persist
        changes = {s: persist(self.changes(s)) for s in Side}
        stats = self.statistics(changes)
        for s in Side:
            if stats[s]["retractions"]:
                self.reject_retractions(s, changes[s], stats[s]["retractions"])
        paths = {s: x.tables.state(f"{self.node.id}_{s.value}") for s in Side}
        old = Clock.load(paths[Side.LEFT], x.versions.get(paths[Side.LEFT]), self.default_slice())
        clock = old.advance(*x.watermark_sources({s.value: self.children[s] for s in Side if s not in self.scans},
                                                 old.max_time), self.bound, self.lateness_us)
        delay = _us(self.bound.output_delay(x.plan.config.allowed_lateness))  # what the next join sees
        x.watermarks[self.node.id] = None if clock.watermark is None else clock.watermark - delay
        tables = {s: IntervalState(paths[s], self.sides[s].schema, self.sides[s].tracks_degree,
                                   x.versions.get(paths[s]), old.slice_us) for s in Side}
        late = self.stage_late_rows(changes, old)
        arrived = {s: persist(self.new_rows(s, changes[s])) for s in Side}
        new = {s: arrived[s].where(~self.never_matching(s)).withColumn(self.names[s].run, run_value(x.run_id))
               for s in Side}
        state = {s: persist(self.state_rows(s, tables[s], self.read_ranges(s, stats, old, clock),
                                            old.alive_from[s.value])) for s in Side}
        pairs = persist(self.pairs(new, state))
        l, r = self.names[Side.LEFT], self.names[Side.RIGHT]
        outputs = [pairs.select(*[col(c) for c in self.sides[Side.LEFT].columns + self.sides[Side.RIGHT].columns],
                                (col(l.w) * col(r.w)).alias(WEIGHT))]
        padded, expired = [], []
        for s in Side:
            alive_from = clock.alive_from[s.value]
            if self.bound.empty:  # no row can ever match: none is kept, outer rows are padded at once
                alive = F.lit(False)
            else:
                alive = F.lit(True) if alive_from is None else col(self.names[s].time) >= run_value(alive_from)
            expired.append(state[s].where(~alive).agg(F.sum(self.names[s].w).alias("n")))
            side_padded, appends = self.settle(s, alive, tables[s], arrived[s], new[s], state[s], pairs)
            padded.extend(side_padded)
            actions = tables[s].stage(appends, alive_from, x.writer)
            x.staged.append(StagedWrite(tables[s].path, actions, tables[s].commit_schema, (SLICE,), clock.metadata()))
        output = x.emitted(self.node, union_by_name(outputs + padded), adds_only=True)  # its inputs only insert
        self.record(clock, expired, padded, late)
        return output

    def settle(self, s: Side, alive: SparkColumn, table: IntervalState, arrived: DataFrame, new: DataFrame,
               state: DataFrame, pairs: DataFrame) -> tuple[list[DataFrame], DataFrame]:
        """A side's null-padded output rows and its state appends, once this run's pairs are known.

        `alive` tells rows that stay in state. On a preserved side, a row that does not stay
        and never matched is padded; stored rows that matched gain degree fragments.
        """
        n, side, x = self.names[s], self.sides[s], self.executor
        slice_ = table.slice_of(col(n.time)).alias(SLICE)
        data = [col(c) for c in side.columns]
        if not side.tracks_degree:
            return [], new.where(alive).select(*data, col(n.run).alias(RUN), col(n.w).alias(WEIGHT), slice_)
        rows = x.persist(self.degrees(s, new, state, pairs))
        padded = [self.padded(s, rows.where(~alive & (col(n.deg) + col(n.inc) == 0)), n.w),
                  self.padded(s, arrived.where(self.never_matching(s)), n.w)]
        arriving = col(n.run) == run_value(x.run_id)
        appends = rows.where(alive & (arriving | (col(n.inc) != 0))).select(
            *data, col(n.run).alias(RUN), F.when(arriving, col(n.w)).otherwise(0).cast("long").alias(WEIGHT),
            col(n.inc).alias(DEGREE), slice_)
        return padded, appends

    def stage_late_rows(self, changes: dict[Side, DataFrame], old: Clock) -> dict[str, list[Future]]:
        """Stage this run's late rows (see the module docstring) as appends to the model's late rows
        table, in the write pass; their counts per input, summed in the same pass.

        One model's interval joins share the table and its one commit: the first join of a run
        stages the write, the next ones add their files to it."""
        if old.watermark is None:  # no watermark yet: nothing is late
            return {}
        x, behind = self.executor, run_value(old.watermark - self.lateness_us)
        schema = late_rows_schema(x.plan)
        path = x.tables.late_rows
        actions, counts = FileActions(), {}
        for s in self.scans:
            rows = changes[s].where(col("_passes") & (col(self.names[s].time) < behind))
            meta = [run_value(x.run_id).alias("_run_id"), F.lit(self.node.id).alias("_join"),
                    F.lit(s.value).alias("_side"), F.lit(self.scans[s].input).alias("_input")]
            data = [(col(INPUT_ROW) if f.name == self.scans[s].input else F.lit(None)).cast(f.dataType).alias(f.name)
                    for f in schema.fields[len(LATE_META):]]
            actions += x.writer.write(rows.select(*meta, *data), path)
            counts.setdefault(self.scans[s].input, []).append(x.writer.count(rows, F.lit(1)))
        shared = next((w for w in x.staged if w.path == path), None)
        if shared is None:
            x.staged.append(StagedWrite(path, actions, schema, optional=True))
        else:
            shared.actions = shared.actions + actions
        return counts

    def default_slice(self) -> int:
        """The slice width of new state: about the time a row stays in state, at least a minute."""
        window = max(self.bound.upper - self.bound.lower, timedelta(0))
        horizon = window + max(spec.watermark_delay for spec in self.specs.values()) + self.executor.plan.config.allowed_lateness
        return _us(max(horizon, MIN_SLICE))

    def record(self, clock: Clock, expired: list[DataFrame], padded: list[DataFrame],
               late: dict[str, list[Future]]) -> None:
        """Put the run's watermark, its expired and padded row counts and its late rows per input
        (summed in the write pass) into the executor's metrics; the counts are read once the pass has run."""
        writer = self.executor.writer
        counts = {"expired": [writer.count(e, F.coalesce(col("n"), F.lit(0))) for e in expired],
                  "padded": [writer.count(p, col(WEIGHT)) for p in padded]}

        def fill() -> None:
            self.executor.metrics[self.node.id] = {
                "operator": "interval join", "watermark": as_text(clock.watermark),
                "rows_expired": sum(f.result() for f in counts["expired"]),
                "rows_padded": sum(f.result() for f in counts["padded"]),
                "alive_from": {s: as_text(t) for s, t in clock.alive_from.items()},
                "rows_late": {name: sum(f.result() for f in fs) for name, fs in late.items()},
            }

        self.executor.counted_after_writes.append(fill)


def run_interval_join(executor: "Executor", node: Join) -> DataFrame:
    """The output change of an interval join node for this run (append-only: positive weights)."""
    return IntervalJoin(executor, node).run()
