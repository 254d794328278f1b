"""Queries whose whole FROM is one subquery, merged into that subquery.

dbt's style guide ends a model with `SELECT * FROM final`, where `final` is a CTE that computes
columns of another CTE that joins (`joined`). A SELECT whose FROM is one subquery and nothing else
computes columns of that subquery's rows and filters them: it is the subquery itself with the
outer columns computed over its columns and the outer WHERE AND-ed to its own (both apply to the
same rows, after its joins). `merged` rewrites so, innermost first, every such SELECT over a
subquery that joins, and every derived table over another derived table (a chain of CTEs that
each compute columns of the one before becomes one derived table). A subquery that joins by INNER
or CROSS joins only and is INNER- or CROSS-joined later in FROM is flattened into the query: its
tables join where it did, each condition on the earliest of its joins that sees the tables the
condition reads (inner joins and filters commute). Outer, semi or anti joined instead, or first in FROM
before a RIGHT or FULL join, it is nested: a parenthesized join of its tables takes its place,
`a LEFT JOIN (b JOIN c ON ...) ON ...`, its WHERE on its own joins, and the outer join joins their rows.
A query over a subquery of one input stays as it is (`derived` binds it), and so does any other
subquery joined to another table (`derived` names what it refuses). A merged subquery's unqualified
columns are qualified with their table first, so that the tables joined beside it do not make them
ambiguous.
"""
from __future__ import annotations

from typing import Callable, Mapping

from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec
from .from_items import (emits_pairs, from_clause, inner_join, item_columns, item_name, side_and_kind, starred_items,
                         tables_in)
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
        for join in list(select.args.get("joins") or []):  # each on the query as flattening the ones before left it
            if inner_join(join) and _joined_subquery(select, join) and not _reads_time(select, join, inputs):
                _flatten(select, join, inputs, fail)
            elif _reads_nested(join) and _nests(select, join):
                padded = join.args["side"].upper() in ("LEFT", "FULL") and emits_pairs(join)
                _nest(select, join, inputs, fail, padded_by=join if padded else None)
        from_ = from_clause(select)
        padding = next((j for j in select.args.get("joins") or [] if _pads_left(j)), None)
        if padding is not None and _nests(select, from_):  # before a RIGHT or FULL join, which pads its rows
            _nest(select, from_, inputs, fail, padded_by=padding)
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
    found = side_and_kind(join)
    return found is not None and found[0] in ("", "LEFT") and found[1] in ("", "INNER", "OUTER", "CROSS", "SEMI", "ANTI")


def _reads_nested(join: exp.Join) -> bool:
    """Whether a join reads a joined subquery as a nested join (`_nest`): LEFT, RIGHT or FULL [OUTER], or
    LEFT SEMI/ANTI (not ASOF or of a window table function; INNER and CROSS joins flatten it)."""
    found = side_and_kind(join)
    return found is not None and found[0] in ("LEFT", "RIGHT", "FULL") and found[1] in ("", "OUTER", "SEMI", "ANTI") \
        and not join.args.get("using")


def _pads_left(join: exp.Join) -> bool:
    """Whether a join pads the rows before it with NULLs (RIGHT or FULL [OUTER])."""
    found = side_and_kind(join)
    return found is not None and found[0] in ("RIGHT", "FULL")


def _nests(select: exp.Select, holder: exp.Join | exp.From) -> bool:
    """Whether `_nest` may put the subquery `holder` reads in its place: a joined subquery
    (`_joined_subquery`) whose FROM is an input (it leads the parenthesized join); its joins may be
    outer joins too where it has no WHERE, or where the holder's ON can hold that WHERE (`_filters_right`)."""
    if not _joined_subquery(select, holder, outer=True):
        return False
    inner = holder.this.this
    placed = all(inner_join(j) for j in inner.args["joins"]) or not inner.args.get("where") or _filters_right(holder)
    return placed and isinstance(from_clause(inner).this, exp.Table)


def _filters_right(holder: exp.Join | exp.From) -> bool:
    """Whether a condition on the right side alone in `holder`'s ON filters that side's rows before the join
    (a LEFT, LEFT SEMI or LEFT ANTI join: `a LEFT JOIN x ON c AND w(x)` is `a LEFT JOIN (x WHERE w) ON c`)."""
    return isinstance(holder, exp.Join) and (holder.args.get("side") or "").upper() == "LEFT"


