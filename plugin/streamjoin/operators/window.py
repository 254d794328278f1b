"""The window join, with Flink's WindowJoinOperator semantics, in bulk.

Both inputs are append-only and windowed the same way (`sql.windows`); a row waits in state
until the watermark fires its window, then joins the rows of the other side in the same
window whose keys match (and the residual holds). The left side may be another window join
whose rows carry the windows (a cascade, as Flink's): its rows arrive when their window fires
there, and its watermark stands in for that side's largest event time, as Flink forwards it
with them. Per run:

1. The watermark advances: W = max(W_old, min over every event-time input of the model (largest
   event time seen - its watermark_delay), FORMAT.md's one watermark per model, and over a
   cascade's side the watermark the join below forwards); unset until each has one (`event_time.Clock`).
2. A row of this run whose window fired already (window_end - 1 ms <= W_old) is late and
   dropped, as Flink drops it.
3. The windows that fire — window_end - 1 ms <= W, not fired before — join their rows of
   both sides (stored ones and this run's): INNER, LEFT, RIGHT, FULL (outer rows without a match
   null-padded), SEMI or ANTI. Output is append-only: every window fires once.
4. Rows of windows still open stay in state; rows of fired windows leave it.

State: one Delta table per side (`<join>_left`, `<join>_right`) of the side's rows (`_run`,
`_weight`), a `storage.appended` table. A run reads it all (the rows of open windows, plus rows
of windows that fired since the table was last rewritten, which it skips), appends this run's
rows of open windows, and now and then rewrites it with the rows of open windows only. The
clock travels in the commit metadata of both tables.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from ..errors import InputError
from ..row_errors import retraction_examples
from ..run_values import run_value
from ..sql.plan import Join, Node, Scan
from ..storage.appended import AppendedTable
from ..types import JoinType, RowKind, Side
from ..zset import WEIGHT, col, consolidate
from .conditions import on_condition
from .event_time import Clock, as_text, computed, micros

if TYPE_CHECKING:
    from ..runtime.executor import Executor

META_KEY = "streamjoin.window"
RUN, END = "_run", "_window_end_us"
MILLI = 1000  # a window fires once W >= window_end - 1 ms, as Flink's window timers do
_HOW = {JoinType.INNER: "inner", JoinType.LEFT: "left_outer", JoinType.RIGHT: "right_outer",
        JoinType.FULL: "full_outer", JoinType.SEMI: "left_semi", JoinType.ANTI: "left_anti"}


class WindowJoin:
    """One run of a window join node."""

    def __init__(self, executor: "Executor", node: Join) -> None:
        self.x = executor
        self.node = node
        self.sides: dict[Side, Node] = {Side.LEFT: node.left, Side.RIGHT: node.right}
        #: each side read from an input (the left of a cascade is the rows of another window join)
        self.inputs = {s: executor.plan.inputs[n.input] for s, n in self.sides.items() if isinstance(n, Scan)}
        self.ends = {Side.LEFT: node.window.left_end, Side.RIGHT: node.window.right_end}  # type: ignore[union-attr]
        self.columns = {s: list(n.output_columns) for s, n in self.sides.items()}
        paths = {s: executor.tables.state(f"{node.id}_{s.value}") for s in Side}
        self.tables = {s: AppendedTable(paths[s], executor.versions.get(paths[s]), StructType(
            list(executor.schema(self.sides[s]).fields) + [StructField(RUN, LongType()), StructField(WEIGHT, LongType())]))
            for s in Side}

    def retractions(self) -> dict[Side, int]:
        """Per input side, its changes this run that are not insertions (a window join reads append-only
        inputs): none where its statistics tell that it only inserted, else counted in one Spark job. A
        window join's rows never retract."""
        parts = [self.x.changes[spec.name].agg(F.lit(s.value).alias("s"),
                                               F.count_if(col(spec.op_column) != RowKind.INSERT.value).alias("n"))
                 for s, spec in self.inputs.items() if spec.name not in self.x.insert_only]
        return {Side(r["s"]): r["n"] for r in computed(parts)}

    def reject_retractions(self, s: Side, n: int) -> None:
        spec = self.inputs[s]
        raw = self.x.changes[spec.name]
        examples = retraction_examples(raw.withColumnRenamed(spec.op_column, "_kind"), spec.column_names)
        raise InputError(
            f"a window join reads append-only inputs, as in Flink: {n} change(s) of kind -U/+U/-D reached the window "
            f"join {self.node.id}, e.g. {examples}. Feed it an insert-only changelog (only +I rows, or changelog_format "
            "'append')", model=self.x.plan.model, input_name=spec.name)

    def with_end(self, s: Side, rows: DataFrame) -> DataFrame:
        return rows.withColumn(END, micros(F.expr(self.ends[s])))

    def pending(self, s: Side, arrived: DataFrame, w_old: int | None) -> DataFrame:
        """The side's rows of windows not fired before this run: the stored ones and those of this run
        (`arrived`), consolidated and tagged with the run. The run's other rows are late; they are
        counted as they arrived (consolidating them would not change the sum of their weights)."""
        stored = self.with_end(s, self.tables[s].rows(self.x.spark).select(*self.columns[s], RUN, WEIGHT))
        arrived = self.with_end(s, arrived.select(*self.columns[s], WEIGHT))
        if w_old is not None:
            open_before = col(END) - MILLI > run_value(w_old)
            self.late[s] = arrived.where(~open_before)
            arrived, stored = arrived.where(open_before), stored.where(open_before)
        fresh = consolidate(arrived.drop(END), self.columns[s]).withColumn(RUN, run_value(self.x.run_id))
        return stored.unionByName(self.with_end(s, fresh))

    def fire(self, due: dict[Side, DataFrame]) -> DataFrame:
        """The joined rows (and null-padded ones) of the windows that fire, weighted (not consolidated)."""
        left = due[Side.LEFT].withColumnRenamed(WEIGHT, "_wl")
        right = due[Side.RIGHT].withColumnRenamed(WEIGHT, "_wr")
        joined = left.join(right, on_condition(self.node), _HOW[self.node.join_type])
        if self.node.join_type.emits_pairs:
            weight = F.coalesce(col("_wl"), F.lit(1)) * F.coalesce(col("_wr"), F.lit(1))
            out_cols = [*self.columns[Side.LEFT], *self.columns[Side.RIGHT]]
        else:
            weight, out_cols = col("_wl"), self.columns[Side.LEFT]
        return joined.select(*[col(c) for c in out_cols], weight.cast("long").alias(WEIGHT))

    def run(self) -> DataFrame:
        x = self.x
        self.late: dict[Side, DataFrame] = {}  # this run's rows of windows fired before it (dropped)
        arrived = {s: x.delta(self.sides[s]) for s in Side}  # a window join's side runs first, setting its watermark
        for s, n in self.retractions().items():
            if n:
                self.reject_retractions(s, n)
        first = self.tables[Side.LEFT]
        old = Clock.load(META_KEY, first.path, first.version)
        clock = old.advance(*x.watermark_sources({s.value: self.sides[s] for s in Side if s not in self.inputs},
                                                 old.max_time))
        x.watermarks[self.node.id] = clock.watermark
        fires = F.lit(False) if clock.watermark is None else col(END) - MILLI <= run_value(clock.watermark)
        due = {}
        for s in Side:
            pending = x.persist(self.pending(s, arrived[s], old.watermark))
            due[s] = pending.where(fires).drop(END, RUN)
            kept = pending.where(~fires).select(*self.columns[s], RUN, WEIGHT)
            # this run's rows are read from the kept result, not consolidated from its input once more
            appends = kept.where(col(RUN) == run_value(x.run_id))
            x.staged.append(self.tables[s].stage(x.writer, appends, kept, clock.metadata()))
        self.record(clock, due)
        return x.emitted(self.node, self.fire(due), adds_only=True)  # its inputs only insert: so does it

    def record(self, clock: Clock, fired: dict[Side, DataFrame]) -> None:
        """The run's watermark, the rows whose windows fired and the late rows dropped (summed in
        the write pass)."""
        writer = self.x.writer
        counts = {f"{s.value}_rows_fired": writer.count(fired[s], col(WEIGHT)) for s in Side}
        counts |= {f"{s.value}_late_rows_dropped": writer.count(df, col(WEIGHT)) for s, df in self.late.items()}

        def fill() -> None:
            self.x.metrics[self.node.id] = {"operator": "window join", "watermark": as_text(clock.watermark),
                                            **{k: f.result() for k, f in counts.items()}}

        self.x.counted_after_writes.append(fill)


def run_window_join(executor: "Executor", node: Join) -> DataFrame:
    """The output change of a window join node for this run (append-only)."""
    return WindowJoin(executor, node).run()
