"""The SQL compiler: plans for the supported subset, and clear errors naming everything else."""
from __future__ import annotations

import doctest

import pytest

from streamjoin import CompileError, InputSpec, ModelConfig, compile_sql
from streamjoin.runtime.plan_change import plan_fingerprint
from streamjoin.sql import ctes, merged, using
from streamjoin.sql import plan as plan_module
from streamjoin.sql.plan import Join, Scan
from streamjoin.types import JoinType

INPUTS = {
    "orders": InputSpec.from_dict("orders", {"columns": [["id", "int"], ["cust", "int"], ["amount", "int"], ["ts", "timestamp"]],
                                             "event_time": "ts"}),
    "prices": InputSpec.from_dict("prices", {"columns": [["id", "int"], ["price", "int"]]}),
    "ships": InputSpec.from_dict("ships", {"columns": [["order_id", "int"], ["ship_ts", "timestamp"]], "event_time": "ship_ts"}),
}


def plan(sql: str, **config):
    return compile_sql("m", sql, INPUTS, ModelConfig.from_dict(config))


def planned_as(sql: str, spelled_out: str):
    """The plan of `sql`, asserted the same as that of the query it stands for, `spelled_out`."""
    compiled = plan(sql)
    assert compiled.explain() == plan(spelled_out).explain()
    return compiled


def fails(sql: str, *fragments: str) -> str:
    with pytest.raises(CompileError) as err:
        plan(sql)
    message = str(err.value)
    assert "model 'm'" in message
    for f in fragments:
        assert f in message, message
    return message


def test_left_join_plan_keys_and_outputs():
    p = plan("SELECT o.id, p.price AS cost FROM orders o LEFT JOIN prices p ON o.id = p.id")
    assert isinstance(p.root, Join) and p.root.join_type is JoinType.LEFT
    assert [(k.left, k.right, k.null_safe) for k in p.root.keys] == [("`o__id`", "`p__id`", False)]
    assert p.output_names == ["id", "cost"]


def test_inputs_are_listed_in_the_order_the_query_reads_them_whatever_order_declared_them():
    """dbt hands a model's inputs in an order that may differ between processes; a run's report lists them
    in this order (`changes in: ...`), so it follows the query."""
    declared = {name: INPUTS[name] for name in ("ships", "prices", "orders")}
    sql = "SELECT o.id FROM prices p JOIN orders o ON o.id = p.id JOIN ships s ON s.order_id = o.id"
    assert list(compile_sql("m", sql, declared).inputs) == ["prices", "orders", "ships"]
    reversed_sql = "SELECT o.id FROM orders o JOIN prices p ON o.id = p.id"  # an input declared but not read comes last
    assert list(compile_sql("m", reversed_sql, declared).inputs) == ["orders", "prices", "ships"]


def test_reversed_equality_and_null_safe_keys():
    p = plan("SELECT o.id FROM orders o JOIN prices p ON p.id <=> o.id")
    assert [(k.left, k.right, k.null_safe) for k in p.root.keys] == [("`o__id`", "`p__id`", True)]
    p = plan("SELECT o.id FROM orders o JOIN prices p ON o.id IS NOT DISTINCT FROM p.id")
    assert p.root.keys[0].null_safe


def test_residual_predicate_stays_in_the_join():
    p = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id AND o.amount > p.price")
    assert p.root.residual == "`o__amount` > `p__price`"


def test_flinks_null_safe_pattern_is_a_null_safe_key():
    p = plan("SELECT o.id FROM orders o FULL JOIN prices p ON (o.id = p.id OR (p.id IS NULL AND o.id IS NULL)) AND o.amount > 1")
    assert [(k.left, k.right, k.null_safe) for k in p.root.keys] == [("`o__id`", "`p__id`", True)]
    assert p.root.residual == "`o__amount` > 1"


def test_the_null_safe_pattern_with_a_further_condition_keeps_it():
    """`a = b OR (a IS NULL AND b IS NULL AND c)` is not `a <=> b`: it is a residual, `c` included."""
    p = plan("SELECT o.id FROM orders o JOIN prices p ON o.id = p.id "
             "AND (o.cust = p.price OR (o.cust IS NULL AND p.price IS NULL AND o.amount > 1))")
    assert [(k.left, k.right, k.null_safe) for k in p.root.keys] == [("`o__id`", "`p__id`", False)]
    assert p.root.residual == "`o__cust` = `p__price` OR (`o__cust` IS NULL AND `p__price` IS NULL AND `o__amount` > 1)"


def test_correlated_not_in_is_an_anti_join_with_sqls_null_rule():
    """x NOT IN (S) holds when no s in S has x = s OR x IS NULL OR s IS NULL."""
    p = plan("SELECT o.id FROM orders o WHERE o.amount NOT IN (SELECT price FROM prices WHERE prices.id = o.id)")
    assert p.root.join_type is JoinType.ANTI and not p.root.null_aware
    assert [(k.left, k.right) for k in p.root.keys] == [("`o__id`", "`prices__id`")]
    assert p.root.residual == "`o__amount` = `prices__price` OR `o__amount` IS NULL OR `prices__price` IS NULL"


