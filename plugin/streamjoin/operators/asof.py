"""The ASOF join over changelogs, in bulk: each left row with the one right row of its key nearest in
time (`sql.asof`), kept up to date as either side changes.

Per run, the keys the run's changes touch (on either side) are recomputed: the output change is
ASOF(new rows of those keys) - ASOF(old rows of those keys), where old is what state holds and new
is old plus the run's changes. Only the rows a change can reach take part: per key, the left rows
at or after its earliest change time (for <= and <: at or before its latest), and the right rows from
the last one before that time on, so a run over a key with a long history recomputes its recent part.
So a new, updated or deleted right row retracts and re-emits exactly the left rows of its key whose
match changes (the rest cancel); with an output unique key the result table writes them as -U/+U.
A left row takes one right row whatever its multiplicity, so a left row of weight w gives an output
row of weight w.

State: each side's rows with their weights in a keyed state table (`storage.state`, as a regular
join's), so a run reads the rows of the keys it touches, not the whole table. Every live row stays:
`state_ttl` does not apply.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, NumericType, TimestampNTZType, TimestampType

from ..errors import ConfigError
from ..sql.plan import AsofSpec, Join, as_written
from ..types import JoinType, Side
from ..zset import WEIGHT, col, consolidate
from .nearest import MATCH, last_before
from .regular import REACH, JoinSide, stamps, stored_rows, touched_keys

if TYPE_CHECKING:
    from ..runtime.executor import Executor

PRIOR = "_prior"  # a touched key's last live right row's time before its reach


class AsofJoin:
    """One run of an ASOF join node."""

    def __init__(self, executor: "Executor", node: Join) -> None:
        self.x = executor
        self.node = node
        self.spec: AsofSpec = node.asof  # type: ignore[assignment]
        self.sides: dict[Side, JoinSide] = {s: replace(side, tracks_degree=False)
                                            for s, side in executor.join_sides(node).items()}
        self.states = {s: executor.state_table(f"{node.id}_{s.value}", self.sides[s]) for s in Side}
        for state in self.states.values():
            state.check_layout(f"the ASOF join {node.id}", executor.plan.model)

    def keyed(self, s: Side, rows: DataFrame) -> DataFrame:
        return self.sides[s].with_keys(rows)

    def run(self) -> DataFrame:
        x = self.x
        changes = {Side.LEFT: x.delta(self.node.left), Side.RIGHT: x.delta(self.node.right)}
        self.check_times(changes)
        keyed = {s: self.keyed(s, changes[s]) for s in Side}
        touched = x.persist(touched_keys(self.sides, keyed, x.plan.config.state_buckets,
                                         reach=(self.times, self.spec.latest)))
        stored = {s: stored_rows(x.spark, self.sides[s], self.states[s], touched, carry=[REACH]) for s in Side}
        old = {Side.LEFT: self.reached_left(stored[Side.LEFT]), Side.RIGHT: self.reached_right(stored[Side.RIGHT])}
        new = {}
        for s in Side:
            side = self.sides[s]
            old[s] = x.persist(old[s])
            new[s] = x.persist(consolidate(old[s].unionByName(changes[s].select(*side.columns, WEIGHT)), side.columns))
            appends = keyed[s].select(*side.columns, WEIGHT, *stamps(side, x.now_ms, x.plan.config.state_buckets))
            x.stage_state(self.states[s], appends, expires=False)
        before = self.asof(old[Side.LEFT], old[Side.RIGHT])
        after = self.asof(new[Side.LEFT], new[Side.RIGHT])
        output = x.emitted(self.node, after.unionByName(before.withColumn(WEIGHT, -col(WEIGHT))))
        x.count_metrics(self.node, {"operator": "asof join"}, {
            "touched_keys": (touched, F.lit(1)), "reached_left_rows": (old[Side.LEFT], F.lit(1)),
            "reached_right_rows": (old[Side.RIGHT], F.lit(1))})
        return output

    @property
    def times(self) -> dict[Side, Column]:
        """Each side's time, as the match condition compares them."""
        return {Side.LEFT: F.expr(self.spec.left_time), Side.RIGHT: F.expr(self.spec.right_time)}

    def reaches(self, time: Column, bound: Column) -> Column:
        """True where `time` is at or after `bound` (at or before it when the nearest right row is the
        first one after a left row's time): on the side of the bound the run's changes can reach."""
        return time >= bound if self.spec.latest else time <= bound

    def reached_left(self, stored: DataFrame) -> DataFrame:
        """The stored left rows (consolidated) whose match the run's changes can change: those of a touched
        key at or after its `REACH` (at or before, for <= and <), and those with a NULL time. A left row
        before it takes a right row from before it, where nothing changed, so its output stays."""
        side, time = self.sides[Side.LEFT], self.times[Side.LEFT]
        reached = stored.where(time.isNull() | self.reaches(time, col(REACH)))
        return consolidate(reached.select(*side.columns, WEIGHT), side.columns)

    def reached_right(self, stored: DataFrame) -> DataFrame:
        """The stored right rows (consolidated) that a left row `reached_left` keeps (or a left change) can
        match: those of a touched key at or after the time of its last live row before `REACH` (first
        after it, for <= and <), all of its rows at that time included, and those with a NULL time
        (they match nothing, but a change may retract them)."""
        side, time = self.sides[Side.RIGHT], self.times[Side.RIGHT]
        kept = [*side.columns, *side.key_columns, REACH]
        live = consolidate(stored.select(*kept, WEIGHT), kept)
        before = F.when(~self.reaches(time, col(REACH)), time)
        prior = (F.max if self.spec.latest else F.min)(before).over(Window.partitionBy(*side.key_columns))
        bounded = live.withColumn(PRIOR, prior).where(
            time.isNull() | self.reaches(time, F.coalesce(col(PRIOR), col(REACH))))
        return bounded.select(*side.columns, WEIGHT)

    def asof(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """Each left row with its nearest right row (one per unit of weight of the left row): the one
        `nearest.last_before` finds, in time order (latest-first for <= and <), a right row at a left
        row's time included where the condition admits equal times. Of right rows at one time the one
        with the smallest columns is nearest, as in the batch view."""
        l_side, r_side = self.sides[Side.LEFT], self.sides[Side.RIGHT]
        pairs = last_before(
            self.keyed(Side.LEFT, left).select(*l_side.columns, *l_side.key_columns, WEIGHT), l_side.key_columns,
            F.expr(self.spec.left_time), self.keyed(Side.RIGHT, right).where(~r_side.null_key()), r_side.key_columns,
            F.expr(self.spec.right_time), r_side.columns, latest=self.spec.latest,
            equal_time_matches=self.spec.op.endswith("="), ties=r_side.columns)
        if self.node.join_type is not JoinType.LEFT:
            pairs = pairs.where(col(MATCH).isNotNull())
        return pairs.select(*[col(c) for c in l_side.columns], *[col(MATCH)[c].alias(c) for c in r_side.columns],
                            col(WEIGHT))

    def check_times(self, changes: dict[Side, DataFrame]) -> None:
        """Refuse a match condition whose two times Spark would order differently in one column than it
        compares them (a string with a timestamp, say): both must be numbers, or both dates or timestamps."""
        times_sql = (self.spec.left_time, self.spec.right_time)
        types = [changes[s].select(F.expr(t)).schema[0].dataType for s, t in zip(Side, times_sql)]
        datetimes = (DateType, TimestampType, TimestampNTZType)
        if types[0] == types[1] or all(isinstance(t, NumericType) for t in types) \
                or all(isinstance(t, datetimes) for t in types):
            return
        left, right = (f"{as_written(e)} ({t.simpleString()})" for e, t in zip(times_sql, types))
        raise ConfigError(f"the ASOF join {self.node.id}'s MATCH_CONDITION compares {left} with {right}; "
                          "cast one side so that both are timestamps, dates or numbers", model=self.x.plan.model)


def run_asof_join(executor: "Executor", node: Join) -> DataFrame:
    """The output change of an ASOF join node for this run."""
    return AsofJoin(executor, node).run()
