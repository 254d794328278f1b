"""Join-strategy selection: a chain of binary joins, or one multi-way join without intermediate state.

A join tree qualifies for the multi-way operator when it is a left-deep chain of INNER and
LEFT joins of plain inputs (a RIGHT join of the first two inputs is read as a LEFT join with
the sides swapped) and every join shares a *common key*: each key position is an equality
class holding one expression of every input, and input i joins the rows built so far by an
equality between its expression and an expression of an input already in that class. Then
every row of the result comes from rows with one value of the key, and the result can be
recomputed per key from the inputs' own state.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

import sqlglot
from sqlglot import exp

from ..types import JoinType
from .plan import EquiKey, Join, JoinPlan, MultiJoin, Node, Scan, key_text

_INTERNAL = re.compile(r"`([^`]+?)__([^`]+)`")


def user_text(expr: str) -> str:
    """An expression over internal names as the user wrote it: `a__id` becomes a.id.

    >>> user_text("`a__id` = `b__id`")
    'a.id = b.id'
    """
    return _INTERNAL.sub(r"\1.\2", expr)


@dataclass(frozen=True)
class _Step:
    """One input of a flattened chain: how it joins the inputs before it."""

    scan: Scan
    join: Join | None  # None for the first input
    join_type: JoinType | None
    pairs: tuple[tuple[str, str], ...]  # (expression over earlier inputs, expression over this input)

    def describe(self) -> str:
        assert self.join is not None
        on = " AND ".join(p for p in (key_text(self.join.keys), self.join.residual) if p) or "TRUE"
        return f"{self.join.id} ({self.join.join_type.value.upper()} JOIN {self.scan.alias} ON {user_text(on)})"

    def condition(self) -> str:
        assert self.join is not None
        parts = [f"{k.left} {'<=>' if k.null_safe else '='} {k.right}" for k in self.join.keys]
        if self.join.residual:
            parts.append(f"({self.join.residual})")
        return " AND ".join(parts)


class _NotQualified(Exception):
    """Why a plan cannot run as one multi-way join."""


def _owner(expr: str, scans: list[Scan]) -> int | None:
    """The index of the one input whose columns `expr` reads, or None."""
    names = {c.name for c in sqlglot.parse_one(expr, read="spark").find_all(exp.Column)}
    owners = {i for i, s in enumerate(scans) for c in s.output_columns if c in names}
    return owners.pop() if len(owners) == 1 else None


def _flatten(node: Node) -> list[_Step]:
    """The chain of inputs of a left-deep INNER/LEFT join tree, or _NotQualified naming the join."""
    if isinstance(node, Scan):
        return [_Step(node, None, None, ())]
    if not isinstance(node, Join):
        raise _NotQualified("the plan is not a tree of binary joins")
    label = f"{node.id} ({node.join_type.value.upper()} JOIN of {', '.join(sorted(node.right.aliases))})"
    if node.time_bound is not None:
        raise _NotQualified(f"join {label} is an interval join")
    if node.join_type is JoinType.RIGHT and isinstance(node.left, Scan):
        swapped = [EquiKey(k.right, k.left, k.null_safe) for k in node.keys]
        node = replace(node, join_type=JoinType.LEFT, left=node.right, right=node.left, keys=tuple(swapped))
    if node.join_type not in (JoinType.INNER, JoinType.LEFT):
        raise _NotQualified(f"join {label} is a {node.join_type.value.upper()} join; only INNER and LEFT joins "
                            "(and a RIGHT join of the first two inputs) can be multi-way")
    if not isinstance(node.right, Scan):
        raise _NotQualified(f"join {label} joins a nested join, not an input")
    chain = _flatten(node.left)
    scans = [s.scan for s in chain] + [node.right]
    pairs = []
    for k in node.keys:
        if k.null_safe:
            continue
        a, b = _owner(k.left, scans), _owner(k.right, scans)
        if a is not None and b == len(chain):
            pairs.append((k.left, k.right))
        elif b is not None and a == len(chain):
            pairs.append((k.right, k.left))
    return chain + [_Step(node.right, node, node.join_type, tuple(pairs))]


def _common_key(chain: list[_Step]) -> list[list[str]]:
    """Per key position, every input's expression; _NotQualified names the join that breaks the key."""
    slots: list[tuple[set[str], list[str]]] = []  # (expressions known equal to the key, one per input)
    first = chain[1]
    for prev, new in first.pairs:
        hit = [s for s in slots if prev in s[0] or new in s[0]]
        if hit:
            hit[0][0].update((prev, new))
        else:
            slots.append(({prev, new}, [prev, new]))
    if not slots:
        raise _NotQualified(f"join {first.describe()} has no equality between the two inputs")
    for i, step in enumerate(chain[2:], start=2):
        kept = []
        for members, exprs in slots:
            links = [new for prev, new in step.pairs if prev in members]
            if links:
                kept.append((members | set(links), exprs + [links[0]]))
        if not kept:
            keys = "; ".join(" = ".join(user_text(e) for e in exprs) for _, exprs in slots)
            raise _NotQualified(f"join {step.describe()} does not equate a column of {step.scan.alias} with the "
                                f"common key so far ({keys})")
        slots = kept
    return [exprs for _, exprs in slots]


def multi_join(root: Node) -> MultiJoin:
    """The multi-way join equivalent to a join tree, or _NotQualified with the reason."""
    chain = _flatten(root)
    if len(chain) < 2:
        raise _NotQualified("there is no join")
    slots = _common_key(chain)
    keys = tuple(tuple(slot[i] for slot in slots) for i in range(len(chain)))
    return MultiJoin(
        id=f"m{root.id}" if isinstance(root, Join) else "m",
        inputs=tuple(s.scan for s in chain),
        join_types=tuple(s.join_type for s in chain),
        keys=keys,
        conditions=(None,) + tuple(s.condition() for s in chain[1:]),
    )


def choose_strategy(plan: JoinPlan, fail: Callable) -> JoinPlan:
    """Apply the model's `join_strategy` (binary, multi or auto) and note the choice in the plan."""
    strategy = plan.config.join_strategy
    if strategy == "binary":
        return replace(plan, notes=plan.notes + ("join_strategy binary: a chain of binary joins",))
    try:
        node = multi_join(plan.root)
    except _NotQualified as why:
        if strategy == "multi":
            raise fail(f"join_strategy 'multi' needs INNER/LEFT joins of inputs that all share one join key, "
                       f"but {why}; use join_strategy 'binary' (or 'auto')")
        return replace(plan, notes=plan.notes + (f"join_strategy auto: binary joins, because {why}",))
    key = ", ".join(" = ".join(user_text(slot) for slot in position) for position in zip(*node.keys))
    n = len(node.inputs)
    if strategy == "auto" and n < 3:
        return replace(plan, notes=plan.notes + (
            f"join_strategy auto: binary joins, because there are only {n} inputs (multi-way needs 3 or more; "
            "set join_strategy 'multi' to force it)",))
    reason = "chosen by configuration" if strategy == "multi" else f"all {n} inputs share the common key"
    return replace(plan, root=node, notes=plan.notes + (
        f"join_strategy {strategy}: one multi-way join on {key} without intermediate state ({reason})",))


def keep_binary(plan: JoinPlan, fail: Callable, kind: str) -> JoinPlan:
    """A model with a temporal or window join runs as binary joins: no multi-way operator selects
    versions or fires windows."""
    if plan.config.join_strategy == "multi":
        raise fail(f"join_strategy 'multi' cannot include {kind}; use join_strategy 'auto' or 'binary'")
    return replace(plan, notes=plan.notes + (f"binary joins, because the model has {kind}",))
