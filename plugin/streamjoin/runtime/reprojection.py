"""The run after a change of a model's projection only (its output columns' expressions, the
filters after its last join): the result becomes the new projection of everything the last join's
state holds, with no rebuild and no state written for it.

With J the last join's output, its change this run ΔJ and R the result before the run:

    Δ result = project_new(J_before + ΔJ) - R

When the output's columns changed too (renamed, added, dropped, reordered), the result is replaced
by project_new(J_before + ΔJ) whole, and the changelog receives Δ in its columns, which gain the new
ones (see `plan_change.changelog_columns`).

J_before comes from the last join's state: the join's own operator runs once more with every
stored row as a new row and empty state (an incremental join from empty state computes its
batch result), plus the NULL-keyed rows of a side it pads, which no state keeps, from that
input's snapshot as the last run left it. `plan_change.reprojection_blocker` says when this holds.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Mapping

from pyspark.sql import DataFrame

from ..operators.multiway import input_side
from ..operators.regular import JoinSide
from ..sql.plan import Join, Node, Scan
from ..storage import formats
from ..storage.results import output_schema, result_columns, weighted_rows, widened
from ..storage.state import StateTable
from ..types import Side
from ..zset import WEIGHT, col, consolidate
from .executor import Executor
from .plan_change import changelog_columns


@dataclass
class StateReplay(Executor):
    """Evaluates the plan's last join over its state alone: each child's rows are what the join's
    state holds of that side, and the join runs from empty state, writing nothing."""

    input_starts: Mapping[str, int | None] = field(default_factory=dict)  # per input: the version the last run read to

    @classmethod
    def of(cls, executor: Executor, input_starts: Mapping[str, int | None]) -> "StateReplay":
        given = {f.name: getattr(executor, f.name) for f in fields(Executor)
                 if f.default is MISSING and f.default_factory is MISSING}  # the run's own figures start empty
        return cls(**{**given, "insert_only": frozenset()}, input_starts=input_starts)  # state rows are no run's changes

    def delta(self, node: Node) -> DataFrame:
        return super().delta(node) if node is self.plan.root else self.stored(node)

    def stored(self, child: Node) -> DataFrame:
        """The rows of the last join's side `child`: those its state holds, plus, on a side the join
        pads, the NULL-keyed rows of its input's snapshot (state keeps none of them)."""
        root = self.plan.root
        if isinstance(root, Join):
            s = Side.LEFT if child is root.left else Side.RIGHT
            side, name, padded = self.join_sides(root)[s], f"{root.id}_{s.value}", root.join_type.preserves(s)
        else:
            i = root.inputs.index(child)
            types = self.common_key_types([self.schema(scan) for scan in root.inputs], root.keys)
            side, name, padded = input_side(self, root, i, types), f"{root.id}_{i}", i == 0
        state = Executor.state_table(self, name, side)
        rows = _side_rows(side, state.read(self.spark, None, side.with_keys))
        if padded and isinstance(child, Scan):
            spec = self.plan.inputs[child.input]
            start = self.input_starts.get(child.input)
            if start is not None:
                snapshot = self.scan(child, formats.snapshot(self.spark, spec, start))
                rows = rows.unionByName(_side_rows(side, side.with_keys(snapshot).where(side.null_key())))
        return rows

    def state_table(self, name: str, side: JoinSide) -> StateTable:
        return replace(super().state_table(name, side), version=None)

    def stage_state(self, state: StateTable, appends: DataFrame, *, metadata: dict[str, str] | None = None) -> None:
        """The replay writes no state."""

    def count_metrics(self, node: Node, fixed: dict, counters: Mapping) -> None:
        """The replay's figures are not the run's."""


def _side_rows(side: JoinSide, rows: DataFrame) -> DataFrame:
    return rows.select(*[col(c) for c in side.columns], col(WEIGHT))


def output_change(executor: Executor, change: DataFrame,
                  input_starts: Mapping[str, int | None]) -> tuple[DataFrame, DataFrame | None]:
    """The run's output change when it re-projects: `change` (the new projection of this run's
    change of the last join) plus the new projection of the join before the run, minus the result
    before the run; and, when the output's columns changed, the new result whole (else None). The
    change is then in the changelog's columns (`plan_change.changelog_columns`): every old row
    retracted with its columns, every new row added with its own. Raises `PlanChangedError` for a
    column whose type changed."""
    plan, tables = executor.plan, executor.tables
    version = executor.versions.get(tables.result)
    schema = output_schema(change)
    held = result_columns(tables.result, version) if version is not None else schema
    columns = changelog_columns(plan, tables, schema, held, change="only its projection changed")
    replay = StateReplay.of(executor, input_starts)
    names = plan.output_names
    new = consolidate(change.unionByName(replay.projected(replay.delta(plan.root))), names)
    retracted = weighted_rows(executor.spark, tables.result, version, held, -1)
    if columns is None:
        return consolidate(new.unionByName(retracted), names), None
    return consolidate(widened(new, columns).unionByName(widened(retracted, columns)), columns.names), new
