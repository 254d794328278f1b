"""Recognise an interval (time-windowed) join in a join's condition.

`a.ts BETWEEN b.ts - INTERVAL '4' HOUR AND b.ts`, and the `<`, `<=`, `>`, `>=` forms with
either side's time on the left, between the event-time columns of two inputs, become a
`TimeBound` on the join: lower <= left_time - right_time <= upper.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Callable, Mapping

import sqlglot
from sqlglot import exp

from .plan import Join, Node, Scan, TimeBound
from .spec import InputSpec
from .types import parse_duration

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def _offset(e: exp.Expression) -> tuple[str | None, timedelta]:
    """Split `col ± INTERVAL` into (column name, offset); (None, 0) if it is not of that form."""
    sign = 1
    total = timedelta(0)
    while isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval):
        iv = e.expression
        amount = parse_duration(f"{iv.this.name} {iv.unit.name if iv.unit else 'second'}".lower(), what="interval")
        total += amount if isinstance(e, exp.Add) else -amount
        e = e.this
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column):
        return e.name, sign * total
    return None, timedelta(0)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def extract_time_bound(root: Node, prefixes: Mapping[str, InputSpec], fail: Callable) -> Node:
    """Turn joins whose residual bounds two event times from both sides into interval joins."""
    if isinstance(root, Join):
        root = replace(root, left=extract_time_bound(root.left, prefixes, fail),
                       right=extract_time_bound(root.right, prefixes, fail))
    if not (isinstance(root, Join) and root.residual and isinstance(root.left, Scan) and isinstance(root.right, Scan)):
        return root
    lt = _event_time(root.left, prefixes)
    rt = _event_time(root.right, prefixes)
    if lt is None or rt is None:
        return root
    lower: timedelta | None = None
    upper: timedelta | None = None
    lower_strict = upper_strict = False
    rest: list[exp.Expression] = []
    for c in _conjuncts(sqlglot.parse_one(root.residual, read="spark")):
        bounds = _bounds(c, lt, rt)
        if bounds is None:
            rest.append(c)
            continue
        for kind, value, strict in bounds:
            if kind == "lower" and (lower is None or value > lower or (value == lower and strict)):
                lower, lower_strict = value, strict
            if kind == "upper" and (upper is None or value < upper or (value == upper and strict)):
                upper, upper_strict = value, strict
    if lower is None or upper is None:
        return root
    residual = " AND ".join(f"({c.sql('spark')})" for c in rest) or None
    bound = TimeBound(left_time=lt, right_time=rt, lower=lower, upper=upper,
                      lower_strict=lower_strict, upper_strict=upper_strict)
    return replace(root, residual=residual, time_bound=bound)


def _event_time(scan: Scan, prefixes: Mapping[str, InputSpec]) -> str | None:
    spec = prefixes.get(scan.alias)
    if spec is None or spec.event_time is None:
        return None
    for name, internal in scan.columns:
        if name.lower() == spec.event_time.lower():
            return internal
    return None


def _bounds(c: exp.Expression, lt: str, rt: str) -> list[tuple[str, timedelta, bool]] | None:
    """Bounds on (left_time - right_time) that conjunct `c` states, or None."""
    if isinstance(c, exp.Between):
        lo = _bounds(exp.GTE(this=c.this, expression=c.args["low"]), lt, rt)
        hi = _bounds(exp.LTE(this=c.this, expression=c.args["high"]), lt, rt)
        return (lo or []) + (hi or []) if lo and hi else None
    op = type(c)
    if op not in _FLIP:
        return None
    a, da = _offset(c.this)
    b, db = _offset(c.expression)
    if {a, b} != {lt, rt}:
        return None
    if a == rt:  # rewrite to have the left time on the left
        a, b, da, db, op = b, a, db, da, _FLIP[op]
    # a + da  op  b + db   =>   a - b  op  db - da
    value = db - da
    strict = op in (exp.GT, exp.LT)
    kind = "lower" if op in (exp.GT, exp.GTE) else "upper"
    return [(kind, value, strict)]