def test_subquery_forms_become_semi_and_anti_joins():
    row_in = plan("SELECT o.id FROM orders o WHERE (o.id, o.amount) IN (SELECT DISTINCT id, price FROM prices)").root
    assert row_in.join_type is JoinType.SEMI and [k.right for k in row_in.keys] == ["`prices__id`", "`prices__price`"]
    nested = plan("SELECT o.id FROM orders o WHERE o.id IN (SELECT id FROM prices WHERE price IN (SELECT order_id FROM ships))").root
    assert nested.join_type is JoinType.SEMI and nested.right.join_type is JoinType.SEMI
    assert [k.right for k in nested.right.keys] == ["`ships__order_id`"]
    own = plan("SELECT id FROM orders WHERE id NOT IN (SELECT id FROM orders WHERE amount > 3)").root
    assert own.null_aware and [(k.left, k.right) for k in own.keys] == [("`orders__id`", "`orders2__id`")]
    assert own.right.filters == ("`orders2__amount` > 3",)


def test_a_derived_table_is_a_scan_with_computed_columns():
    p = plan("SELECT o.k, p.price FROM (SELECT IF(id = 3, NULL, id) AS k, ts FROM orders WHERE amount > 0) o "
             "JOIN prices p ON o.k = p.id")
    scan = p.root.left
    assert scan.derived and scan.columns == (("k", "o__k"), ("ts", "o__ts"))
    assert scan.sources == ("IF(`id` = 3, NULL, `id`)", "`ts`") and scan.source_filters == ("`amount` > 0",)
    interval = plan("SELECT o.id FROM (SELECT id, ts FROM orders) o JOIN ships s ON o.id = s.order_id "
                    "AND s.ship_ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR").root
    assert interval.time_bound is not None  # the event time passes through as it is


def test_on_predicate_on_the_null_padded_side_is_pushed_below_the_join():
    p = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id AND p.price > 10")
    assert p.root.right.filters == ("`p__price` > 10",) and p.root.residual is None


def test_on_predicate_on_the_preserved_side_is_not_pushed():
    p = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id AND o.amount > 10")
    assert p.root.left.filters == () and p.root.residual == "`o__amount` > 10"


def test_where_on_preserved_side_is_pushed_and_on_padded_side_is_kept_after_the_join():
    p = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id WHERE o.amount > 1 AND p.price = 3")
    assert p.root.left.filters == ("`o__amount` > 1",)
    assert p.root.right.filters == ()
    assert p.filters == ("`p__price` = 3",)


def test_full_join_pushes_nothing():
    p = plan("SELECT o.id FROM orders o FULL JOIN prices p ON o.id = p.id WHERE o.amount > 1")
    assert p.root.left.filters == () and p.filters == ("`o__amount` > 1",)


def test_comma_join_takes_its_keys_from_where():
    p = plan("SELECT o.id FROM orders o, prices p WHERE o.id = p.id AND p.price > 2")
    assert p.root.join_type is JoinType.INNER and p.root.keys[0].right == "`p__id`"
    assert p.root.right.filters == ("`p__price` > 2",)


@pytest.mark.parametrize("sql, join_type, null_aware", [
    ("SELECT id FROM orders WHERE id IN (SELECT id FROM prices)", JoinType.SEMI, False),
    ("SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM prices p WHERE p.id = o.id AND p.price > o.amount)", JoinType.SEMI, False),
    ("SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM prices p WHERE p.id = o.id)", JoinType.ANTI, False),
    ("SELECT o.id FROM orders o WHERE o.id NOT IN (SELECT p.id FROM prices p)", JoinType.ANTI, True),
    ("SELECT o.id FROM orders o LEFT SEMI JOIN prices p ON o.id = p.id", JoinType.SEMI, False),
    ("SELECT o.id FROM orders o LEFT ANTI JOIN prices p ON o.id = p.id", JoinType.ANTI, False),
])
def test_subqueries_and_semi_anti_joins(sql, join_type, null_aware):
    p = plan(sql)
    assert p.root.join_type is join_type and p.root.null_aware is null_aware
    assert isinstance(p.root.right, Scan) and p.root.right.input == "prices"


def test_star_expands_visible_inputs_only():
    assert plan("SELECT * FROM orders o LEFT SEMI JOIN prices p ON o.id = p.id").output_names == ["id", "cust", "amount", "ts"]
    assert plan("SELECT p.* FROM orders o JOIN prices p ON o.id = p.id").output_names == ["id", "price"]


def test_interval_join_is_recognised():
    p = plan("SELECT o.id FROM orders o JOIN ships s ON o.id = s.order_id "
             "AND o.ts BETWEEN s.ship_ts - INTERVAL '4' HOUR AND s.ship_ts")
    bound = p.root.time_bound
    assert bound is not None and bound.lower.total_seconds() == -4 * 3600 and bound.upper.total_seconds() == 0
    assert p.root.residual is None


