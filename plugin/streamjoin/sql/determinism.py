"""Functions whose value is not a function of the row, where the model's output can retract rows.

A run computes a model's expressions on the change rows it reads, retractions included, and a
retraction must name the very row it retracts. `rand()` (or `uuid()`, `current_timestamp()`, ...)
gives a retraction another value than the insertion it undoes had, so the result would be asked to
retract a row it does not hold and every later run would fail (Flink calls this a non-deterministic
update). A model whose output can hold a retraction (`sql.plan.inserts_only` over the inputs declared
`append`) refuses such a function, naming it and the fix; one whose output only ever inserts (an
interval, window, temporal or lookup join of append-only inputs, say a `loaded_at` column) keeps it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlglot import exp

from ..errors import CompileError
from .plan import JoinPlan, inserts_only

#: Spark SQL functions whose value depends on the call, not the row (lower-case names).
RANDOM = frozenset({"rand", "randn", "random", "uuid", "shuffle", "randstr", "uniform", "monotonically_increasing_id",
                    "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length",
                    "reflect", "java_method", "try_reflect"})
#: Functions whose value is the time of the run that computes it.
CLOCK = frozenset({"current_timestamp", "now", "current_date", "curdate", "localtimestamp", "current_time", "unix_timestamp"})


@dataclass(frozen=True)
class UnstableCall:
    """A call of one of those functions in the model's SQL, where it is written."""

    name: str
    node: exp.Expression

    @property
    def clock(self) -> bool:
        return self.name in CLOCK


def function_name(node: exp.Func) -> str:
    """A function's name as Spark SQL spells it, lower-case (sqlglot reads `unix_timestamp()` as
    `unix_timestamp(current_timestamp())`: that clock is named as written)."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    if isinstance(node, exp.CurrentTimestamp) and isinstance(node.parent, exp.StrToUnix) and node.parent.this is node \
            and not node.meta:
        return "unix_timestamp"
    return node.sql_name().lower()


def first_unstable_call(tree: exp.Expression) -> UnstableCall | None:
    """The first call in `tree` (as parsed, so that it can be located) whose value is not the row's."""
    for node in tree.find_all(exp.Func):
        name = function_name(node)
        if name in RANDOM or name in CLOCK:
            return UnstableCall(name, node if node.meta or node.parent is None else node.parent)  # a call sqlglot made up has no place
    return None


def check_stable(plan: JoinPlan, call: UnstableCall | None, fail: Callable[[str, exp.Expression], CompileError]) -> None:
    """Refuse `call` when the plan's output can hold a retraction."""
    appending = {name for name, spec in plan.inputs.items() if spec.changelog_format == "append"}
    if call is None or inserts_only(plan.root, appending):
        return
    why = (f"{call.name}() is the time of the run that computes it" if call.clock else f"{call.name}() is not deterministic")
    raise fail(f"{why}, and this model's output can retract rows (an input not declared changelog_format 'append', or "
               "an outer or ASOF join): a retraction would compute another value than the row it retracts, and the "
               "model's result could not retract that row. Compute the value from the row's columns (a time column "
               "of the inputs, or xxhash64 of a key), or after the model (in a view or a downstream model)", call.node)
