"""Queries whose whole FROM is one subquery, merged into that subquery.

dbt's style guide ends a model with `SELECT * FROM final`, where `final` is a CTE that computes
columns of another CTE that joins (`joined`). A SELECT whose FROM is one subquery and nothing else
computes columns of that subquery's rows and filters them: it is the subquery itself with the
outer columns computed over its columns and the outer WHERE AND-ed to its own (both apply to the
same rows, after its joins). `merged` rewrites so, innermost first, every such SELECT over a
subquery that joins, and every derived table over another derived table (a chain of CTEs that
each compute columns of the one before becomes one derived table). A query over a subquery of one
input stays as it is (`derived` binds it), and so does a subquery that is joined to another table
(`derived` names what it refuses).
"""
from __future__ import annotations

from typing import Callable, Mapping

from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec
from .plan import Windowing
from .windows import input_table, window_call

Fail = Callable[[str, exp.Expression], CompileError]

#: What a merged SELECT may hold besides its columns, FROM and WHERE (anything else is left for
#: the compiler to refuse as it is).
_OUTER = {"expressions", "from_", "from", "where", "kind"}
_INNER = _OUTER | {"joins"}


def merged(tree: exp.Expression, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Expression:
    """`tree` with every SELECT whose FROM is one subquery merged into that subquery.

    >>> import sqlglot
    >>> sql = ("SELECT * FROM (SELECT id, UPPER(name) AS name FROM (SELECT o.id, c.name FROM orders o "
    ...        "JOIN customers c ON o.cid = c.id) AS joined WHERE id > 1) AS final")
    >>> merged(sqlglot.parse_one(sql, read="spark"), {}, lambda m, n: ValueError(m)).sql("spark")
    'SELECT o.id, UPPER(c.name) AS name FROM orders AS o JOIN customers AS c ON o.cid = c.id WHERE o.id > 1'
    """
    for select in reversed(list(tree.find_all(exp.Select))):  # a SELECT's subqueries come after it in this order: innermost first
        into = _mergeable(select)
        if into is not None:
            try:
                done = _merge(select, into, inputs, fail)
            except CompileError:
                if into.this.args.get("joins"):
                    raise
                continue  # a subquery of one input whose columns a star hides: a derived table reads it as it is
            if select is tree:
                tree = done
            else:
                select.replace(done)
    return tree


def _mergeable(select: exp.Select) -> exp.Subquery | None:
    """The subquery `select` reads as its whole FROM, if the two merge."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Subquery) or select.args.get("joins"):
        return None
    inner = from_.this.this
    if not isinstance(inner, exp.Select):
        return None
    if not inner.args.get("joins") and not _in_from(select):
        return None  # a query over a subquery of one input reads it as a derived table
    if any(v for k, v in select.args.items() if k not in _OUTER) or any(v for k, v in inner.args.items() if k not in _INNER):
        return None
    return from_.this


def _in_from(select: exp.Select) -> bool:
    """Whether `select` is a subquery in FROM or a join (a derived table), not the query or a subquery
    in its conditions."""
    sub = select.parent
    return isinstance(sub, exp.Subquery) and isinstance(sub.parent, (exp.From, exp.Join))


def _merge(select: exp.Select, sub: exp.Subquery, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Select:
    """`sub`'s SELECT with `select`'s columns and WHERE over its columns."""
    inner = sub.this
    named = _Columns(inner, sub.alias_or_name, inputs, fail)
    out: list[exp.Expression] = []
    for e in select.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
                                       and e.table.lower() == named.alias):
            out += [x.copy() for x in inner.expressions]
            continue
        body = named.substituted(e.copy())
        if isinstance(e, exp.Column) and not (isinstance(body, exp.Column) and body.name.lower() == e.name.lower()):
            body = exp.alias_(body.this if isinstance(body, exp.Paren) else body, e.name)
        out.append(body)
    result = inner.copy()
    result.set("expressions", out)
    where = select.args.get("where")
    if where is not None:
        own = result.args.get("where")
        condition = named.substituted(where.this.copy())
        result.set("where", exp.Where(this=exp.and_(own.this, condition) if own else condition))
    return result


class _Columns:
    """The columns a subquery's SELECT makes, by name, for the query that reads it as `alias`."""

    def __init__(self, inner: exp.Select, alias: str, inputs: Mapping[str, InputSpec], fail: Fail) -> None:
        self.alias = alias.lower()
        self.fail = fail
        self.inner = inner
        self.inputs = {k.lower(): v for k, v in inputs.items()}
        self.named = {e.alias_or_name.lower(): e for e in inner.expressions if e.alias_or_name}

    def substituted(self, tree: exp.Expression) -> exp.Expression:
        """`tree` with each reference to the subquery's columns replaced by what the column is."""
        for column in list(tree.find_all(exp.Column)):
            if isinstance(column.this, exp.Star):
                continue
            table = column.table.lower()
            nested = column.find_ancestor(exp.Select) is not None  # inside a subquery of `tree`: its own names first
            if table != self.alias and (table or nested):
                continue
            value = self.value(column)
            if column is tree:
                return value
            column.replace(value)
        return tree

    def value(self, column: exp.Column) -> exp.Expression:
        """What `column` of the subquery is, over the subquery's own tables."""
        found = self.named.get(column.name.lower())
        if found is not None:
            body = found.this if isinstance(found, exp.Alias) else found
            if isinstance(body, (exp.Column, exp.Literal, exp.Func, exp.Null, exp.Boolean, exp.Paren)):
                return body.copy()
            return exp.Paren(this=body.copy())
        matches = [exp.column(column.name, table=t) for t in self.starred() if column.name.lower() in self.columns_of(t)]
        if len(matches) == 1:
            return matches[0]
        what = "more than one of its tables has" if matches else "it does not select"
        raise self.fail(f"the subquery or common table expression{' ' + self.alias if self.alias else ''} is read for "
                        f"column '{column.name}', which {what}: name the columns it selects (with AS)", column)

    def starred(self) -> list[str]:
        """The aliases of the inner tables whose columns a star of the inner SELECT selects."""
        tables = self.tables()
        aliases: list[str] = []
        for e in self.inner.expressions:
            if isinstance(e, exp.Star):
                aliases += list(tables)
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                aliases.append(e.table.lower())
        return list(dict.fromkeys(aliases))

    def tables(self) -> dict[str, exp.Expression]:
        """The inner SELECT's tables in FROM and its joins, by alias."""
        from_ = self.inner.args.get("from_") or self.inner.args.get("from")
        items = [from_.this] + [j.this for j in self.inner.args.get("joins") or []]
        return {t.alias_or_name.lower(): t for t in items}

    def columns_of(self, alias: str) -> set[str]:
        """The column names of the inner table `alias` (an input, or a subquery naming its columns)."""
        table = self.tables().get(alias)
        call = window_call(table) if table is not None else None
        if call is not None:  # a window table function: its input's columns and the window's
            return self.columns_of_input(input_table(call, self.fail)) | set(Windowing.COLUMNS)
        if isinstance(table, exp.Table):
            return self.columns_of_input(table)
        if isinstance(table, exp.Subquery) and isinstance(table.this, exp.Select):
            return {e.alias_or_name.lower() for e in table.this.expressions if e.alias_or_name}
        return set()

    def columns_of_input(self, table: exp.Table) -> set[str]:
        spec = self.inputs.get(table.name.lower())
        return {c.name.lower() for c in spec.columns} if spec else set()