@pytest.mark.parametrize("sql, fragments", [
    ("SELECT o.id, count(*) FROM orders o JOIN prices p ON o.id = p.id GROUP BY o.id", ["GROUP BY"]),
    ("SELECT DISTINCT o.id FROM orders o JOIN prices p ON o.id = p.id", ["DISTINCT"]),
    ("SELECT o.id FROM orders o JOIN prices p ON o.id = p.id ORDER BY o.id", ["ORDER BY"]),
    ("SELECT o.id FROM orders o JOIN prices p ON o.id = p.id LIMIT 3", ["LIMIT"]),
    ("SELECT o.id, row_number() OVER (ORDER BY o.id) FROM orders o JOIN prices p ON o.id = p.id", ["window function"]),
    ("SELECT id FROM orders UNION SELECT id FROM prices", ["UNION"]),
    ("SELECT o.id FROM orders o JOIN nope n ON o.id = n.id", ["unknown input 'nope'", "line 1"]),
    ("SELECT o.nope FROM orders o JOIN prices p ON o.id = p.id", ["no column 'nope'"]),
    ("SELECT id FROM orders o JOIN prices p ON o.id = p.id", ["ambiguous"]),
    ("SELECT o.id FROM orders o WHERE (o.id, o.cust) NOT IN (SELECT id, price FROM prices)", ["several columns"]),
    ("SELECT o.id FROM orders o WHERE (o.id, o.cust) IN (SELECT id FROM prices)", ["compares 2 column(s)"]),
    ("SELECT p.id FROM prices p FULL JOIN (SELECT o2.id FROM orders o2 LEFT JOIN ships s ON o2.id = s.order_id "
     "WHERE o2.amount > 1) o ON o.id = p.id",
     ["subquery in FROM must select from one input, or join first in FROM"]),
    ("SELECT o.id FROM (SELECT id, count(*) AS n FROM orders GROUP BY id) o JOIN prices p ON o.id = p.id", ["GROUP BY"]),
    ("SELECT o.id FROM (SELECT DISTINCT id FROM orders) o JOIN prices p ON o.id = p.id", ["DISTINCT"]),
    ("SELECT o.id FROM (SELECT id, id FROM orders) o JOIN prices p ON o.id = p.id", ["same name"]),
    ("WITH x (i) AS (SELECT id FROM orders) SELECT x.i FROM x JOIN prices p ON x.i = p.id", ["column list", "'x'"]),
    ("WITH RECURSIVE x AS (SELECT id FROM orders) SELECT x.id FROM x JOIN prices p ON x.id = p.id", ["WITH RECURSIVE"]),
    ("WITH x AS (SELECT o.id FROM orders o LEFT JOIN ships s ON o.id = s.order_id WHERE o.cust > 1) SELECT x.id FROM x "
     "RIGHT JOIN prices p ON x.id = p.id", ["subquery in FROM must select from one input", "line 1, column 19"]),
    ("SELECT o.id FROM orders o WHERE o.id IN (SELECT p.id FROM prices p) OR o.amount > 1", ["subquery"]),
    ("SELECT o.id FROM orders o WHERE o.id IN (SELECT p.id FROM prices p WHERE p.price IN "
     "(SELECT s.order_id FROM ships s WHERE s.order_id = o.cust))", ["'o.cust' belongs to a query two or more levels out"]),
    ("SELECT o.id FROM orders o WHERE o.id IN (SELECT p.id FROM prices p WHERE p.price IN "
     "(SELECT s.order_id FROM ships s WHERE s.order_id = o.nope))", ["unknown column 'o.nope'"]),
])
def test_unsupported_sql_is_named(sql, fragments):
    fails(sql, *fragments)


def test_unknown_config_keys_are_errors():
    with pytest.raises(CompileError, match="unknown config key 'bogus'"):
        ModelConfig.from_dict({"bogus": 1, "join_strategy": "nope"})


def test_common_table_expressions_read_as_the_inputs_and_derived_tables_they_name():
    """dbt's import CTEs (`SELECT * FROM <input>`) stay the input (a plain scan: its unique key and event time too);
    another CTE is a derived table; a CTE may read an earlier one, and a subquery may read one."""
    p = plan("WITH o AS (SELECT * FROM orders), pr AS (SELECT * FROM prices), "
             "big AS (SELECT id, price * 2 AS p2 FROM pr WHERE price > 5) "
             "SELECT o.id, b.p2 FROM o JOIN big b ON o.id = b.id WHERE EXISTS (SELECT 1 FROM pr WHERE pr.id = o.cust)")
    outline = p.explain()
    assert "scan orders AS o" in outline and "FROM prices WHERE `price` > 5) AS b" in outline, outline
    semi = p.root
    assert semi.join_type is JoinType.SEMI and isinstance(semi.right, Scan) and semi.right.input == "prices", outline
    assert semi.left.left.alias == "o" and semi.left.left.input == "orders"
    assert doctest.testmod(ctes).failed == 0


