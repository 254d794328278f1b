"""Evaluate a join plan for one run: each node's change from its children's changes and state."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Collection, Mapping, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from ..local_rows import empty_frame
from ..operators.asof import run_asof_join
from ..operators.event_time import US, computed, micros
from ..operators.interval import run_interval_join
from ..operators.lookup import run_lookup_join
from ..operators.multiway import run_multi_join
from ..operators.regular import JoinSide, RegularJoin
from ..operators.temporal import run_temporal_join
from ..operators.upsert import UpsertKey, normalize
from ..operators.window import run_window_join
from ..run_values import run_value
from ..sql.plan import Join, JoinPlan, Node, Scan, inserts_only
from ..storage.delta_log import DataFile
from ..storage import formats
from ..storage.formats import data_schema, declared_type
from ..storage.state import StateLayout, StateTable, plain_key_columns
from ..storage.tables import ModelTables
from ..storage.time_range import TimeRange, time_range
from ..storage.writes import RunWriter, StagedWrite
from ..types import Side
from ..zset import WEIGHT, col, consolidate, from_changelog, q


WINDOW = "_window"  # the window a row of a window table function is in, while its columns are computed


def _millis(duration) -> int | None:
    return None if duration is None else int(duration.total_seconds() * 1000)


@dataclass
class Executor:
    """Computes a run's output change for a plan; state writes are staged, not committed."""

    spark: SparkSession
    plan: JoinPlan
    tables: ModelTables
    versions: Mapping[str, int | None]  # pinned table versions for this run
    run_id: int
    changes: Mapping[str, DataFrame]  # per input: data columns + row kind, this run's changes
    insert_only: frozenset[str]  # inputs whose changes this run are all insertions
    persist: Callable[[DataFrame], DataFrame]
    writer: RunWriter  # every table write of the run, in one Spark job
    now_ms: int  # the run's time (from its manifest, so a retry computes the same)
    input_versions: Mapping[str, int]  # per input: the version of its Delta table this run reads to
    #: per input: the version of its Delta table the runs before read to (None: none read it)
    input_starts: Mapping[str, int | None] = field(default_factory=dict)
    staged: list[StagedWrite] = field(default_factory=list)
    input_changes: dict[str, DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)  # per-run figures for the run log
    #: figures to fill in once the run's write pass has run (they read its counters)
    counted_after_writes: list[Callable[[], None]] = field(default_factory=list)
    #: per input: the files whose rows are this run's changes, column for column (None: not so stored)
    input_files: Mapping[str, Sequence[DataFile] | None] = field(default_factory=dict)
    #: per time-based join: the watermark it forwards after this run (a join of its rows reads it)
    watermarks: dict[str, int | None] = field(default_factory=dict)
    #: whether every weight of the root join's output is positive this run (see `emitted`)
    root_adds_only: bool = False
    _input_max_times: dict[str, int | None] | None = field(default=None, repr=False)
    _earlier_max_times: dict[str, int | None] = field(default_factory=dict, repr=False)

    def input_max_times(self) -> dict[str, int | None]:
        """Each event-time input's largest event time among this run's changes (rows of every kind; None
        without one): from its files' footers where they tell it (`stored_time_range`), else all in one
        Spark job; worked out once a run."""
        if self._input_max_times is None:
            self._input_max_times = self.max_times({name: (self.changes[name], self.input_files.get(name))
                                                    for name in self.plan.watermark_inputs})
        return self._input_max_times

    def earlier_max_times(self, names: Sequence[str]) -> dict[str, int | None]:
        """The largest event time of each input in `names` over the changes the runs before this one read
        (None: none, or no run read the input): all its rows up to the version they read to. Worked out
        once a run per input, however many time-based joins ask."""
        new = [n for n in dict.fromkeys(names) if n not in self._earlier_max_times]
        reads = {name: formats.read_changes(self.spark, self.plan.inputs[name], None, self.input_starts[name])
                 for name in new if self.input_starts.get(name) is not None}
        found = self.max_times({name: (read.rows, read.files) for name, read in reads.items()})
        self._earlier_max_times.update({name: found.get(name) for name in new})
        return {name: self._earlier_max_times[name] for name in names}

    def max_times(self, rows: Mapping[str, tuple[DataFrame, Sequence[DataFile] | None]]) -> dict[str, int | None]:
        """The largest event time of each input's `rows` (read from `files`, if so stored): from the
        files' footers where they tell it, else all in one Spark job."""
        known, parts = {}, []
        for name, (changes, files) in rows.items():
            column = self.plan.inputs[name].event_time
            stored = self.stored_time_range(name, column, files)
            if stored is not None:
                known[name] = stored.hi
            else:
                parts.append(changes.agg(F.lit(name).alias("input"), F.max(micros(col(column))).alias("max_time")))
        return {**known, **{r["input"]: r["max_time"] for r in computed(parts)}}

    def watermark_sources(self, joined: Mapping[str, Node], followed: Collection[str] = ()
                          ) -> tuple[dict[str, int | None], dict[str, int]]:
        """What a time-based join's watermark follows this run, as its clock keeps them (each source's
        largest time this run, and its delay): every event-time input of the model, by its largest event
        time less its watermark_delay (FORMAT.md: one watermark per model, the same at every join),
        and each side in `joined` that is another join's rows, by the watermark that join forwards.
        An input whose key the clock does not hold yet (`followed`: the keys it holds; a clock kept
        before it followed every input, or a new input) also counts its runs before this one."""
        maxima = self.input_max_times()
        earlier = self.earlier_max_times([n for n in maxima if f"input:{n}" not in followed])
        run_max: dict[str, int | None] = {f"input:{n}": max((x for x in (t, earlier.get(n)) if x is not None),
                                                             default=None) for n, t in maxima.items()}
        delays = {f"input:{n}": self.plan.inputs[n].watermark_delay // US for n in maxima}
        for side, node in joined.items():
            run_max[side], delays[side] = self.watermarks[node.id], 0
        return run_max, delays

    def stored_time_range(self, name: str, column: str, files: Sequence[DataFile] | None, *,
                          append_only: bool = False) -> TimeRange | None:
        """The range of input `name`'s declared timestamp `column` over the rows of its `files`, from
        their footers (`storage.time_range`); None when they cannot tell it, or when `append_only`
        and the input's statistics do not say that it only inserted this run."""
        spec = self.plan.inputs[name]
        if files is None or (append_only and name not in self.insert_only) or \
                column.lower() not in {c.lower() for c in spec.column_names} or \
                spec.column_type(column).lower() != "timestamp":
            return None
        return time_range(files, column)

    def scan_time_range(self, scan: Scan, column: str, *, append_only: bool) -> TimeRange | None:
        """`stored_time_range` of the input column that a column of `scan` (its internal name, bare or
        quoted) holds as read; None when the scan computes that column."""
        for (name, internal), source in zip(scan.columns, scan.column_sources):
            if column in (internal, q(internal)) and source == q(name):
                return self.stored_time_range(scan.input, name, self.input_files.get(scan.input),
                                              append_only=append_only)
        return None

    def schema(self, node: Node) -> StructType:
        if isinstance(node, Scan):
            spec = self.plan.inputs[node.input]
            if node.derived:  # computed columns: their types are what Spark makes of them
                return self.project(node, empty_frame(self.spark, data_schema(spec))).schema
            return StructType([StructField(internal, declared_type(spec.as_queried().column_type(name)))
                               for name, internal in node.columns])
        if isinstance(node, Join):
            left = self.schema(node.left)
            return StructType(list(left.fields) + (list(self.schema(node.right).fields) if node.join_type.emits_pairs else []))
        return StructType([f for scan in node.inputs for f in self.schema(scan).fields])

    def output(self) -> DataFrame:
        """The run's change of the model's output columns: consolidated, unless every weight in it is
        positive (its parts then have nothing to cancel; a row in two parts is the row twice)."""
        rows = self.projected(self.delta(self.plan.root))
        return rows if self.root_adds_only else consolidate(rows, self.plan.output_names)

    def projected(self, rows: DataFrame) -> DataFrame:
        """Weighted rows of the last join as the model outputs them: its filters after the join
        applied, projected onto the output columns (not consolidated)."""
        for f in self.plan.filters:
            rows = rows.where(F.expr(f))
        return rows.select(*[F.expr(o.expr).alias(o.name) for o in self.plan.outputs], col(WEIGHT))

    def output_inserts_only(self) -> bool:
        """True when this run's output change can hold no retraction (`sql.plan.inserts_only`)."""
        return inserts_only(self.plan.root, self.insert_only)

    def delta(self, node: Node) -> DataFrame:
        if isinstance(node, Scan):
            return self.scan(node)
        if isinstance(node, Join):
            if node.time_bound is not None:
                return run_interval_join(self, node)
            if node.temporal is not None:
                lookup = node.temporal.processing_time
                return run_lookup_join(self, node) if lookup else run_temporal_join(self, node)
            if node.window is not None:
                return run_window_join(self, node)
            if node.asof is not None:
                return run_asof_join(self, node)
            return self.regular_join(node)
        return run_multi_join(self, node)

    def project(self, node: Scan, rows: DataFrame, *extra: SparkColumn) -> DataFrame:
        """An input's rows as a scan sees them: its processing time and windows added, a derived
        table's WHERE applied, its columns computed under their internal names (plus `extra`
        columns of the input rows)."""
        if node.proc_time:
            rows = rows.withColumn(node.proc_time, F.timestamp_millis(run_value(self.now_ms)))
        if node.windows and node.windows.tvf:  # one row per window (HOP and CUMULATE windows overlap)
            tvf = node.windows.tvf
            rows = rows.withColumn(WINDOW, F.explode(F.expr(tvf.windows_sql()))).withColumns(
                {name: F.expr(sql) for name, sql in tvf.columns_sql(q(WINDOW)).items()}).drop(WINDOW)
        for f in node.source_filters:
            rows = rows.where(F.expr(f))
        return rows.select(*[F.expr(src).alias(internal) for src, (_, internal) in zip(node.column_sources, node.columns)],
                           *extra)

    def scan(self, node: Scan, rows: DataFrame | None = None) -> DataFrame:
        """The scan's weighted rows: of `rows` (the input's weighted rows), by default its change this run."""
        rows = self.input_change(node.input) if rows is None else rows
        renamed = self.project(node, rows, col(WEIGHT))
        for f in node.filters:
            renamed = renamed.where(F.expr(f))
        return renamed

    def input_change(self, name: str) -> DataFrame:
        """An input's change this run as weighted rows of its declared columns (computed once per input)."""
        if name not in self.input_changes:
            spec = self.plan.inputs[name]
            raw = self.changes[name]
            if spec.changelog_format == "upsert":
                key = UpsertKey(spec, self.plan.config.state_buckets)
                state = key.state(self.tables.state(f"{name}_upsert"), self.versions.get(self.tables.state(f"{name}_upsert")))
                change, appends = normalize(self.spark, spec, raw, key, state, self.now_ms, self.persist)
                self.stage_state(state, appends)
            else:
                change = from_changelog(raw, spec.column_names, spec.op_column)
            self.input_changes[name] = change
        return self.input_changes[name]

    def common_key_types(self, schemas: Sequence[StructType], keys: Sequence[Sequence[str]]) -> tuple[str, ...]:
        """A common type per key position over the key expressions of several inputs (`keys[i]` over
        `schemas[i]`), so equal keys hash to the same bucket whichever input they come from."""
        return _common_key_types(self.spark, self.spark.conf.get("spark.sql.ansi.enabled"),
                                 tuple(s.json() for s in schemas), tuple(tuple(k) for k in keys))

    def join_sides(self, node: Join) -> dict[Side, JoinSide]:
        """Both sides of a binary join, their keys of one common type."""
        key_types = self.common_key_types([self.schema(node.left), self.schema(node.right)],
                                          [[k.left for k in node.keys], [k.right for k in node.keys]])
        return {s: self.side_of(node, s, key_types) for s in Side}

    def side_of(self, node: Join, s: Side, key_types: tuple[str, ...]) -> JoinSide:
        child = node.left if s is Side.LEFT else node.right
        exprs = tuple(k.left if s is Side.LEFT else k.right for k in node.keys)
        unique_key = self.plan.unique_key(child)
        label = self.plan.inputs[child.input].name if isinstance(child, Scan) else child.id
        return JoinSide(
            side=s, label=label, schema=self.schema(child), key_exprs=exprs, key_types=key_types,
            null_safe=tuple(k.null_safe for k in node.keys),
            tracks_degree=node.join_type.preserves(s),
            insert_only=isinstance(child, Scan) and child.input in self.insert_only,
            layout=StateLayout.choose(unique_key, exprs), unique_key=unique_key,
        )

    def state_table(self, name: str, side: JoinSide) -> StateTable:
        path = self.tables.state(name)
        return StateTable(path=path, schema=side.schema, key_columns=side.key_columns,
                          tracks_degree=side.tracks_degree, version=self.versions.get(path),
                          bucket_exprs=side.bucket_key_exprs, buckets=self.plan.config.state_buckets,
                          file_keys=plain_key_columns(side.schema, side.key_exprs, side.key_types))

    def regular_join(self, node: Join) -> DataFrame:
        deltas = {Side.LEFT: self.delta(node.left), Side.RIGHT: self.delta(node.right)}
        sides = self.join_sides(node)
        states = {s: self.state_table(f"{node.id}_{s.value}", sides[s]) for s in Side}
        op = RegularJoin(join_type=node.join_type, left=sides[Side.LEFT], right=sides[Side.RIGHT],
                         residual=node.residual, buckets=self.plan.config.state_buckets,
                         policy=self.plan.config.on_missing_retraction, model=self.plan.model,
                         now_ms=self.now_ms, ttl_ms=_millis(self.plan.config.state_ttl), null_aware=node.null_aware)
        result = op.run(self.spark, deltas, states, self.persist)
        self.count_metrics(node, {"operator": f"{node.join_type.value} join"}, result.counters)
        for check in result.checks:
            self.writer.check(check)
        for s in Side:
            self.stage_state(states[s], result.appends[s], metadata=result.metadata.get(s))
        return self.emitted(node, result.output, adds_only=result.adds_only)

    def emitted(self, node: Node, rows: DataFrame, *, adds_only: bool = False) -> DataFrame:
        """A join's weighted output `rows` as its parent reads them: consolidated and kept; the root's
        as they are, since `output` consolidates the projected rows once (unless the root `adds_only`:
        every weight of `rows` is positive) and the run keeps them."""
        if node is self.plan.root:
            self.root_adds_only = adds_only
            return rows
        return self.persist(consolidate(rows, [c for c in rows.columns if c != WEIGHT]))

    def count_metrics(self, node: Node, fixed: dict[str, Any], counters: Mapping[str, tuple[DataFrame, SparkColumn]]) -> None:
        """A node's run-log figures: `fixed` ones, and `counters` summed in the write pass."""
        sums = {name: self.writer.count(df, value) for name, (df, value) in counters.items()}
        self.metrics[node.id] = dict(fixed)
        self.counted_after_writes.append(lambda: self.metrics[node.id].update({n: f.result() for n, f in sums.items()}))

    def stage_state(self, state: StateTable, appends: DataFrame, *, metadata: dict[str, str] | None = None,
                    expires: bool = True) -> None:
        """Write a state table's appended rows; its commit waits for the end of the run. Its idle rows
        leave it after `state_ttl` when it `expires`."""
        ttl = _millis(self.plan.config.state_ttl) if expires else None
        actions = state.stage(self.spark, appends, self.writer, expire_before=None if ttl is None else self.now_ms - ttl)
        self.staged.append(StagedWrite(state.path, actions, state.commit_schema, ("_bucket",), dict(metadata or {}),
                                       optional=state.version is not None))


@lru_cache(maxsize=256)
def _common_key_types(spark: SparkSession, ansi: str | None, schemas: tuple[str, ...],
                      keys: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """`Executor.common_key_types`, asked of Spark once per session, type coercion mode (ANSI or not),
    schemas and key expressions: a model's runs ask the same each run (about 100 round trips to the
    JVM a run for a binary join)."""
    frames = [empty_frame(spark, StructType.fromJson(json.loads(schema))) for schema in schemas]
    types = []
    for pos in range(len(keys[0])):
        each = [f.select(F.expr(k[pos]).alias("k")).schema[0].dataType.simpleString() for f, k in zip(frames, keys)]
        nulls = ", ".join(f"CAST(NULL AS {t})" for t in each)
        types.append(spark.sql(f"SELECT coalesce({nulls}) AS k").schema[0].dataType.simpleString())
    return tuple(types)
