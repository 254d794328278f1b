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


def side_and_kind(join: exp.Join) -> tuple[str, str] | None:
    """A join's side and kind, upper-case (`""` when not written); None for an ASOF join or one of a
    window table function."""
    if join.args.get("method") or window_call(join.this) is not None:
        return None
    return (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()


def inner_join(join: exp.Join) -> bool:
    """Whether a join is INNER or CROSS (not outer, semi/anti, ASOF, by USING or of a window table function)."""
    found = side_and_kind(join)
    return found is not None and not found[0] and found[1] in ("", "INNER", "CROSS") and not join.args.get("using")


def starred_items(select: exp.Select) -> list[exp.Expression]:
    """The tables whose columns a SELECT's `*` lists, in order: FROM's and those of its joins that emit
    pairs (`emits_pairs`), a parenthesized join's as `tables_in` lists them."""
    from_ = from_clause(select)
    joined = [j.this for j in select.args.get("joins") or [] if emits_pairs(j)]
    return [t for item in ([from_.this] if from_ else []) + joined for t in tables_in(item, paired=True)]


def parenthesized(item: exp.Expression) -> exp.Table | None:
    """The first table of a parenthesized join in FROM, `(b JOIN c ON ...)`, which holds the others as
    its joins (sqlglot's form); None for any other item."""
    first = item.this if isinstance(item, exp.Subquery) else None
    return first if isinstance(first, exp.Table) and first.args.get("joins") else None


def tables_in(item: exp.Expression, *, paired: bool = False) -> list[exp.Expression]:
    """The tables a FROM item reads, in order: a parenthesized join's (`parenthesized`; with `paired`,
    only those whose columns its rows carry, `emits_pairs`), or the item itself."""
    first = parenthesized(item)
    if first is None:
        return [item]
    joined = [j.this for j in first.args["joins"] if emits_pairs(j) or not paired]
    return [first] + [t for other in joined for t in tables_in(other, paired=paired)]


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
    items = [t for item in ([from_.this] if from_ else []) + [j.this for j in joins] for t in tables_in(item)]
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