def test_dbt_styled_models_with_joined_and_final_ctes_plan_as_the_query_they_spell():
    """dbt's style guide: import CTEs, a `joined` CTE, a `final` CTE over it, then `SELECT * FROM final`.
    The query is merged into one SELECT over the joins: the same plan as writing it out directly."""
    styled = planned_as("WITH orders AS (SELECT * FROM orders), prices AS (SELECT * FROM prices), "
                        "joined AS (SELECT o.*, p.price FROM orders o LEFT JOIN prices p ON o.id = p.id WHERE o.amount > 0), "
                        "final AS (SELECT id, amount + COALESCE(price, 0) AS total, price FROM joined WHERE price IS NULL OR price < 9) "
                        "SELECT * FROM final WHERE total > 2",
                        "SELECT o.id, o.amount + COALESCE(p.price, 0) AS total, p.price FROM orders o LEFT JOIN prices p "
                        "ON o.id = p.id WHERE o.amount > 0 AND (p.price IS NULL OR p.price < 9) AND (o.amount + COALESCE(p.price, 0)) > 2")
    assert styled.output_names == ["id", "total", "price"]
    assert "filter (`p__price` IS NULL OR `p__price` < 9) AND" in styled.explain(), styled.explain()
    assert doctest.testmod(merged).failed == 0


def test_a_joined_cte_joined_to_another_table_joins_its_tables_in_the_outer_query():
    """A subquery that joins, first in FROM and followed by INNER or LEFT joins: its joins come first, its
    WHERE applies after the joins that follow (which keep its rows as they are), its columns are its expressions."""
    planned_as("WITH op AS (SELECT o.id, o.amount * 2 AS a2, p.price FROM orders o LEFT JOIN prices p ON o.id = p.id "
               "WHERE p.price IS NULL OR p.price > 1) "
               "SELECT op.id, op.a2, s.ship_ts, op.* FROM op LEFT JOIN ships s ON op.id = s.order_id AND op.a2 > 4 "
               "WHERE s.ship_ts IS NOT NULL OR op.price IS NULL",
               "SELECT o.id, o.amount * 2 AS a2, s.ship_ts, o.id, o.amount * 2 AS a2, p.price FROM orders o "
               "LEFT JOIN prices p ON o.id = p.id LEFT JOIN ships s ON o.id = s.order_id AND (o.amount * 2) > 4 "
               "WHERE (p.price IS NULL OR p.price > 1) AND (s.ship_ts IS NOT NULL OR p.price IS NULL)")
    star = plan("WITH op AS (SELECT o.id, p.price FROM orders o JOIN prices p ON o.id = p.id) "
                "SELECT * FROM op JOIN ships s ON op.id = s.order_id")
    assert star.output_names == ["id", "price", "order_id", "ship_ts"]
    own_star = plan("SELECT * FROM (SELECT * FROM orders o JOIN prices p ON o.id = p.id) j JOIN ships s ON j.cust = s.order_id")
    assert own_star.output_names == ["id", "cust", "amount", "ts", "id_2", "price", "order_id", "ship_ts"]
    qualified = {f"main.{name}": spec for name, spec in INPUTS.items()}
    named = compile_sql("m", "WITH j AS (SELECT o.*, p.price FROM main.orders o JOIN main.prices p ON o.id = p.id) "
                        "SELECT cust, price FROM j", qualified)  # inputs named as dbt's relations may be
    assert [o.expr for o in named.outputs] == ["`o__cust`", "`p__price`"]
    semi = plan("WITH op AS (SELECT o.id, p.price FROM orders o JOIN prices p ON o.id = p.id) "
                "SELECT * FROM op LEFT SEMI JOIN ships s ON op.id = s.order_id")
    assert semi.output_names == ["id", "price"]


def test_a_joined_subquery_s_unqualified_columns_stay_its_own_beside_a_table_joined_after_it():
    """Spark resolves a subquery's unqualified columns among its own tables: a table joined to the subquery
    later that has a column of the same name does not make them ambiguous once the subquery is merged."""
    planned_as("SELECT j.cust, j.price, p2.id AS id2 FROM (SELECT cust, price FROM orders o JOIN ships s ON o.id = s.order_id "
               "JOIN prices p ON order_id = p.id WHERE price > 1) j JOIN prices p2 ON j.price = p2.price",
               "SELECT o.cust, p.price, p2.id AS id2 FROM orders o JOIN ships s ON o.id = s.order_id JOIN prices p "
               "ON s.order_id = p.id JOIN prices p2 ON p.price = p2.price WHERE p.price > 1")


