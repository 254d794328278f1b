"""Common table expressions (`WITH name AS (SELECT ...)`), read as the derived tables they name.

A dbt model often starts by importing its inputs as CTEs (`WITH orders AS (SELECT * FROM {{ ref('orders') }})`)
and then joins them. Each reference to a CTE becomes its body: a CTE that is `SELECT * FROM <input>`
becomes that input itself (keeping its unique key and event time), any other a derived table in
`FROM` (`derived`'s rules: one input, computed columns, filters). A CTE may read the CTEs before it.
"""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from ..errors import CompileError
from .from_items import from_clause
from .windows import window_call

Fail = Callable[[str, exp.Expression], CompileError]


def inlined(select: exp.Expression, fail: Fail) -> exp.Expression:
    """`select` without its WITH clause, each CTE's body in place of every reference to it.

    >>> import sqlglot
    >>> sql = ("WITH o AS (SELECT * FROM orders), p AS (SELECT id, price * 2 AS p2 FROM prices WHERE price > 0) "
    ...        "SELECT o.id, x.p2 FROM o JOIN p AS x ON o.id = x.id")
    >>> inlined(sqlglot.parse_one(sql, read="spark"), lambda message, node: ValueError(message)).sql("spark")
    'SELECT o.id, x.p2 FROM orders AS o JOIN (SELECT id, price * 2 AS p2 FROM prices WHERE price > 0) AS x ON o.id = x.id'
    """
    clause = select.args.get("with_") or select.args.get("with")
    if clause is None:
        return select
    if clause.args.get("recursive"):
        raise fail("WITH RECURSIVE is not supported in a streaming join", clause)
    bodies: dict[str, exp.Expression] = {}
    for cte in clause.expressions:
        if cte.args["alias"].args.get("columns"):
            raise fail(f"the column list of the common table expression '{cte.alias_or_name}' is not supported: "
                       "name the columns with AS in its SELECT", cte)
        bodies[cte.alias_or_name.lower()] = _replaced(cte.this.copy(), bodies, fail)
    out = select.copy()
    out.set("with_" if "with_" in out.args else "with", None)
    return _replaced(out, bodies, fail)


def _replaced(tree: exp.Expression, bodies: dict[str, exp.Expression], fail: Fail) -> exp.Expression:
    """`tree` with every table reference that names a CTE in `bodies` replaced by its body. A
    pass-through CTE's reference keeps what it says of the table (`FOR SYSTEM_TIME AS OF`, its alias)."""
    for call in [c for c in map(window_call, tree.find_all(exp.Table)) if c is not None and c.expressions]:
        _replace_window_input(call, bodies, fail)
    for table in list(tree.find_all(exp.Table)):
        body = bodies.get(table.name.lower())
        if body is None or table.args.get("db"):
            continue
        alias = exp.TableAlias(this=exp.to_identifier(table.alias or table.name))
        source = _passed_through(body)
        if source is not None:
            table.set("this", source.this.copy())
            table.set("db", source.args.get("db") and source.args["db"].copy())
            table.set("alias", alias)
        elif table.args.get("version") is not None:
            raise fail(f"FOR SYSTEM_TIME AS OF reads a versioned input, but the common table expression "
                       f"'{table.name}' is not one: make it SELECT * FROM the input, and filter in the join", table)
        else:
            table.replace(exp.Subquery(this=body.copy(), alias=alias))
    return tree


def _replace_window_input(call: exp.Anonymous, bodies: dict[str, exp.Expression], fail: Fail) -> None:
    """A window table function's input (`TUMBLE(TABLE <name>, ...)`, parsed as a column) that names a
    CTE: the input that CTE passes through."""
    first = call.expressions[0]
    body = bodies.get(first.name.lower()) if isinstance(first, exp.Column) and not first.table else None
    if body is None:
        return
    source = _passed_through(body)
    if source is None:
        raise fail(f"{str(call.this).upper()} reads an input, but the common table expression '{first.name}' is "
                   "not one: make it SELECT * FROM the input, or window a derived table with Spark's window()", first)
    first.replace(exp.column(source.name, table=source.args.get("db") and source.args["db"].name))


def _passed_through(body: exp.Expression) -> exp.Table | None:
    """The input a CTE passes through as it is (`SELECT * FROM t`, nothing else), or None."""
    if not isinstance(body, exp.Select) or len(body.expressions) != 1 or not isinstance(body.expressions[0], exp.Star):
        return None
    if any(body.args.get(k) for k in body.args if k not in ("expressions", "from_", "from", "kind")):
        return None
    source = from_clause(body).this
    return source if isinstance(source, exp.Table) and not source.args.get("alias") else None
