"""Joins with USING, read as Spark reads them: an ON of equalities, and one column per USING name.

`a JOIN b USING (k)` joins on `a.k = b.k`, and its rows have one column `k` first, then the other
columns of `a`, then those of `b`: `a.k` under INNER and LEFT joins (and semi/anti joins, whose
rows are `a`'s), `b.k` under RIGHT, `COALESCE(a.k, b.k)` under FULL. An unqualified `k` in the
query means that column, and `SELECT *` lists the columns in that order (Spark's
`ResolveNaturalAndUsingJoin`). `rewritten` turns each USING into its ON, each unqualified reference
to a USING column into what it is, and a `*` into the columns it stands for, so the rest of the
compiler sees plain joins.
"""
from __future__ import annotations

from typing import Callable, Mapping

from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec
from .from_items import emits_pairs, from_clause, item_columns, item_name

Fail = Callable[[str, exp.Expression], CompileError]
Columns = list[tuple[str, exp.Expression]]  # a join's output columns in order: name, what it is


def rewritten(tree: exp.Expression, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Expression:
    """`tree` with every join's USING read as Spark reads it.

    >>> import sqlglot
    >>> from streamjoin.spec import InputSpec
    >>> a = InputSpec.from_dict("a", {"columns": [["k", "int"], ["v", "int"]]})
    >>> b = InputSpec.from_dict("b", {"columns": [["w", "int"], ["k", "int"]]})
    >>> sql = "SELECT * FROM a FULL JOIN b USING (k) WHERE k > 1"
    >>> rewritten(sqlglot.parse_one(sql, read="spark"), {"a": a, "b": b}, lambda m, n: ValueError(m)).sql("spark")
    'SELECT COALESCE(a.k, b.k) AS k, a.v AS v, b.w AS w FROM a FULL JOIN b ON a.k = b.k WHERE COALESCE(a.k, b.k) > 1'
    """
    inputs = {k.lower(): v for k, v in inputs.items()}
    for select in reversed(list(tree.find_all(exp.Select))):  # innermost first: a subquery's columns are final
        if any(j.args.get("using") for j in select.args.get("joins") or []):
            _rewrite(select, inputs, fail)
    return tree


def _rewrite(select: exp.Select, inputs: Mapping[str, InputSpec], fail: Fail) -> None:
    """Rewrite one SELECT's USING joins, its `*` and its unqualified references to USING columns."""
    columns: Columns | None = _columns(from_clause(select).this, inputs)
    shared: dict[str, exp.Expression] = {}  # USING name -> what the one column of that name is
    for join in select.args["joins"]:
        right = _columns(join.this, inputs)
        alias = item_name(join.this)
        side = (join.args.get("side") or "").upper()
        names = [i.name for i in join.args.get("using") or []]
        if join.args.get("on") is not None and shared:
            _resolve_unqualified(join.args["on"], select, shared)
        if names:
            if columns is None:
                raise fail(f"USING ({', '.join(names)}) joins a table whose columns are not known here: "
                           "write the join condition with ON", join)
            equalities, firsts = [], []
            for name in names:
                found = [e for n, e in columns if n.lower() == name.lower()]
                if len(found) != 1:
                    what = "no column" if not found else "more than one column"
                    raise fail(f"USING ({name}): the tables before the join have {what} '{name}'", join)
                left = found[0]
                this = exp.column(name, table=alias)
                equalities.append(exp.EQ(this=left.copy(), expression=this))
                value = this if side == "RIGHT" else \
                    exp.func("COALESCE", left.copy(), this.copy()) if side == "FULL" else left
                shared[name.lower()] = value
                firsts.append((name, value))
            join.set("using", None)
            join.set("on", exp.and_(*equalities))
            used = {n.lower() for n in names}
            rest = [(n, e) for n, e in columns if n.lower() not in used]
            others = [(n, e) for n, e in right or [] if n.lower() not in used]
            columns = None if right is None else firsts + rest + (others if emits_pairs(join) else [])
        elif columns is not None:
            columns = None if right is None else columns + (right if emits_pairs(join) else [])
    for e in select.expressions:
        _resolve_unqualified(e, select, shared)
    if select.args.get("where") is not None:
        _resolve_unqualified(select.args["where"], select, shared)
    out: list[exp.Expression] = []
    for e in select.expressions:
        if isinstance(e, exp.Star):
            if columns is None:
                raise fail("SELECT * over a join with USING reads a table whose columns are not known here: "
                           "name the columns", e)
            out += [exp.alias_(v.copy(), n) for n, v in columns]
        else:
            out.append(e)
    select.set("expressions", out)


def _resolve_unqualified(tree: exp.Expression, select: exp.Select, shared: Mapping[str, exp.Expression]) -> None:
    """Each unqualified reference in `tree` of `select` itself (not of its subqueries) to a USING column,
    as what that column is."""
    for column in list(tree.find_all(exp.Column)):
        if column.table or isinstance(column.this, exp.Star) or column.name.lower() not in shared:
            continue
        if column.find_ancestor(exp.Select) is not select:
            continue  # a subquery's own name
        value = shared[column.name.lower()].copy()
        if column is tree or isinstance(column.parent, exp.Select):
            value = exp.alias_(value, column.name)
        column.replace(value)


def _columns(item: exp.Expression, inputs: Mapping[str, InputSpec]) -> Columns | None:
    """A table's columns in order, each as a reference through its name; None when not known here."""
    names, name = item_columns(item, inputs), item_name(item)
    return None if names is None else [(n, exp.column(n, table=name)) for n in names]