def test_a_subquery_that_inner_joins_is_flattened_where_it_is_inner_joined_later_in_from():
    """`a JOIN (b JOIN c ON p WHERE w) s ON q` is `a JOIN b JOIN c` with p, q and w each on the earliest join
    that sees every table it reads (inner joins and filters commute); its columns are what s selects, in place."""
    styled = planned_as("WITH j AS (SELECT p.id, p.price AS seller, s.ship_ts FROM prices p JOIN ships s ON p.id = s.order_id "
                        "WHERE p.price > 3) SELECT o.cust, j.* FROM orders o JOIN j ON o.id = j.id AND j.seller > o.amount",
                        "SELECT o.cust, p.id, p.price AS seller, s.ship_ts FROM orders o JOIN prices p ON o.id = p.id "
                        "AND p.price > o.amount AND p.price > 3 JOIN ships s ON p.id = s.order_id")
    assert styled.output_names == ["cust", "id", "seller", "ship_ts"]
    star = plan("SELECT * FROM orders o CROSS JOIN (SELECT price, ship_ts FROM prices p JOIN ships s ON p.id = s.order_id) j "
                "WHERE o.amount = j.price")
    assert star.output_names == ["id", "cust", "amount", "ts", "price", "ship_ts"]
    own_star = plan("SELECT o.id, j.* FROM orders o JOIN (SELECT * FROM prices p JOIN ships s ON p.id = s.order_id) j "
                    "ON o.cust = j.price")  # the subquery's * is its own tables', not orders' too
    assert own_star.output_names == ["id", "id_2", "price", "order_id", "ship_ts"]
    fails("SELECT o.id FROM orders o JOIN (SELECT p.id FROM prices p LEFT JOIN ships s ON p.id = s.order_id) j ON o.id = j.id",
          "a subquery in FROM must select from one input, or join first in FROM")
    # a second subquery is judged on the query as flattening the first left it: its alias x is now taken
    fails("SELECT o.id FROM orders o JOIN (SELECT x.id FROM prices x JOIN ships s ON x.id = s.order_id) a ON o.id = a.id "
          "JOIN (SELECT x.price FROM prices x JOIN ships t ON x.id = t.order_id) b ON o.amount = b.price", "aliases of its own")
    # on a time column, the flat form could join orders and ships by an interval join, with its own timing
    fails("SELECT o.id FROM orders o JOIN (SELECT p.id, s.ship_ts FROM prices p JOIN ships s ON p.id = s.order_id) j "
          "ON o.id = j.id AND j.ship_ts BETWEEN o.ts AND o.ts + INTERVAL 1 HOUR", "no condition that reads a time column")


