"""Name resolution: which input a column of the SQL reads, and its internal name in the plan.

A `Scope` holds the aliases one SELECT binds (`FROM orders o` binds `o`); a subquery's scope
has the enclosing one as its parent, so a correlated column resolves outwards. Resolved
expressions are rendered with every column replaced by its quoted internal name.

>>> import sqlglot
>>> from streamjoin.spec import InputSpec
>>> from streamjoin.errors import CompileError
>>> orders = InputSpec.from_dict("orders", {"columns": [["id", "int"], ["amount", "int"]]})
>>> scope = Scope(bindings={"o": Binding("o", orders, "o")})
>>> fail = lambda message, node=None: CompileError(message, model="m")
>>> scope.render(sqlglot.parse_one("o.amount > 1 AND id IS NOT NULL"), fail)
'`o__amount` > 1 AND NOT `o__id` IS NULL'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec
from .plan import internal_name

#: Builds the error for a message about a construct (the node, when given, locates it in the SQL).
Fail = Callable[..., CompileError]


@dataclass
class Binding:
    """An alias bound to an input (seen as `spec`), whose columns get internal names under `prefix`."""

    alias: str
    spec: InputSpec
    prefix: str

    def internal(self, column: str) -> str:
        return internal_name(self.prefix, column)


@dataclass
class Scope:
    """The aliases one SELECT binds, inside the scope of the query around it (`parent`)."""

    bindings: dict[str, Binding] = field(default_factory=dict)
    parent: Optional[Scope] = None
    # outer bindings shadowed by a subquery's own alias, under qualifiers only the compiler writes
    shadowed: dict[str, Binding] = field(default_factory=dict)
    # scopes further out that a nested subquery may not read, searched only to explain the error
    out_of_reach: Optional[Scope] = None

    def all_bindings(self) -> list[Binding]:
        return list(self.bindings.values())

    def resolve(self, col: exp.Column, fail: Fail) -> tuple[Binding, str]:
        """The binding `col` reads and the column's name as the input spells it (for a struct
        field `alias.column.field`, the column's)."""
        table = col.table
        if col.args.get("db"):  # alias.column.field
            col = exp.column(col.table, col.db)
            table = col.table
        s: Scope | None = self
        beyond: Scope | None = None
        while s is not None:
            beyond = s.out_of_reach or beyond
            if table:
                binding = s.bindings.get(table.lower()) or s.shadowed.get(table.lower())
                if binding is not None:
                    for name in binding.spec.column_names:
                        if name.lower() == col.name.lower():
                            return binding, name
                    raise fail(f"input '{binding.spec.name}' (alias {binding.alias}) has no column '{col.name}'", col)
            else:
                owners = [(b, n) for b in s.bindings.values() for n in b.spec.column_names if n.lower() == col.name.lower()]
                if len(owners) > 1:
                    names = ", ".join(b.alias for b, _ in owners)
                    raise fail(f"column '{col.name}' is ambiguous (in {names}); qualify it", col)
                if owners:
                    return owners[0]
            s = s.parent
        if beyond is not None and beyond.resolvable(col, fail):
            raise fail(f"column '{col.sql('spark')}' belongs to a query two or more levels out; a nested "
                       "subquery may correlate only with the subquery right around it", col)
        raise fail(f"unknown column '{col.sql('spark')}'", col)

    def resolvable(self, col: exp.Column, fail: Fail) -> bool:
        try:
            self.resolve(col, fail)
        except CompileError:
            return False
        return True

    def refs(self, e: exp.Expression, fail: Fail) -> set[str]:
        """Internal prefixes of the inputs an expression reads."""
        return {self.resolve(col, fail)[0].prefix.lower() for col in e.find_all(exp.Column)}

    def render(self, e: exp.Expression, fail: Fail, *, as_input_columns: bool = False) -> str:
        """Spark SQL text of `e` with every column replaced by its quoted internal name (or, for a
        derived table's expressions, by the input's own column name)."""
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column):
                binding, name = self.resolve(node, fail)
                column = exp.column(exp.to_identifier(name if as_input_columns else binding.internal(name), quoted=True))
                if node.args.get("db"):  # a field of a struct column
                    return exp.Dot(this=column, expression=exp.to_identifier(node.name, quoted=True))
                return column
            return node

        return e.copy().transform(swap).sql(dialect="spark")
