"""Subqueries in WHERE: `[NOT] EXISTS (...)` and `x [NOT] IN (SELECT ...)` as semi and anti joins.

The subquery's correlation (`WHERE p.id = o.id`) and, for IN, the compared columns become
the join's condition. `x NOT IN (S)` holds when no row s of S has `x = s OR x IS NULL OR s IS
NULL` (SQL's rule for NULLs): correlated, that is the anti join's residual; uncorrelated and
over one column, the join is null-aware (it tracks whether S is empty or holds a NULL).
Subqueries nested in a subquery's WHERE become semi/anti joins of its input; they may
correlate only with that input. A subquery may join its inputs by INNER or CROSS joins: the
semi/anti join's right side is then their join, its own conditions placed on it as a query's are.

>>> from streamjoin.spec import InputSpec
>>> from streamjoin.sql.compiler import compile_sql
>>> o = InputSpec.from_dict("o", {"columns": [["id", "int"], ["v", "int"]]})
>>> p = InputSpec.from_dict("p", {"columns": [["id", "int"], ["w", "int"]]})
>>> sql = "SELECT o.id FROM o WHERE o.v NOT IN (SELECT w FROM p WHERE p.id = o.id)"
>>> print(compile_sql("m", sql, {"o": o, "p": p}).explain().splitlines()[1].strip())
anti join j1 ON `o__id` = `p__id` residual `o__v` = `p__w` OR `o__v` IS NULL OR `p__w` IS NULL
"""
from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from sqlglot import exp

from ..errors import CompileError
from ..types import JoinType
from .conditions import predicates
from .from_items import from_clause, inner_join, parenthesized
from .placement import place_predicates
from .plan import Join, Node, Scan
from .scope import Scope


class JoinBuilder(Protocol):
    """What turning a subquery into a join needs from the compiler."""

    def fail(self, message: str, node: exp.Expression | None = None) -> CompileError: ...

    def check_select(self, select: exp.Select, *, top: bool) -> None: ...

    def bind(self, table: exp.Expression, scope: Scope) -> Node: ...

    def joined(self, node: Node, joins: list[exp.Join], scope: Scope) -> Node: ...

    def join_with(self, left: Node, right: Node, join_type: JoinType, parts: list[exp.Expression],
                  scope: Scope, where: exp.Expression, *, null_aware: bool = False) -> Join: ...


def is_subquery_predicate(c: exp.Expression) -> bool:
    """Whether a conjunct is `[NOT] EXISTS (...)` or `x [NOT] IN (SELECT ...)`."""
    inner = c.this if isinstance(c, exp.Not) else c
    if isinstance(inner, exp.Exists):
        return True
    return isinstance(inner, exp.In) and inner.args.get("query") is not None


def add_subquery_join(builder: JoinBuilder, root: Node, c: exp.Expression, scope: Scope) -> Node:
    """`[NOT] EXISTS (...)` / `x [NOT] IN (SELECT ...)` as a semi or anti join of `root` with the subquery."""
    fail = builder.fail
    negated = isinstance(c, exp.Not)
    inner = c.this if negated else c
    sub = inner.this if isinstance(inner, exp.Exists) else inner.args["query"].this
    if isinstance(sub, exp.Subquery):
        sub = sub.this
    if not isinstance(sub, exp.Select):
        raise fail("only a plain SELECT is supported inside EXISTS / IN", inner)
    builder.check_select(sub, top=False)
    joins = sub.args.get("joins") or []
    outer = next((j for j in joins if not inner_join(j) or j.this.find(exp.Version)), None)
    if outer is not None or parenthesized(from_clause(sub).this) is not None:
        raise fail("a subquery in [NOT] IN or [NOT] EXISTS may join its inputs by INNER or CROSS joins only",
                   outer or sub)
    sub_scope = Scope(parent=scope)
    right = builder.joined(builder.bind(from_clause(sub).this, sub_scope), joins, sub_scope)
    right_aliases = {a.lower() for a in right.aliases}
    where_parts = predicates(sub.args["where"].this) if sub.args.get("where") else []
    nested = [x for x in where_parts if is_subquery_predicate(x)]
    plain = [x for x in where_parts if not is_subquery_predicate(x)]
    correlated = [x for x in plain if sub_scope.refs(x, fail) - right_aliases]
    local = [x for x in plain if not (sub_scope.refs(x, fail) - right_aliases)]
    if isinstance(right, Scan):
        right = replace(right, filters=right.filters + tuple(sub_scope.render(x, fail) for x in local))
    elif local:  # over its inner joins: each filters an input, or joins two
        right, constant = place_predicates(right, local, sub_scope, fail)
        if constant:
            raise fail("a condition of a joined subquery in [NOT] IN or [NOT] EXISTS reads none of its inputs", constant[0])
    for x in nested:  # correlated with this subquery's input only: its scope does not see further out
        right = add_subquery_join(builder, right, x, Scope(bindings=sub_scope.bindings, out_of_reach=scope))
    null_aware = False
    if isinstance(inner, exp.In):
        outer = inner.this.expressions if isinstance(inner.this, exp.Tuple) else [inner.this]
        if len(outer) != len(sub.expressions):
            raise fail(f"IN compares {len(outer)} column(s) with a subquery selecting {len(sub.expressions)}", inner)
        pairs = [(_qualify(o, scope, sub_scope, builder), s.copy()) for o, s in zip(outer, sub.expressions)]
        if not negated:
            correlated += [exp.EQ(this=o, expression=s) for o, s in pairs]
        elif correlated:
            correlated += [exp.or_(exp.EQ(this=o, expression=s), exp.Is(this=o.copy(), expression=exp.Null()),
                                   exp.Is(this=s.copy(), expression=exp.Null())) for o, s in pairs]
        elif len(pairs) == 1:
            correlated.append(exp.EQ(this=pairs[0][0], expression=pairs[0][1]))
            null_aware = True
        else:
            raise fail("an uncorrelated NOT IN over several columns is not supported; compare one column, "
                       "or correlate the subquery with an equality", inner)
    join_type = JoinType.ANTI if negated else JoinType.SEMI
    join = builder.join_with(root, right, join_type, correlated, sub_scope, inner, null_aware=null_aware)
    if null_aware and (len(join.keys) != 1 or join.residual is not None):
        raise fail("NOT IN is supported for one column compared with the subquery's one column", inner)
    return join


def _qualify(e: exp.Expression, outer: Scope, inner: Scope, builder: JoinBuilder) -> exp.Expression:
    """`e` (written in the outer query) with its columns qualified so the subquery's scope cannot capture them.

    Where the subquery reuses an outer alias (`pk NOT IN (SELECT pk FROM t WHERE ...)` inside
    `FROM t`), the outer input is reached through a qualifier of the compiler's own."""
    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            binding, name = outer.resolve(node, builder.fail)
            qualifier = binding.alias
            if qualifier.lower() in inner.bindings:
                qualifier = f"outer {binding.prefix}"  # a space: no alias the user wrote can equal it
                inner.shadowed[qualifier.lower()] = binding
            return exp.column(name, exp.to_identifier(qualifier, quoted=True))
        return node

    return e.copy().transform(fix)