def test_a_subquery_that_inner_joins_is_nested_where_it_is_outer_joined_later_in_from():
    """`a LEFT JOIN (b JOIN c ON p WHERE w) s ON q` is `a LEFT JOIN (b JOIN c ON p AND w) ON q`: the outer join
    joins the rows of the inner joins (a nested join on its right, not a chain: `a LEFT JOIN b JOIN c` would
    drop the rows of a that c does not match)."""
    for outer in ("LEFT", "RIGHT", "FULL"):
        nested = planned_as(f"WITH j AS (SELECT p.id, p.price AS seller, s.ship_ts FROM prices p JOIN ships s "
                            f"ON p.id = s.order_id WHERE p.price > 3) SELECT o.cust, j.* FROM orders o {outer} JOIN j "
                            f"ON o.id = j.id AND j.seller > o.amount WHERE j.ship_ts IS NOT NULL OR o.cust > 1",
                            f"SELECT o.cust, p.id, p.price AS seller, s.ship_ts FROM orders o {outer} JOIN (prices p JOIN ships s "
                            f"ON p.id = s.order_id AND p.price > 3) ON o.id = p.id AND p.price > o.amount "
                            f"WHERE s.ship_ts IS NOT NULL OR o.cust > 1")
        root = nested.root
        if outer == "RIGHT":  # (p JOIN s) LEFT JOIN o: one key, so one multi-way join
            assert [s.alias for s in root.inputs] == ["p", "s", "o"]
            assert root.join_types == (None, JoinType.INNER, JoinType.LEFT)
        else:
            assert isinstance(root, Join) and root.join_type is JoinType(outer.lower()) and isinstance(root.right, Join)
            assert [s.alias for s in plan_module.scans(root.right)] == ["p", "s"]
            assert root.right.join_type is JoinType.INNER
        assert nested.output_names == ["cust", "id", "seller", "ship_ts"]
    # a condition on the subquery's first table alone filters its first join; a CROSS join with WHERE is an inner join
    planned_as("SELECT o.id, j.price FROM orders o LEFT JOIN (SELECT p.id, p.price FROM prices p, ships s "
               "WHERE p.price > 3 AND s.order_id = p.id) j ON o.id = j.id",
               "SELECT o.id, p.price FROM orders o LEFT JOIN (prices p JOIN ships s ON p.price > 3 AND s.order_id = p.id) "
               "ON o.id = p.id")
    # without a WHERE, its joins may be outer joins too, nested as they are
    planned_as("WITH j AS (SELECT p.id, p.price, s.ship_ts FROM prices p LEFT JOIN ships s ON p.id = s.order_id) "
               "SELECT o.id, j.price, j.ship_ts FROM orders o LEFT JOIN j ON o.id = j.id",
               "SELECT o.id, p.price, s.ship_ts FROM orders o LEFT JOIN (prices p LEFT JOIN ships s ON p.id = s.order_id) "
               "ON o.id = p.id")
    # with a WHERE too, where the join that reads it is LEFT (or semi/anti): its ON filters the subquery's rows alike
    planned_as("WITH j AS (SELECT p.id, s.ship_ts FROM prices p LEFT JOIN ships s ON p.id = s.order_id WHERE p.price > 1 "
               "OR s.ship_ts IS NULL) SELECT o.id, j.ship_ts FROM orders o LEFT JOIN j ON o.id = j.id",
               "SELECT o.id, s.ship_ts FROM orders o LEFT JOIN (prices p LEFT JOIN ships s ON p.id = s.order_id) "
               "ON o.id = p.id AND (p.price > 1 OR s.ship_ts IS NULL)")
    fails("WITH j AS (SELECT p.id, s.ship_ts FROM prices p LEFT JOIN ships s ON p.id = s.order_id WHERE p.price > 1) "
          "SELECT o.id, j.ship_ts FROM orders o RIGHT JOIN j ON o.id = j.id",
          "(or outer joins too, without a WHERE unless it is LEFT, semi or anti joined)")
    # semi and anti joins read it as a nested join too (they pad nothing: it may compute columns)
    for kind in ("SEMI", "ANTI"):
        planned_as(f"SELECT o.id FROM orders o LEFT {kind} JOIN (SELECT p.id, p.price * 2 AS p2 FROM prices p JOIN ships s "
                   f"ON p.id = s.order_id WHERE p.price > 1) j ON o.id = j.id AND j.p2 > o.amount",
                   f"SELECT o.id FROM orders o LEFT {kind} JOIN (prices p JOIN ships s ON p.id = s.order_id AND p.price > 1) "
                   f"ON o.id = p.id AND (p.price * 2) > o.amount")
    # first in FROM before a RIGHT or FULL join (which would pad its rows before its WHERE): nested the same way
    for outer in ("RIGHT", "FULL"):
        planned_as(f"WITH j AS (SELECT p.id, p.price, s.ship_ts FROM prices p JOIN ships s ON p.id = s.order_id "
                   f"WHERE p.price > 1) SELECT j.id, j.price, o.cust FROM j {outer} JOIN orders o ON o.id = j.id",
                   f"SELECT p.id, p.price, o.cust FROM (prices p JOIN ships s ON p.id = s.order_id AND p.price > 1) "
                   f"{outer} JOIN orders o ON o.id = p.id")
    fails("WITH j AS (SELECT p.id, p.price * 2 AS p2 FROM prices p JOIN ships s ON p.id = s.order_id) "
          "SELECT j.id, j.p2, o.cust FROM j RIGHT JOIN orders o ON o.id = j.id", "column 'p2' of j is computed, but the RIGHT JOIN pads j")
    # the side a LEFT or FULL join pads must not compute a column: it would not be NULL on a padded row
    for outer in ("LEFT", "FULL"):
        fails(f"SELECT o.id, j.n FROM orders o {outer} JOIN (SELECT p.id, COALESCE(p.price, 0) AS n FROM prices p "
              f"JOIN ships s ON p.id = s.order_id) j ON o.id = j.id",
              f"column 'n' of j is computed, but the {outer} JOIN pads j with NULLs", "compute it in the outer query")
    planned_as("SELECT o.id, j.n FROM orders o RIGHT JOIN (SELECT p.id, COALESCE(p.price, 0) AS n FROM prices p "
               "JOIN ships s ON p.id = s.order_id) j ON o.id = j.id",  # it pads orders, not j
               "SELECT o.id, COALESCE(p.price, 0) AS n FROM orders o RIGHT JOIN (prices p JOIN ships s "
               "ON p.id = s.order_id) ON o.id = p.id")
    # a time-based join stays out of a nested join (the watermark does not pass through one)
    fails("SELECT p.id FROM prices p LEFT JOIN (orders o JOIN ships s ON o.id = s.order_id AND s.ship_ts BETWEEN o.ts "
          "AND o.ts + INTERVAL 1 HOUR) ON p.id = o.id", "interval join j1 of o, s is time-based", "join those inputs in the outer FROM")
    fails("SELECT p.id FROM prices p LEFT JOIN (SELECT o.id FROM orders o JOIN ships s ON o.id = s.order_id AND s.ship_ts "
          "BETWEEN o.ts AND o.ts + INTERVAL 1 HOUR) j ON p.id = j.id", "interval join j1 of o, s is time-based")
    fails("SELECT p.id FROM prices p LEFT JOIN (orders o JOIN ships FOR SYSTEM_TIME AS OF o.ts AS s ON o.id = s.order_id) "
          "ON p.id = o.id", "a parenthesized join may hold regular joins of inputs only")
    fails("SELECT o.id FROM orders o LEFT JOIN (prices p JOIN prices p2 USING (id)) ON o.id = p.id",
          "USING inside a parenthesized join is not supported: write its condition after ON")



