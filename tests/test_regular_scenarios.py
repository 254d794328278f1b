"""Scenarios that read like the semantics of Flink's regular joins, one run per step."""
from __future__ import annotations

import pytest

from scenario import Scenario, delete, insert, update_after, update_before

ORDERS = [("order_id", "int"), ("item", "string")]
PRICES = [("order_id", "int"), ("price", "int")]


def model(spark, tmp_path, join: str, **kwargs) -> Scenario:
    sql = f"SELECT o.order_id, o.item, p.price FROM orders o {join} prices p ON o.order_id = p.order_id"
    return Scenario(spark, tmp_path, sql, orders=ORDERS, prices=PRICES, **kwargs)


def test_inner_join_emits_pairs_and_retracts_them(spark, tmp_path):
    m = model(spark, tmp_path, "JOIN")
    assert m.run(orders=[insert(1, "book")]).changelog == {}
    assert m.run(prices=[insert(1, 40)]).changelog == {(1, "book", 40): 1}
    assert m.run(orders=[delete(1, "book")]).changelog == {(1, "book", 40): -1}
    assert m.result == {}


def test_left_join_pads_then_replaces_the_padded_row(spark, tmp_path):
    m = model(spark, tmp_path, "LEFT JOIN")
    assert m.run(orders=[insert(1, "book")]).changelog == {(1, "book", None): 1}
    assert m.run(prices=[insert(1, 40)]).changelog == {(1, "book", None): -1, (1, "book", 40): 1}
    assert m.run(prices=[insert(1, 41)]).changelog == {(1, "book", 41): 1}  # degree 1 -> 2: no padding change
    assert m.run(prices=[delete(1, 40)]).changelog == {(1, "book", 40): -1}
    assert m.run(prices=[delete(1, 41)]).changelog == {(1, "book", 41): -1, (1, "book", None): 1}


def test_right_and_full_joins_pad_either_side(spark, tmp_path):
    m = model(spark, tmp_path, "FULL OUTER JOIN")
    assert m.run(prices=[insert(3, 80)]).changelog == {(None, None, 80): 1}
    assert m.run(orders=[insert(3, "pen"), insert(4, "ink")]).changelog == {
        (None, None, 80): -1, (3, "pen", 80): 1, (4, "ink", None): 1}
    r = Scenario(spark, tmp_path / "r", "SELECT o.item, p.price FROM orders o RIGHT JOIN prices p ON o.order_id = p.order_id",
                 orders=ORDERS, prices=PRICES)
    assert r.run(prices=[insert(3, 80)], orders=[insert(9, "x")]).changelog == {(None, 80): 1}


def test_identical_rows_are_counted(spark, tmp_path):
    m = model(spark, tmp_path, "JOIN")
    m.run(orders=[insert(1, "book"), insert(1, "book")], prices=[insert(1, 40)])
    assert m.result == {(1, "book", 40): 2}
    assert m.run(orders=[delete(1, "book")]).changelog == {(1, "book", 40): -1}
    assert m.result == {(1, "book", 40): 1}


def test_update_is_a_retraction_and_an_insertion(spark, tmp_path):
    m = model(spark, tmp_path, "JOIN", config={"output_unique_key": ["order_id"]})
    m.run(orders=[insert(1, "book")], prices=[insert(1, 40)])
    m.run(prices=[update_before(1, 40), update_after(1, 45)])
    assert m.row_kinds == [("+U", (1, "book", 45)), ("-U", (1, "book", 40))]


def test_changes_within_one_run_are_netted(spark, tmp_path):
    m = model(spark, tmp_path, "LEFT JOIN")
    assert m.run(orders=[insert(1, "book"), delete(1, "book")], prices=[insert(1, 1)]).changelog == {}


def test_null_keys_never_match_but_are_padded_on_the_preserved_side(spark, tmp_path):
    m = model(spark, tmp_path, "LEFT JOIN")
    m.run(orders=[insert(None, "lost")], prices=[insert(None, 5)])
    assert m.result == {(None, "lost", None): 1}
    assert m.run(orders=[delete(None, "lost")]).changelog == {(None, "lost", None): -1}