def _joined_subquery(select: exp.Select, holder: exp.Join | exp.From, *, outer: bool = False) -> bool:
    """Whether `holder` (a join, or FROM) reads a subquery that joins by INNER or CROSS joins alone (with
    `outer`, also by LEFT, RIGHT and FULL joins; never temporal ones), with aliases of its own: then
    `_flatten` may put its tables in its place where `holder` is an INNER or CROSS join (and no condition
    reads a time column, `_reads_time`), and `_nest` where it is an outer, semi or anti join, or FROM before
    a RIGHT or FULL join."""
    sub = holder.this
    if not (isinstance(sub, exp.Subquery) and isinstance(sub.this, exp.Select)):
        return False
    inner = sub.this
    inner_from = from_clause(inner)
    if inner_from is None or not inner.args.get("joins") or window_call(inner_from.this) is not None:
        return False
    allowed = (lambda j: inner_join(j) or (_reads_nested(j) and emits_pairs(j))) if outer else inner_join
    if not all(allowed(j) for j in inner.args["joins"]) or any(v for k, v in inner.args.items() if k not in _INNER):
        return False
    return not ((set(_tables(select)) - {_name(sub)}) & set(_tables(inner)) or inner.find(exp.Version) is not None)


def _reads_time(select: exp.Select, join: exp.Join, inputs: Mapping[str, InputSpec]) -> bool:
    """Whether a condition of `join`'s subquery, of `join` itself or of `select`'s WHERE reads a column
    named as some input's event or processing time. Flattening could make such a condition the bounds of
    an interval join between tables the query does not join directly, whose timing (rows dropped as late,
    results emitted on the watermark) differs from the regular join it was: such a subquery stays unmerged."""
    times = {t.lower() for spec in inputs.values() for t in (spec.event_time, spec.proc_time) if t}
    inner = join.this.this
    named = _named_columns(inner)
    alias = _name(join.this)
    conditions = [j.args.get("on") for j in inner.args["joins"]] + [inner.args.get("where"), join.args.get("on"),
                                                                     select.args.get("where")]
    for condition in filter(None, conditions):
        for column in condition.find_all(exp.Column):
            refers = column.table.lower() == alias or (not column.table and column.name.lower() in named)
            value = named.get(column.name.lower()) if refers else None
            names = {column.name.lower()} | ({c.name.lower() for c in value.find_all(exp.Column)} if value else set())
            if names & times:
                return True
    return False


def _flatten(select: exp.Select, join: exp.Join, inputs: Mapping[str, InputSpec], fail: Fail) -> None:
    """Put the tables of `join`'s subquery (`_joined_subquery`) into `select` in its place: its columns, the
    join's condition and the subquery's WHERE become expressions over those tables, and each condition
    goes to the earliest of their joins that sees every table it reads."""
    sub = join.this
    inner = _qualified(sub.this, inputs)  # a copy: its tables and conditions move into `select` as they are
    joins = select.args["joins"]
    at = next(i for i, j in enumerate(joins) if j is join)
    named = _subquery_columns(select, join, inner, inputs, fail)
    select.set("expressions", _columns_over(select, sub, named))
    on, where = join.args.get("on"), inner.args.get("where")
    conditions = ([named.substituted(on.copy())] if on is not None else []) + ([where.this] if where is not None else [])
    before = {_name(t) for item in [from_clause(select).this, *[j.this for j in joins[:at]]] for t in tables_in(item)}
    flat = _inner_joins(inner, conditions, before)
    rest = [named.substituted(j) for j in joins[:at] + joins[at + 1:]]
    select.set("joins", rest[:at] + flat + rest[at:])
    _substitute_where(select, named)


