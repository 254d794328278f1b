"""Derived tables: a subquery in FROM that computes columns of one input and filters its rows.

It works row by row, so it is incremental as it is: it becomes a scan of the input with
computed columns (`Scan.sources`) and filters (`Scan.source_filters`). It declares no unique
key (its columns may not keep one), and keeps the input's event time where it selects that
column as it is.

>>> from streamjoin.spec import InputSpec
>>> from streamjoin.sql.compiler import compile_sql
>>> t = InputSpec.from_dict("t", {"columns": [["a", "int"], ["b", "int"]]})
>>> u = InputSpec.from_dict("u", {"columns": [["a", "int"]]})
>>> sql = "SELECT t1.a FROM (SELECT IF(a = 3, NULL, a) AS a, b FROM t WHERE b > 0) AS t1 JOIN u ON t1.a = u.a"
>>> print(compile_sql("m", sql, {"t": t, "u": u}).explain().splitlines()[2].strip())
scan (SELECT IF(`a` = 3, NULL, `a`) AS `a`, `b` AS `b` FROM t WHERE `b` > 0) AS t1
"""
from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from sqlglot import exp

from ..errors import CompileError
from ..spec import Column, InputSpec
from ..types import q
from .conditions import has_subquery, predicates
from .from_items import from_clause
from .plan import Scan, Windows
from .scope import Binding, Scope
from .windows import input_table, spark_windows, tvf_windows, window_call, window_view


class TableBinder(Protocol):
    """What binding a derived table needs from the compiler."""

    def fail(self, message: str, node: exp.Expression | None = None) -> CompileError: ...

    def check_select(self, select: exp.Select, *, top: bool) -> None: ...

    def input_spec(self, table: exp.Table) -> InputSpec: ...

    def register(self, alias: str, view: InputSpec, spec: InputSpec, scope: Scope, where: exp.Expression,
                 **derived: tuple[str, ...]) -> Scan: ...


def bind_derived(binder: TableBinder, table: exp.Subquery, scope: Scope) -> Scan:
    """Bind a subquery in FROM in `scope` as a scan of its one input with computed columns."""
    fail = binder.fail
    sub = table.this
    from_ = from_clause(sub) if isinstance(sub, exp.Select) else None
    if from_ is None or not isinstance(from_.this, exp.Table) or sub.args.get("joins"):
        raise fail("a subquery in FROM must select from one input, or join first in FROM with only INNER, LEFT, "
                   "CROSS or semi/anti joins after it; else (joined later in FROM, or first before a RIGHT or FULL join) "
                   "it needs aliases of its own, an input first in its FROM and only INNER or CROSS joins (or outer joins "
                   "too, without a WHERE unless it is LEFT, semi or anti joined), and where it is INNER or CROSS joined, no condition that reads a time "
                   "column: write its joins in the outer query", table)
    if not table.alias:
        raise fail("a subquery in FROM needs an alias", table)
    binder.check_select(sub, top=True)
    call = window_call(from_.this)
    if call is None:
        spec = binder.input_spec(from_.this)
        source, tvf, own = spec.as_queried(), None, from_.this.alias_or_name
    else:  # (SELECT ... FROM TABLE(TUMBLE(TABLE t, ...))): the window function's rows, with their windows
        spec = binder.input_spec(input_table(call, fail))
        (source, tvf), own = window_view(call, spec.as_queried(), fail), from_.this.alias or spec.name
    inner = Scope(bindings={own.lower(): Binding(own, source, own)})
    where = predicates(sub.args["where"].this) if sub.args.get("where") else []
    for x in where:
        if has_subquery(x):
            raise fail("a subquery inside a subquery in FROM is not supported", x)
    columns: list[tuple[str, str, str]] = []  # name, Spark SQL over the input's columns, type ('' if computed)
    bodies: list[tuple[str, exp.Expression]] = []
    for e in sub.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
            columns += [(c.name, q(c.name), c.type) for c in source.columns]
            continue
        body = e.this if isinstance(e, exp.Alias) else e
        name = e.alias_or_name if isinstance(e, (exp.Alias, exp.Column)) else e.sql("spark")
        kind = source.column_type(inner.resolve(body, fail)[1]) if isinstance(body, exp.Column) else ""
        columns.append((name, inner.render(body, fail, as_input_columns=True), kind))
        bodies.append((name, body))
    names = [n.lower() for n, _, _ in columns]
    if len(set(names)) < len(names):
        raise fail("a subquery in FROM selects two columns of the same name; alias them apart", table)
    passed_time = [n for n, src, _ in columns if spec.event_time and src == q(spec.event_time)]
    view = replace(spec, columns=tuple(Column(n, t) for n, _, t in columns), unique_key=(),
                   event_time=passed_time[0] if passed_time else None)
    scan = binder.register(table.alias, view, spec, scope, table, sources=tuple(src for _, src, _ in columns),
                           source_filters=tuple(inner.render(x, fail, as_input_columns=True) for x in where))
    if tvf is not None:
        return replace(scan, windows=tvf_windows(tvf, scan))
    internal = {name.lower(): inside for name, inside in scan.columns}
    made = spark_windows(bodies, spec, fail)
    if made is None:
        return scan
    window_spec, by_name = made
    return replace(scan, windows=Windows(window_spec, tuple((internal[n.lower()], p) for n, p in by_name.items())))
