"""Recognise an interval (time-windowed) join in a join's condition.

A join of two inputs that both declare an `event_time`, whose ON condition bounds the
difference of those two event times from below *and* from above, is Flink's interval join:
`l.ts BETWEEN r.ts - INTERVAL '4' HOUR AND r.ts`, or `<`, `<=`, `>`, `>=` comparisons with
either side's time on the left and INTERVAL offsets on either side. The bounds become a
`TimeBound` on the join (lower <= left_time - right_time <= upper) and leave the residual.
A join with only one of the two bounds keeps its state forever, so it stays a regular join.

>>> from streamjoin.sql.compiler import compile_sql
>>> from streamjoin.spec import InputSpec
>>> cols = {"columns": [["id", "int"], ["ts", "timestamp"]], "event_time": "ts"}
>>> specs = {n: InputSpec.from_dict(n, cols) for n in ("a", "b")}
>>> sql = "SELECT a.id FROM a JOIN b ON a.id = b.id AND a.ts < b.ts + INTERVAL '10' MILLISECOND AND b.ts <= a.ts"
>>> bound = compile_sql("m", sql, specs).root.time_bound
>>> bound.lower, bound.upper, bound.upper_strict
(datetime.timedelta(0), datetime.timedelta(microseconds=10000), True)
"""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Callable, Mapping

import sqlglot
from sqlglot import exp

from ..spec import InputSpec
from ..types import JoinType
from .plan import Join, JoinPlan, Node, Scan, TimeBound

_NEGATE = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
_UNIT = {"week": timedelta(weeks=1), "day": timedelta(days=1), "hour": timedelta(hours=1),
         "minute": timedelta(minutes=1), "second": timedelta(seconds=1),
         "millisecond": timedelta(milliseconds=1), "microsecond": timedelta(microseconds=1)}
_SPAN_FIELDS = ("day", "hour", "minute", "second")
_INTERVAL_JOINS = (JoinType.INNER, JoinType.LEFT, JoinType.RIGHT, JoinType.FULL)
_TIMESTAMP_TYPES = ("timestamp", "timestamp_ltz", "timestamp_ntz")


class _NotLinear(Exception):
    """An expression that is not a sum of columns and fixed-length intervals."""


def _unit_name(unit: exp.Expression) -> str:
    name = unit.name.lower()
    return name[:-1] if name.endswith("s") else name


def interval_value(iv: exp.Interval) -> timedelta:
    """The fixed duration of an INTERVAL literal; `_NotLinear` for YEAR/MONTH or an unreadable one.

    >>> interval_value(sqlglot.parse_one("INTERVAL '-1:30' HOUR TO MINUTE", read="spark"))
    datetime.timedelta(days=-1, seconds=81000)
    """
    text = iv.this.name.strip()
    unit = iv.args.get("unit")
    if unit is None:  # INTERVAL '4 hours'
        parts = text.split()
        if len(parts) != 2:
            raise _NotLinear(f"INTERVAL '{text}'")
        text, unit = parts[0], exp.var(parts[1])
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    try:
        if isinstance(unit, exp.IntervalSpan):  # e.g. HOUR TO SECOND: '1:30:15.5'
            first, last = _unit_name(unit.this), _unit_name(unit.expression)
            fields = _SPAN_FIELDS[_SPAN_FIELDS.index(first):_SPAN_FIELDS.index(last) + 1]
            values = [float(v) for v in re.split(r"[ :]", text)]
            if len(values) != len(fields):
                raise ValueError(text)
            return sign * sum((_UNIT[f] * v for f, v in zip(fields, values)), timedelta(0))
        return sign * _UNIT[_unit_name(unit)] * float(text)
    except (KeyError, ValueError) as exc:
        raise _NotLinear(f"INTERVAL {iv.sql('spark')} (not a fixed duration)") from exc