def _nest(select: exp.Select, holder: exp.Join | exp.From, inputs: Mapping[str, InputSpec], fail: Fail, *,
          padded_by: exp.Join | None) -> None:
    """Put the tables of the subquery `holder` reads (`_nests`; an outer join, or FROM before one) in its
    place as a parenthesized join, `LEFT JOIN (b JOIN c ON ...) ON ...`: the query's columns and
    conditions become expressions over those tables, and the subquery's WHERE goes into its own joins'
    conditions where they are INNER or CROSS (each on the earliest that sees every table it reads), else
    into the holder's ON (`_filters_right`).
    Where a join pads it with NULLs (`padded_by`), its columns must be its tables' columns: a computed
    one would not be NULL on a padded row."""
    sub = holder.this
    inner = _qualified(sub.this, inputs)
    named = _subquery_columns(select, holder, inner, inputs, fail)
    if padded_by is not None:
        side = padded_by.args["side"].upper()
        for name, e in named.named.items():
            if not isinstance(e.this if isinstance(e, exp.Alias) else e, (exp.Column, exp.Star)):
                raise fail(f"column '{name}' of {sub.alias_or_name} is computed, but the {side} JOIN pads "
                           f"{sub.alias_or_name} with NULLs where nothing matches, where a computed value need "
                           "not be NULL: select the columns it reads and compute it in the outer query", e)
    select.set("expressions", _columns_over(select, sub, named))
    on = holder.args.get("on")
    if on is not None:
        holder.set("on", named.substituted(on))
    where = inner.args.get("where")
    if where is not None and not all(inner_join(j) for j in inner.args["joins"]):  # `_filters_right`: in ON
        holder.set("on", exp.and_(holder.args["on"], where.this) if holder.args.get("on") else where.this)
        where = None
    if where is None:  # its joins as they are (outer ones too)
        table, joined = from_clause(inner).this, inner.args["joins"]
    else:
        first, *joined = _inner_joins(inner, [where.this], set())
        if first.args.get("on") is not None:  # conditions on the first table alone: the first join filters by them
            joined[0].set("on", exp.and_(*filter(None, [joined[0].args.get("on"), first.args["on"]])))
            joined[0].set("kind", None)
        table = first.this
    table.set("joins", joined)
    holder.set("this", exp.Subquery(this=table))
    select.set("joins", [named.substituted(j) if j is not holder else j for j in select.args["joins"]])
    _substitute_where(select, named)


def _subquery_columns(select: exp.Select, holder: exp.Join | exp.From, inner: exp.Select,
                      inputs: Mapping[str, InputSpec], fail: Fail) -> "_Columns":
    """The columns of the subquery `holder` reads (`inner`, qualified) for `select`, which reads it beside
    its other tables."""
    items = [from_clause(select).this] + [j.this for j in select.args["joins"]]
    beside = [t for item in items if item is not holder.this for t in tables_in(item)]
    return _Columns(inner, holder.this.alias_or_name, inputs, fail, beside={_name(t) for t in beside},
                    others={c for t in beside for c in _columns_of(t, inputs)})