def test_a_subquery_in_in_or_exists_may_inner_join_its_inputs():
    """`x IN (SELECT ... FROM b JOIN c ...)` is a semi join of the rows of the inner joins (a nested join on
    its right): its conditions on its own inputs go on those joins, the correlated ones on the semi join."""
    semi = plan("SELECT o.id FROM orders o WHERE o.cust IN (SELECT p.price FROM prices p JOIN ships s ON p.id = s.order_id "
                "WHERE p.id > 2 AND s.ship_ts > o.ts)").root
    assert isinstance(semi, Join) and semi.join_type is JoinType.SEMI and isinstance(semi.right, Join)
    assert [(k.left, k.right) for k in semi.keys] == [("`o__cust`", "`p__price`")] and semi.residual == "`s__ship_ts` > `o__ts`"
    assert [s.filters for s in plan_module.scans(semi.right)] == [("`p__id` > 2",), ()]
    anti = plan("SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM prices p, ships s WHERE p.id = s.order_id "
                "AND p.id = o.id)").root
    assert anti.join_type is JoinType.ANTI and [(k.left, k.right) for k in anti.right.keys] == [("`p__id`", "`s__order_id`")]
    fails("SELECT o.id FROM orders o WHERE o.cust IN (SELECT p.price FROM prices p LEFT JOIN ships s ON p.id = s.order_id)",
          "a subquery in [NOT] IN or [NOT] EXISTS may join its inputs by INNER or CROSS joins only")
    fails("SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM prices p JOIN ships s ON p.id = s.order_id WHERE 1 = 2)",
          "reads none of its inputs")


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT o.id, rand() AS r FROM orders o JOIN prices p ON o.id = p.id", "rand() is not deterministic"),
    ("SELECT o.id FROM orders o JOIN prices p ON o.id = p.id AND uuid() > 'a'", "uuid() is not deterministic"),
    ("WITH j AS (SELECT o.id, monotonically_increasing_id() AS n FROM orders o JOIN prices p ON o.id = p.id) SELECT * FROM j",
     "monotonically_increasing_id() is not deterministic"),
    ("SELECT o.id, current_timestamp() AS at FROM orders o JOIN prices p ON o.id = p.id", "current_timestamp() is the time of the run"),
    ("SELECT o.id FROM orders o JOIN prices p ON o.id = p.id WHERE o.ts > now() - INTERVAL 1 DAY", "now() is the time of the run"),
    ("SELECT o.id, unix_timestamp() AS at FROM orders o JOIN prices p ON o.id = p.id", "unix_timestamp() is the time of the run"),
])
def test_functions_whose_value_is_not_the_row_s_are_refused_naming_them(sql, fragment):
    """A retraction must compute the row it retracts: a random or clock value would differ, and the
    result could never retract the row (every later run would fail)."""
    message = fails(sql, fragment)
    assert "line 1, column" in message


def test_deterministic_functions_and_any_function_of_an_output_that_only_inserts_compile():
    compiled = plan("SELECT o.id, xxhash64(o.id) AS h, unix_timestamp(o.ts) AS t FROM orders o JOIN prices p ON o.id = p.id")
    assert compiled.output_names == ["id", "h", "t"]
    appended = {name: InputSpec.from_dict(name, {"columns": [[c.name, c.type] for c in spec.columns],
                                                 "event_time": spec.event_time, "changelog_format": "append"})
                for name, spec in INPUTS.items()}
    interval = ("SELECT o.id, current_timestamp() AS loaded_at, uuid() AS row_id FROM orders o {kind} JOIN ships s "
                "ON o.id = s.order_id AND s.ship_ts BETWEEN o.ts AND o.ts + INTERVAL 1 HOUR")
    assert compile_sql("m", interval.format(kind=""), appended).output_names == ["id", "loaded_at", "row_id"]
    assert compile_sql("m", interval.format(kind="LEFT"), appended).output_names == ["id", "loaded_at", "row_id"]
    with pytest.raises(CompileError, match="current_timestamp\\(\\) is the time of the run"):
        compile_sql("m", interval.format(kind=""), INPUTS)  # changelogs that may retract
    with pytest.raises(CompileError, match="uuid\\(\\) is not deterministic, and this model's output can retract"):
        compile_sql("m", "SELECT o.id, uuid() AS u FROM orders o LEFT JOIN prices p ON o.id = p.id",
                    {**appended, "prices": INPUTS["prices"]})