def _linear(e: exp.Expression) -> tuple[dict[str, int], timedelta]:
    """`e` as Σ coefficient·column + constant interval, or `_NotLinear`."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column):
        return {e.name: 1}, timedelta(0)
    if isinstance(e, exp.Interval):
        return {}, interval_value(e)
    if isinstance(e, exp.Neg):
        coefs, const = _linear(e.this)
        return {c: -k for c, k in coefs.items()}, -const
    if isinstance(e, (exp.Add, exp.Sub)):
        a, ka = _linear(e.this)
        b, kb = _linear(e.expression)
        sign = 1 if isinstance(e, exp.Add) else -1
        coefs = dict(a)
        for c, k in b.items():
            coefs[c] = coefs.get(c, 0) + sign * k
        return {c: k for c, k in coefs.items() if k}, ka + sign * kb
    raise _NotLinear(e.sql("spark"))


def conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The AND-ed parts of a condition (parentheses dropped)."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def time_bounds(c: exp.Expression, lt: str, rt: str) -> list[tuple[str, timedelta, bool]] | None:
    """The bounds `(kind, value, strict)` on left_time - right_time that conjunct `c` states, or None.

    >>> c = sqlglot.parse_one("a BETWEEN b - INTERVAL '4' HOUR AND b", read="spark")
    >>> time_bounds(c, "a", "b")
    [('lower', datetime.timedelta(days=-1, seconds=72000), False), ('upper', datetime.timedelta(0), False)]
    """
    if isinstance(c, exp.Between):
        lo = time_bounds(exp.GTE(this=c.this, expression=c.args["low"]), lt, rt)
        hi = time_bounds(exp.LTE(this=c.this, expression=c.args["high"]), lt, rt)
        return lo + hi if lo and hi else None
    op = type(c)
    if op not in _NEGATE:
        return None
    try:
        a, ka = _linear(c.this)
        b, kb = _linear(c.expression)
    except _NotLinear:
        return None
    coefs = dict(a)
    for name, k in b.items():
        coefs[name] = coefs.get(name, 0) - k
    coefs = {n: k for n, k in coefs.items() if k}
    const = ka - kb  # c reads: Σ coefs·column + const  op  0
    if coefs == {lt: -1, rt: 1}:  # multiply by -1
        coefs, const, op = {lt: 1, rt: -1}, -const, _NEGATE[op]
    if coefs != {lt: 1, rt: -1}:
        return None
    kind = "lower" if op in (exp.GT, exp.GTE) else "upper"
    return [(kind, -const, op in (exp.GT, exp.LT))]  # left_time - right_time  op  -const


def extract_time_bound(root: Node, prefixes: Mapping[str, InputSpec], fail: Callable) -> Node:
    """Turn INNER/LEFT/RIGHT/FULL joins whose condition bounds the difference of their sides' event
    times on both sides into interval joins (`Join.time_bound`). A side is an input, or on the left
    the rows of a join that carry an input's event time as Flink keeps it: an interval join's (a
    cascade) or an event-time temporal join's (the compiler runs this again once those are bound)."""
    if isinstance(root, Join):
        root = replace(root, left=extract_time_bound(root.left, prefixes, fail),
                       right=extract_time_bound(root.right, prefixes, fail))
    if not (isinstance(root, Join) and root.residual and root.join_type in _INTERVAL_JOINS
            and isinstance(root.right, Scan) and root.temporal is None and root.window is None):
        return root
    rt = _event_time(root.right, prefixes)
    times = carried_times(root.left, prefixes) if rt is not None else []
    found = next(filter(None, (_bound(root.residual, lt, rt) for lt in times)), None)
    if found is None:
        return root
    bound, residual = found
    for scan in [side for side in (root.left, root.right) if isinstance(side, Scan)]:
        spec = prefixes[scan.alias]
        if spec.changelog_format not in ("append", "changelog"):
            raise fail(f"input '{spec.name}': changelog_format '{spec.changelog_format}' produces updates and deletes, "
                       f"but the interval join {root.id} needs an append-only input, as in Flink; declare an "
                       "insert-only changelog ('append'), or drop the time bound to make it a regular join")
    return replace(root, residual=residual, time_bound=bound)


def check_event_times(plan: JoinPlan, fail: Callable) -> None:
    """Every declared event_time is a timestamp once the model has a time-based join: the one watermark that
    join follows is made of every input's event time (FORMAT.md), also one only a regular join reads."""
    timed = next((n for n in plan.nodes() if isinstance(n, Join) and n.time_based), None)
    if timed is None:
        return
    join = "interval join" if timed.time_bound else "window join" if timed.window else "event-time temporal join"
    for name in plan.watermark_inputs:
        spec = plan.inputs[name]
        kind = spec.column_type(spec.event_time).lower()
        if kind not in _TIMESTAMP_TYPES:
            raise fail(f"input '{name}': event_time column '{spec.event_time}' is {kind}; the model's watermark, "
                       f"which its {join} {timed.id} follows, is made of every input's event time, so each must "
                       "be a timestamp: declare the column as timestamp (or leave event_time out of an input no "
                       "time-based join reads)")


def carried_times(node: Node, prefixes: Mapping[str, InputSpec], padded: bool = True) -> list[str]:
    """The event times (internal names) the rows of `node` carry as time attributes: an input's, an
    interval join's sides' (Flink keeps both; a side padded with NULLs has no time there: without
    `padded`, only the sides never padded), and an event-time temporal join's probe side's."""
    if isinstance(node, Scan):
        return [t for t in [_event_time(node, prefixes)] if t is not None]
    if isinstance(node, Join) and node.time_bound is not None:
        sides = (node.left, node.right) if padded else node.unpadded_sides
        return [t for side in sides for t in carried_times(side, prefixes, padded)]
    if isinstance(node, Join) and node.temporal is not None and not node.temporal.processing_time:
        return carried_times(node.left, prefixes, padded)
    return []


def _bound(residual: str, lt: str, rt: str) -> tuple[TimeBound, str | None] | None:
    """The bound a join's residual puts on `lt - rt` and the rest of the residual, or None
    without both a lower and an upper bound."""
    lower: timedelta | None = None
    upper: timedelta | None = None
    lower_strict = upper_strict = False
    rest: list[exp.Expression] = []
    for c in conjuncts(sqlglot.parse_one(residual, read="spark")):
        bounds = time_bounds(c, lt, rt)
        if bounds is None:
            rest.append(c)
            continue
        for kind, value, strict in bounds:
            if kind == "lower" and (lower is None or value > lower or (value == lower and strict)):
                lower, lower_strict = value, strict
            if kind == "upper" and (upper is None or value < upper or (value == upper and strict)):
                upper, upper_strict = value, strict
    if lower is None or upper is None:
        return None
    bound = TimeBound(left_time=lt, right_time=rt, lower=lower, upper=upper,
                      lower_strict=lower_strict, upper_strict=upper_strict)
    return bound, " AND ".join(f"({c.sql('spark')})" for c in rest) or None


def _event_time(scan: Scan, prefixes: Mapping[str, InputSpec]) -> str | None:
    spec = prefixes.get(scan.alias)
    if spec is None or spec.event_time is None:
        return None
    for name, internal in scan.columns:
        if name.lower() == spec.event_time.lower():
            return internal
    return None
