"""Where a construct stands in a model's SQL, for error messages: the line and column of its
first token in the SQL text as written (1-based, the column counted in characters as an
editor counts them).

Positions come from the offsets sqlglot's tokenizer records on names and literals, so a
construct is located by the first of those (`GROUP BY l.k` by `l`, `EXISTS (SELECT 1 ...)` by
`1`); a node the compiler built itself has no position.
"""
from __future__ import annotations

from sqlglot import exp


def located(node: exp.Expression, sql: str) -> str:
    """' at line L, column C' for the first positioned token of `node` in `sql`, or '' if it has none.

    >>> import sqlglot
    >>> sql = "SELECT a.x\\nFROM t a\\n  GROUP BY a.x, b"
    >>> located(sqlglot.parse_one(sql, read="spark").args["group"], sql)
    ' at line 3, column 12'
    >>> located(sqlglot.exp.column("x", "a"), sql)
    ''
    """
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    if not starts:
        return ""
    line, column = line_and_column(sql, min(starts))
    return f" at line {line}, column {column}"


def line_and_column(sql: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of the character at `offset` in `sql`.

    >>> line_and_column("ab\\ncd", 4)
    (2, 2)
    """
    return sql.count("\n", 0, offset) + 1, offset - sql.rfind("\n", 0, offset)