def test_using_joins_have_spark_s_columns_one_per_using_name_first():
    """Spark's USING: the column once, first (the left's under INNER, LEFT and semi joins, the right's under
    RIGHT, COALESCE of both under FULL), then the other columns of each side; an unqualified name means it."""
    full = plan("SELECT *, id * 2 AS id2 FROM orders o FULL JOIN prices p USING (id) WHERE id > 1")
    assert full.output_names == ["id", "cust", "amount", "ts", "price", "id2"]
    assert full.filters == ("COALESCE(`o__id`, `p__id`) > 1",)
    assert full.outputs[0].expr == "COALESCE(`o__id`, `p__id`)" and full.outputs[-1].expr == "COALESCE(`o__id`, `p__id`) * 2"
    right = plan("SELECT id, o.id AS oid FROM orders o RIGHT JOIN prices p USING (id)")
    assert [o.expr for o in right.outputs] == ["`p__id`", "`o__id`"]
    semi = plan("SELECT * FROM orders o LEFT SEMI JOIN prices p USING (id)")
    assert semi.output_names == ["id", "cust", "amount", "ts"]
    chained = plan("SELECT * FROM orders o JOIN prices p USING (id) JOIN ships s ON id = s.order_id", join_strategy="binary")
    assert chained.output_names == ["id", "cust", "amount", "ts", "price", "order_id", "ship_ts"]
    assert chained.root.keys[0].left == "`o__id`" and chained.root.keys[0].right == "`s__order_id`", chained.explain()
    fails("SELECT * FROM orders o JOIN prices p ON o.id = p.id JOIN ships s USING (id)",
          "USING (id): the tables before the join have more than one column 'id'")
    fails("SELECT * FROM orders o JOIN ships s USING (order_id)", "USING (order_id): the tables before the join have no column 'order_id'")
    derived = plan("SELECT * FROM (SELECT *, amount * 2 AS a2 FROM orders WHERE amount > 0) x LEFT JOIN prices p USING (id)")
    assert derived.output_names == ["id", "cust", "amount", "ts", "a2", "price"]
    semi = plan("SELECT * FROM (SELECT * FROM orders o LEFT SEMI JOIN ships s ON o.id = s.order_id) x JOIN prices p USING (id)")
    assert semi.output_names == ["id", "cust", "amount", "ts", "price"]
    inner_first = plan("SELECT * FROM (SELECT * FROM prices p JOIN orders o USING (id)) x JOIN orders o2 USING (id)")
    assert inner_first.output_names == ["id", "price", "cust", "amount", "ts", "cust_2", "amount_2", "ts_2"]
    assert doctest.testmod(using).failed == 0


def test_a_cte_over_a_computing_cte_is_one_derived_table():
    planned_as("WITH pr AS (SELECT id, price * 2 AS p2 FROM prices), big AS (SELECT id, p2 + 1 AS p3 FROM pr WHERE p2 > 5) "
               "SELECT o.id, big.p3 FROM orders o JOIN big ON o.id = big.id",
               "SELECT o.id, big.p3 FROM orders o JOIN (SELECT id, (price * 2) + 1 AS p3 FROM prices WHERE (price * 2) > 5) big "
               "ON o.id = big.id")


def test_what_a_merged_subquery_cannot_name_fails_naming_the_column_and_the_fix():
    fails("WITH j AS (SELECT * FROM orders o JOIN prices p ON o.id = p.id) SELECT id FROM j",
          "common table expression j is read for column 'id', which more than one of its tables has",
          "name the columns it selects")
    fails("WITH j AS (SELECT o.*, p.price FROM orders o JOIN prices p ON o.id = p.id) SELECT j.nope FROM j",
          "column 'nope', which it does not select")
    fails("WITH j AS (SELECT o.*, p.price FROM orders o JOIN prices p ON o.id = p.id) SELECT j.id FROM j WHERE o.cust > 1",
          "'o.cust' names a table the query does not read (its FROM reads j)")
    fails("WITH j AS (SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id WHERE p.price > 1) SELECT j.id FROM j "
          "FULL JOIN ships s ON j.id = s.order_id",
          "a subquery in FROM must select from one input, or join first in FROM with only INNER, LEFT, CROSS or semi/anti joins")
    fails("WITH j AS (SELECT o.id AS order_id FROM orders o JOIN prices p ON o.id = p.id) SELECT s.ship_ts FROM j JOIN ships s "
          "ON order_id = s.order_id", "column 'order_id' is a column of the subquery or common table expression j and of a "
          "table joined to it: qualify it")


def test_outlines_tell_or_inside_and_from_and_inside_or():
    """An outline (and so the plan's fingerprint) keeps the grouping of a WHERE's conditions."""
    a = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id WHERE (p.price = 1 OR p.price = 2) AND p.id > 0")
    b = plan("SELECT o.id FROM orders o LEFT JOIN prices p ON o.id = p.id WHERE p.price = 1 OR (p.price = 2 AND p.id > 0)")
    assert "filter (`p__price` = 1 OR `p__price` = 2) AND `p__id` > 0" in a.explain(), a.explain()
    assert plan_fingerprint(a) != plan_fingerprint(b)
    assert doctest.testmod(plan_module).failed == 0
