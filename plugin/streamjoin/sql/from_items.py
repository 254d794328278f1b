"""What a table in FROM is to the query around it, before it is bound: its name and its columns."""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from ..spec import InputSpec
from .plan import Windowing
from .windows import window_call


def from_clause(select: exp.Select) -> exp.From | None:
    """A SELECT's FROM clause (sqlglot names its argument `from_` or, in older releases, `from`)."""
    return select.args.get("from_") or select.args.get("from")


def emits_pairs(join: exp.Join) -> bool:
    """Whether a join's rows carry the columns of the table it joins (not a semi or anti join)."""
    return (join.args.get("kind") or "").upper() not in ("SEMI", "ANTI")


def starred_items(select: exp.Select) -> list[exp.Expression]:
    """The tables whose columns a SELECT's `*` lists, in order: FROM's and those of its joins that emit
    pairs (`emits_pairs`)."""
    from_ = from_clause(select)
    joined = [j.this for j in select.args.get("joins") or [] if emits_pairs(j)]
    return ([from_.this] if from_ else []) + joined


def item_name(item: exp.Expression) -> str:
    """The name a table in FROM goes by: its alias, its name, or (a window table function without an
    alias) the name of the input it reads."""
    windowed = _window_input(item)
    return windowed.name if windowed is not None and not item.alias else item.alias_or_name


def _window_input(item: exp.Expression) -> exp.Expression | None:
    """The input a window table function in FROM reads, as it names it (None: no such function, or
    arguments the compiler will refuse)."""
    call = window_call(item)
    first = call.expressions[0] if call is not None and call.expressions else None
    return first if isinstance(first, (exp.Column, exp.Table)) else None


def input_named(table: exp.Table, inputs: Mapping[str, InputSpec]) -> InputSpec | None:
    """The input a table reference names (`inputs` by lower-case name): by its name, or by all its parts
    (`schema.table`), or None."""
    return inputs.get(table.name.lower()) or inputs.get(".".join(p.name for p in table.parts).lower())


def item_columns(item: exp.Expression, inputs: Mapping[str, InputSpec]) -> list[str] | None:
    """A table's column names in order: an input's (`inputs`, by lower-case name), a window table
    function's (its input's, then the window's), or a subquery's (`select_columns`); None when they
    are not known here (the compiler checks such a table when it binds it)."""
    if window_call(item) is not None:
        windowed = _window_input(item)
        spec = input_named(exp.to_table(windowed.sql("spark")), inputs) if windowed is not None else None
        return [*spec.column_names, *Windowing.COLUMNS] if spec else None
    if isinstance(item, exp.Table):
        spec = input_named(item, inputs)
        return list(spec.column_names) if spec else None
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select):
        return select_columns(item.this, inputs)
    return None


def select_columns(select: exp.Select, inputs: Mapping[str, InputSpec]) -> list[str] | None:
    """A SELECT's column names in order, its stars expanded; None when one is not known here."""
    from_ = from_clause(select)
    joins = select.args.get("joins") or []
    items = ([from_.this] if from_ else []) + [j.this for j in joins]
    paired = starred_items(select)
    names: list[str] = []
    for e in select.expressions:
        starred = paired if isinstance(e, exp.Star) else \
            [t for t in items if item_name(t).lower() == e.table.lower()] \
            if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) else None
        if starred is None:
            if not e.alias_or_name:
                return None
            names.append(e.alias_or_name)
            continue
        for t in starred:
            found = item_columns(t, inputs)
            if found is None:
                return None
            names += found
    return names