def test_null_safe_keys_match_nulls(spark, tmp_path):
    m = Scenario(spark, tmp_path, "SELECT o.item, p.price FROM orders o JOIN prices p ON o.order_id <=> p.order_id",
                 orders=ORDERS, prices=PRICES)
    assert m.run(orders=[insert(None, "lost")], prices=[insert(None, 5)]).changelog == {("lost", 5): 1}


def test_residual_predicate_decides_the_padding(spark, tmp_path):
    m = Scenario(spark, tmp_path, "SELECT o.item, p.price FROM orders o LEFT JOIN prices p "
                 "ON o.order_id = p.order_id AND p.price > 10", orders=ORDERS, prices=PRICES)
    m.run(orders=[insert(1, "book")], prices=[insert(1, 5)])
    assert m.result == {("book", None): 1}
    assert m.run(prices=[insert(1, 50)]).changelog == {("book", None): -1, ("book", 50): 1}


@pytest.mark.parametrize("where, first, after_match", [
    ("EXISTS (SELECT 1 FROM prices p WHERE p.order_id = o.order_id)", {}, {(1, "book"): 1}),
    ("NOT EXISTS (SELECT 1 FROM prices p WHERE p.order_id = o.order_id)", {(1, "book"): 1}, {(1, "book"): -1}),
])
def test_semi_and_anti_joins_follow_the_first_and_last_match(spark, tmp_path, where, first, after_match):
    m = Scenario(spark, tmp_path, f"SELECT o.order_id, o.item FROM orders o WHERE {where}", orders=ORDERS, prices=PRICES)
    assert m.run(orders=[insert(1, "book")]).changelog == first
    assert m.run(prices=[insert(1, 1)]).changelog == after_match
    assert m.run(prices=[insert(1, 2)]).changelog == {}  # a second match changes nothing
    assert m.run(prices=[delete(1, 1), delete(1, 2)]).changelog == {k: -v for k, v in after_match.items()}


def test_not_in_with_nulls_follows_sql(spark, tmp_path):
    m = Scenario(spark, tmp_path, "SELECT o.order_id, o.item FROM orders o WHERE o.order_id NOT IN "
                 "(SELECT p.order_id FROM prices p)", orders=ORDERS, prices=PRICES)
    m.run(orders=[insert(1, "a"), insert(None, "n")])
    assert m.result == {(1, "a"): 1, (None, "n"): 1}  # empty subquery: every row passes, NULL too
    m.run(prices=[insert(2, 0)])
    assert m.result == {(1, "a"): 1}  # NULL NOT IN (2) is unknown
    m.run(prices=[insert(None, 0)])
    assert m.result == {}  # 1 NOT IN (2, NULL) is unknown
    m.run(prices=[delete(None, 0), delete(2, 0)])
    assert m.result == {(1, "a"): 1, (None, "n"): 1}


def test_a_derived_table_does_not_keep_a_unique_key_its_columns_break(spark, tmp_path):
    """`orders` declares order_id unique; the derived table maps orders 1 and 2 to key 2, so it has
    two live rows for one key: legal, as Spark's batch result has them too."""
    sql = ("SELECT o.order_id, o.item, p.price FROM (SELECT IF(order_id = 1, 2, order_id) AS order_id, item FROM orders) o "
           "JOIN prices p ON o.order_id = p.order_id")
    m = Scenario(spark, tmp_path, sql, orders=ORDERS, prices=PRICES, unique_keys={"orders": ["order_id"]})
    assert m.run(orders=[insert(1, "book"), insert(2, "pen")], prices=[insert(2, 40)]).changelog == {
        (2, "book", 40): 1, (2, "pen", 40): 1}
    assert m.run(orders=[update_before(1, "book"), update_after(1, "ink")]).changelog == {
        (2, "book", 40): -1, (2, "ink", 40): 1}