def _inner_joins(inner: exp.Select, conditions: list[exp.Expression], before: set[str]) -> list[exp.Join]:
    """The tables of `inner`, a SELECT of INNER and CROSS joins, each as a join whose condition is its own ON
    and those of `conditions` (AND-ed parts) that the tables up to it, after the tables `before`, can
    evaluate first (one reading a column of no known table: the last). The first is a join too; its
    condition reads that table and `before`'s alone."""
    items = [from_clause(inner).this, *[j.this for j in inner.args["joins"]]]
    seen, steps = set(before), []
    for item in items:
        seen.add(_name(item))
        steps.append(set(seen))
    placed: list[list[exp.Expression]] = [[] for _ in items]
    for condition in conditions:
        for part in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            columns = [c for c in part.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
            reads = {c.table.lower() for c in columns}
            known = all(c.table for c in columns)
            placed[next((i for i, s in enumerate(steps) if known and reads <= s), len(items) - 1)].append(part)
    out = []
    for i, item in enumerate(items):
        on = inner.args["joins"][i - 1].args.get("on") if i else None
        parts = ([on] if on is not None else []) + placed[i]
        out.append(exp.Join(this=item, on=exp.and_(*parts)) if parts else exp.Join(this=item, kind="CROSS"))
    return out


def _substitute_where(select: exp.Select, named: "_Columns") -> None:
    """`select`'s WHERE over what the columns of a subquery it no longer reads are."""
    outer = select.args.get("where")
    if outer is not None:
        select.set("where", exp.Where(this=named.substituted(outer.this)))


def _qualified(inner: exp.Select, inputs: Mapping[str, InputSpec]) -> exp.Select:
    """A copy of `inner` whose unqualified columns name the one table of its own that has them (so that
    tables joined beside it after a merge leave them unambiguous); columns of no known table stay as
    they are."""
    inner = inner.copy()
    owners: dict[str, list[str]] = {}
    for item in _tables(inner).values():
        for c in _columns_of(item, inputs):
            owners.setdefault(c, []).append(item_name(item))
    for column in list(inner.find_all(exp.Column)):
        if column.table or isinstance(column.this, exp.Star) or column.find_ancestor(exp.Select) is not inner:
            continue
        tables = owners.get(column.name.lower(), [])
        if len(tables) == 1:
            column.set("table", exp.to_identifier(tables[0]))
    return inner


def _named_columns(select: exp.Select) -> dict[str, exp.Expression]:
    """A SELECT's columns that have a name, by lower-case name."""
    return {e.alias_or_name.lower(): e for e in select.expressions if e.alias_or_name}


def _in_from(select: exp.Select) -> bool:
    """Whether `select` is a subquery in FROM or a join (a derived table), not the query or a subquery
    in its conditions."""
    sub = select.parent
    return isinstance(sub, exp.Subquery) and isinstance(sub.parent, (exp.From, exp.Join))


def _tables(select: exp.Select) -> dict[str, exp.Expression]:
    """A SELECT's tables in FROM and its joins (those of a parenthesized join too), by alias."""
    from_ = from_clause(select)
    items = [from_.this] + [j.this for j in select.args.get("joins") or []]
    return {_name(t): t for item in items for t in tables_in(item)}


def _name(item: exp.Expression) -> str:
    return item_name(item).lower()


def _merge(select: exp.Select, sub: exp.Subquery, inputs: Mapping[str, InputSpec], fail: Fail) -> exp.Select:
    """`sub`'s SELECT with `select`'s columns, joins and WHERE over its columns."""
    joins = select.args.get("joins") or []
    inner = _qualified(sub.this, inputs) if joins else sub.this
    named = _Columns(inner, sub.alias_or_name, inputs, fail, beside={_name(j.this) for j in joins},
                     others={c for j in joins for c in _columns_of(j.this, inputs)})
    result = inner.copy()
    result.set("expressions", _columns_over(select, sub, named))
    if joins:
        result.set("joins", (result.args.get("joins") or []) + [named.substituted(j.copy()) for j in joins])
    where = select.args.get("where")
    if where is not None:
        own = result.args.get("where")
        condition = named.substituted(where.this.copy())
        result.set("where", exp.Where(this=exp.and_(own.this, condition) if own else condition))
    return result


def _columns_over(select: exp.Select, sub: exp.Subquery, named: "_Columns") -> list[exp.Expression]:
    """`select`'s columns over the columns of its subquery `sub` (`named`): stars expanded where they
    read `sub`, references to `sub`'s columns replaced by what they are, named as before."""
    out: list[exp.Expression] = []
    for e in select.expressions:
        if isinstance(e, exp.Star):
            for item in starred_items(select):
                out += _own_columns(named.inner) if item is sub else [_star_of(item)]
            continue
        if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) and e.table.lower() == named.alias:
            out += _own_columns(named.inner)
            continue
        body = named.substituted(e.copy())
        if isinstance(e, exp.Column) and not (isinstance(body, exp.Column) and body.name.lower() == e.name.lower()):
            body = exp.alias_(body.this if isinstance(body, exp.Paren) else body, e.name)
        out.append(body)
    return out


def _own_columns(inner: exp.Select) -> list[exp.Expression]:
    """A subquery's columns, to select in the query it is merged into: its own `*` stands for the tables
    of its own (not those the query joins beside it)."""
    return [c for e in inner.expressions
            for c in ([_star_of(t) for t in starred_items(inner)] if isinstance(e, exp.Star) else [e.copy()])]


def _star_of(item: exp.Expression) -> exp.Column:
    """`t.*` for a table in FROM."""
    return exp.Column(this=exp.Star(), table=exp.to_identifier(item_name(item)))


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
        self.named = _named_columns(inner)

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
