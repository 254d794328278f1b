"""Conditions as lists of AND-ed parts: split (`predicates`), joined back (`and_all`), and
tested for subqueries (`has_subquery`)."""
from __future__ import annotations

from typing import Iterable

from sqlglot import exp

from .time_bounds import conjuncts


def predicates(e: exp.Expression) -> list[exp.Expression]:
    """The AND-ed parts of a condition, with `a = b OR (a IS NULL AND b IS NULL)` read as `a <=> b`
    (the form Flink's planner also recognises as a null-safe join key).

    >>> import sqlglot
    >>> [p.sql("spark") for p in predicates(sqlglot.parse_one("(x.a = y.a OR (x.a IS NULL AND y.a IS NULL)) AND x.b > 1"))]
    ['x.a IS NOT DISTINCT FROM y.a', 'x.b > 1']
    >>> [p.sql("spark") for p in predicates(sqlglot.parse_one("x.a = y.a OR (x.a IS NULL AND y.a IS NULL AND x.b > 1)"))]
    ['x.a = y.a OR (x.a IS NULL AND y.a IS NULL AND x.b > 1)']
    """
    return [_null_safe_equality(p) for c in conjuncts(e) for p in _negation_pushed(c)]


def _negation_pushed(c: exp.Expression) -> list[exp.Expression]:
    """`c` as AND-ed parts, with a NOT over an OR or a NOT that holds a subquery pushed inside (De
    Morgan's laws hold in SQL's three-valued logic), so `NOT (a OR NOT EXISTS (...))` reads as
    `NOT a` and `EXISTS (...)`, a semi join.

    >>> import sqlglot
    >>> [p.sql("spark") for p in _negation_pushed(sqlglot.parse_one("NOT (c LIKE 'a' OR NOT EXISTS (SELECT d FROM r))"))]
    ["NOT c LIKE 'a'", 'EXISTS(SELECT d FROM r)']
    """
    if not has_subquery(c):
        return [c]
    inner = c.unnest()
    if isinstance(inner, exp.And):
        return [p for part in conjuncts(inner) for p in _negation_pushed(part)]
    if isinstance(inner, exp.Not):
        negated = inner.this.unnest()
        if isinstance(negated, exp.Not):
            return _negation_pushed(negated.this)
        if isinstance(negated, exp.Or):
            return [p for branch in (negated.this, negated.expression) for p in _negation_pushed(exp.Not(this=branch.copy()))]
    return [inner]


def _null_safe_equality(c: exp.Expression) -> exp.Expression:
    if not isinstance(c, exp.Or):
        return c
    branches = [b.unnest() for b in (c.this, c.expression)]
    for eq, nulls in (branches, branches[::-1]):
        if isinstance(eq, exp.EQ) and isinstance(nulls, exp.And):
            parts = conjuncts(nulls)
            tested = [t.this for t in parts if isinstance(t, exp.Is) and isinstance(t.expression, exp.Null)]
            if len(parts) == len(tested) == 2 and {t.sql() for t in tested} == {eq.this.sql(), eq.expression.sql()} \
                    and eq.this.sql() != eq.expression.sql():
                return exp.NullSafeEQ(this=eq.this.copy(), expression=eq.expression.copy())
    return c


def and_all(parts: Iterable[exp.Expression]) -> exp.Expression:
    """The conjunction of one or more parts, left-nested.

    >>> import sqlglot
    >>> and_all([sqlglot.parse_one("a > 1"), sqlglot.parse_one("b < 2"), sqlglot.parse_one("c")]).sql("spark")
    'a > 1 AND b < 2 AND c'
    """
    parts = list(parts)
    out = parts[0]
    for p in parts[1:]:
        out = exp.And(this=out, expression=p)
    return out


def has_subquery(e: exp.Expression) -> bool:
    """Whether `e` holds an EXISTS or IN subquery anywhere inside.

    >>> import sqlglot
    >>> has_subquery(sqlglot.parse_one("a = 1 OR b IN (SELECT x FROM t)")), has_subquery(sqlglot.parse_one("b IN (1, 2)"))
    (True, False)
    """
    return e.find(exp.Exists) is not None or any(i.args.get("query") for i in e.find_all(exp.In))
