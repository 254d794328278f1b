"""What a table in FROM is to the query around it, before it is bound: its name and its columns."""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from ..spec import InputSpec
from .plan import Windowing
from .windows import window_call


def item_name(item: exp.Expression) -> str:
    """The name a table in FROM goes by: its alias, its name, or (a window table function without an
    alias) the name of the input it reads."""
    call = window_call(item)
    first = call.expressions[0] if call is not None and call.expressions else None
    if isinstance(first, (exp.Column, exp.Table)) and not item.alias:
        return first.name
    return item.alias_or_name


def input_named(table: exp.Table, inputs: Mapping[str, InputSpec]) -> InputSpec | None:
    """The input a table reference names (`inputs` by lower-case name): by its name, or by all its parts
    (`schema.table`), or None."""
    return inputs.get(table.name.lower()) or inputs.get(".".join(p.name for p in table.parts).lower())


def item_columns(item: exp.Expression, inputs: Mapping[str, InputSpec]) -> list[str] | None:
    """A table's column names in order: an input's (`inputs`, by lower-case name), a window table
    function's (its input's, then the window's), or a subquery's that names each column; None when
    they are not known here (the compiler checks such a table when it binds it)."""
    call = window_call(item)
    if call is not None:
        first = call.expressions[0] if call.expressions else None
        spec = input_named(exp.to_table(first.sql("spark")), inputs) if isinstance(first, (exp.Column, exp.Table)) else None
        return [*spec.column_names, *Windowing.COLUMNS] if spec else None
    if isinstance(item, exp.Table):
        spec = input_named(item, inputs)
        return list(spec.column_names) if spec else None
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select) and \
            all(e.alias_or_name and not isinstance(e, exp.Star) for e in item.this.expressions):
        return [e.alias_or_name for e in item.this.expressions]
    return None
