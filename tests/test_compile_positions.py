"""Compile errors point at the line and column of the model's SQL as written (no Spark needed).

`compile_model` renames the relations a model reads (`shop.orders`) to input names before
compiling; the renaming keeps every other token where it was, so a multi-line model's error
names the line and column an editor shows.
"""
from __future__ import annotations

import pytest

from streamjoin.api import compile_model, rename_relations
from streamjoin.errors import CompileError

INPUTS = {
    "orders": {"relation": "shop.orders", "location": "/nonexistent/orders",
               "columns": [["id", "int"], ["amount", "int"]]},
    "prices": {"relation": "shop.prices", "location": "/nonexistent/prices",
               "columns": [["id", "int"], ["price", "int"]]},
}
RELATIONS = {name: raw["relation"] for name, raw in INPUTS.items()}


def error(sql: str) -> str:
    with pytest.raises(CompileError) as err:
        compile_model(name="m", sql=sql, inputs=INPUTS, config={})
    return str(err.value)


def position(sql: str, text: str, occurrence: int = 1) -> str:
    """' at line L, column C' of the `occurrence`-th `text` in `sql`, counted as an editor does."""
    offset = -1
    for _ in range(occurrence):
        offset = sql.index(text, offset + 1)
    line = sql.count("\n", 0, offset) + 1
    return f" at line {line}, column {offset - sql.rfind(chr(10), 0, offset)}"


def test_group_by_on_line_5_is_reported_on_line_5():
    sql = ("SELECT o.id,\n"
           "       sum(p.price) AS total\n"
           "FROM shop.orders o\n"
           "JOIN shop.prices p ON o.id = p.id\n"
           "GROUP BY o.id")
    message = error(sql)
    assert "GROUP BY is not supported in a streaming join at line 5, column 10" in message, message
    assert position(sql, "o.id", 3) == " at line 5, column 10"


def test_a_column_after_a_renamed_relation_keeps_its_column():
    sql = ("SELECT o.id, p.price\n"
           "FROM shop.orders o JOIN `shop`.`prices` p ON o.id = p.nope")
    message = error(sql)
    assert f"input 'prices' (alias p) has no column 'nope'{position(sql, 'p.nope')}" in message, message
    assert position(sql, "p.nope") == " at line 2, column 53"


def test_a_window_function_and_a_subquery_are_located_as_written():
    sql = ("SELECT o.id,\n"
           "  row_number() OVER (PARTITION BY o.amount ORDER BY o.id) AS n\n"
           "FROM shop.orders o")
    assert "window function ROW_NUMBER() is not supported at line 2, column 3" in error(sql)
    sql = ("SELECT o.id\n"
           "FROM shop.orders o\n"
           "WHERE EXISTS (\n"
           "    SELECT 1 FROM shop.prices p LEFT JOIN shop.orders o2 ON p.id = o2.id\n"
           "    WHERE p.price > o.amount)")
    message = error(sql)  # the join's first positioned token: the table it joins
    assert "may join its inputs by INNER or CROSS joins only at line 4, column 43" in message, message


def test_lines_of_a_dbt_compiled_body_are_the_model_files():
    """dbt renders `{{ config(...) }}` to nothing and `{{ source(...) }}` to `schema.table` on one
    line: the compiled body keeps the model file's lines (the first one empty here)."""
    compiled = ("\n"
                "-- Every order, with its price\n"
                "select o.id, p.price\n"
                "from shop.orders as o\n"
                "left join shop.prices as p on o.id = p.id\n"
                "order by o.id\n")
    assert "ORDER BY is not supported in a streaming join at line 6, column 10" in error(compiled)


def test_renaming_changes_only_the_relation_tokens():
    sql = ("SELECT o.id, p.price -- shop.orders in a comment stays\n"
           "FROM shop.orders AS o\n"
           "  JOIN `shop`.`prices` p\n"
           "    ON o.id = p.id WHERE o.id IN (SELECT id FROM shop.prices)")
    renamed = rename_relations("m", sql, RELATIONS)
    assert renamed == ("SELECT o.id, p.price -- shop.orders in a comment stays\n"
                       "FROM orders      AS o\n"
                       "  JOIN prices          p\n"
                       "    ON o.id = p.id WHERE o.id IN (SELECT id FROM prices     )")
    assert [len(line) for line in renamed.splitlines()] == [len(line) for line in sql.splitlines()]


def test_an_input_named_like_its_relation_is_left_as_written():
    sql = "SELECT o.id FROM orders o"
    assert rename_relations("m", sql, {"orders": "orders"}) == sql
