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
from .from_items import emits_pairs, from_clause, item_columns, item_name
from .windows import window_call

Fail = Callable[[str, exp.Expression], CompileError]

#: What a merged SELECT may hold besides its columns, FROM, joins and WHERE (anything else is left
#: for the compiler to refuse as it is).
_INNER = {"expressions", "from_", "from", "joins", "where", "kind"}


def merged(tree: exp.Expression, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Expression:
    """`tree` with every SELECT whose FROM is one subquery merged into that subquery.

    >>> import sqlglot
    >>> sql = ("SELECT * FROM (SELECT id, UPPER(name) AS name FROM (SELECT o.id, c.name FROM orders o "
    ...        "JOIN customers c ON o.cid = c.id) AS joined WHERE id > 1) AS final")
    >>> merged(sqlglot.parse_one(sql, read="spark"), {}, lambda m, n: ValueError(m)).sql("spark")
    'SELECT o.id, UPPER(c.name) AS name FROM orders AS o JOIN customers AS c ON o.cid = c.id WHERE o.id > 1'
    """
    inputs = {k.lower(): v for k, v in inputs.items()}
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
    """The subquery `select` reads first in FROM, if the two merge: the subquery is all of FROM, or it
    joins and the joins that follow it keep its rows as they are (`_follows`)."""
    from_ = from_clause(select)
    if from_ is None or not isinstance(from_.this, exp.Subquery):
        return None
    inner = from_.this.this
    if not isinstance(inner, exp.Select):
        return None
    joins = select.args.get("joins") or []
    if not inner.args.get("joins") and (joins or not _in_from(select)):
        return None  # a subquery of one input: a derived table reads it as it is
    if joins and not all(_follows(j) for j in joins):
        return None
    if any(v for k, v in select.args.items() if k not in _INNER) or any(v for k, v in inner.args.items() if k not in _INNER):
        return None
    if set(_tables(select)) - {from_.this.alias_or_name.lower()} & set(_tables(inner)):
        return None  # an alias both use: `derived` names the join it refuses
    return from_.this


def _follows(join: exp.Join) -> bool:
    """Whether a join may follow a merged subquery's joins: one that drops or pads nothing of the rows
    before it that a filter of theirs would keep (INNER, LEFT, CROSS, LEFT SEMI/ANTI; not RIGHT, FULL,
    ASOF), so the subquery's WHERE can apply after it. A window table function stays unmerged."""
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    method = str(join.args.get("method") or "").upper()
    return side in ("", "LEFT") and kind in ("", "INNER", "OUTER", "CROSS", "SEMI", "ANTI") and not method \
        and window_call(join.this) is None


def _in_from(select: exp.Select) -> bool:
    """Whether `select` is a subquery in FROM or a join (a derived table), not the query or a subquery
    in its conditions."""
    sub = select.parent
    return isinstance(sub, exp.Subquery) and isinstance(sub.parent, (exp.From, exp.Join))


def _tables(select: exp.Select) -> dict[str, exp.Expression]:
    """A SELECT's tables in FROM and its joins, by alias."""
    from_ = from_clause(select)
    items = [from_.this] + [j.this for j in select.args.get("joins") or []]
    return {_name(t): t for t in items}


def _name(item: exp.Expression) -> str:
    return item_name(item).lower()


def _merge(select: exp.Select, sub: exp.Subquery, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Select:
    """`sub`'s SELECT with `select`'s columns, joins and WHERE over its columns."""
    inner = sub.this
    joins = select.args.get("joins") or []
    named = _Columns(inner, sub.alias_or_name, inputs, fail, beside={_name(j.this) for j in joins},
                     others={c for j in joins for c in _columns_of(j.this, inputs)})
    out: list[exp.Expression] = []
    for e in select.expressions:
        if isinstance(e, exp.Star):
            out += [x.copy() for x in inner.expressions]
            out += [exp.Column(this=exp.Star(), table=exp.to_identifier(item_name(j.this))) for j in joins
                    if emits_pairs(j)]
            continue
        if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) and e.table.lower() == named.alias:
            out += [x.copy() for x in inner.expressions]
            continue
        body = named.substituted(e.copy())
        if isinstance(e, exp.Column) and not (isinstance(body, exp.Column) and body.name.lower() == e.name.lower()):
            body = exp.alias_(body.this if isinstance(body, exp.Paren) else body, e.name)
        out.append(body)
    result = inner.copy()
    result.set("expressions", out)
    if joins:
        result.set("joins", (result.args.get("joins") or []) + [named.substituted(j.copy()) for j in joins])
    where = select.args.get("where")
    if where is not None:
        own = result.args.get("where")
        condition = named.substituted(where.this.copy())
        result.set("where", exp.Where(this=exp.and_(own.this, condition) if own else condition))
    return result


def _columns_of(item: exp.Expression, inputs: Mapping[str, InputSpec]) -> set[str]:
    """The lower-case column names of a table in FROM; empty when not known here."""
    return {c.lower() for c in item_columns(item, inputs) or []}


class _Columns:
    """The columns a subquery's SELECT makes, by name, for the query that reads it as `alias` beside
    the tables `beside`, whose columns are `others`."""

    def __init__(self, inner: exp.Select, alias: str, inputs: Mapping[str, InputSpec], fail: Fail,
                 beside: set[str] = frozenset(), others: set[str] = frozenset()) -> None:
        self.alias = alias.lower()
        self.beside = beside
        self.fail = fail
        self.inner = inner
        self.tables = _tables(inner)
        self.inputs = inputs
        self.others = others
        self.named = {e.alias_or_name.lower(): e for e in inner.expressions if e.alias_or_name}

    def substituted(self, tree: exp.Expression) -> exp.Expression:
        """`tree` with each reference to the subquery's columns replaced by what the column is."""
        for column in list(tree.find_all(exp.Column)):
            if isinstance(column.this, exp.Star):
                continue
            table = column.table.lower()
            nested = column.find_ancestor(exp.Select) is not None  # inside a subquery of `tree`: its own names first
            field = self.struct_field(column) if not nested else None
            if field is not None:
                column.replace(field)
                continue
            if table and table != self.alias and not nested and table not in self.beside:
                raise self.fail(f"'{column.sql('spark')}' names a table the query does not read (its FROM reads "
                                f"{self.alias or 'a subquery'}{''.join(', ' + b for b in sorted(self.beside))})", column)
            if table != self.alias and (table or nested):
                continue
            if not table and column.name.lower() in self.others:
                if column.name.lower() in self.named or self.starred_value(column) is not None:
                    raise self.fail(f"column '{column.name}' is a column of the subquery or common table expression "
                                    f"{self.alias} and of a table joined to it: qualify it", column)
                continue
            value = self.value(column)
            if column is tree:
                return value
            column.replace(value)
        return tree

    def struct_field(self, column: exp.Column) -> exp.Expression | None:
        """A field of one of the subquery's columns (`win.start`, `x.win.start`) over what the column is,
        or None when `column` is no such field."""
        if column.args.get("catalog"):
            return None
        db, table = column.text("db").lower(), column.table.lower()
        if not table or db not in ("", self.alias) or (not db and (table == self.alias or table in self.beside)):
            return None
        if table not in self.named and self.starred_value(exp.column(table)) is None:
            return None
        value = self.value(exp.column(column.table))
        if isinstance(value, exp.Column) and not value.args.get("db"):
            return exp.Column(this=column.this.copy(), table=value.this.copy(), db=value.args.get("table"))
        return exp.Dot(this=value, expression=column.this.copy())

    def value(self, column: exp.Column) -> exp.Expression:
        """What `column` of the subquery is, over the subquery's own tables."""
        found = self.named.get(column.name.lower())
        if found is not None:
            body = found.this if isinstance(found, exp.Alias) else found
            if isinstance(body, (exp.Column, exp.Literal, exp.Func, exp.Null, exp.Boolean, exp.Paren)):
                return body.copy()
            return exp.Paren(this=body.copy())
        value = self.starred_value(column)
        if value is not None:
            return value
        several = sum(column.name.lower() in _columns_of(self.tables[t], self.inputs) for t in self.starred()) > 1
        what = "more than one of its tables has" if several else "it does not select"
        raise self.fail(f"the subquery or common table expression{' ' + self.alias if self.alias else ''} is read for "
                        f"column '{column.name}', which {what}: name the columns it selects (with AS)", column)

    def starred_value(self, column: exp.Column) -> exp.Column | None:
        """`column` as the one column of that name that a star of the subquery selects, or None."""
        matches = [t for t in self.starred()
                   if t in self.tables and column.name.lower() in _columns_of(self.tables[t], self.inputs)]
        return exp.column(column.name, table=matches[0]) if len(matches) == 1 else None

    def starred(self) -> list[str]:
        """The aliases of the inner tables whose columns a star of the inner SELECT selects."""
        aliases: list[str] = []
        for e in self.inner.expressions:
            if isinstance(e, exp.Star):
                aliases += list(self.tables)
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                aliases.append(e.table.lower())
        return list(dict.fromkeys(aliases))
