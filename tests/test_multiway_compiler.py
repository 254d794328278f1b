"""Join-strategy selection: when a join chain becomes one multi-way join, and how the plan explains it."""
from __future__ import annotations

import pytest

from streamjoin.sql.compiler import compile_sql
from streamjoin.errors import CompileError
from streamjoin.sql.plan import Join, MultiJoin
from streamjoin.spec import InputSpec, ModelConfig
from streamjoin.types import JoinType

INPUTS = {name: InputSpec.from_dict(name, {"columns": [["id", "int"], ["ref", "bigint"], ["v", "int"]]})
          for name in ("a", "b", "c", "d")}


def plan(sql: str, strategy: str = "auto"):
    return compile_sql("m", sql, INPUTS, ModelConfig(join_strategy=strategy))


THREE_WAY = "SELECT a.v, b.v AS bv, c.v AS cv FROM a JOIN b ON a.id = b.id LEFT JOIN c ON b.id = c.id"


def test_auto_picks_multi_for_three_inputs_on_a_transitive_common_key():
    p = plan(THREE_WAY)
    assert isinstance(p.root, MultiJoin)
    assert [s.alias for s in p.root.inputs] == ["a", "b", "c"]
    assert p.root.join_types == (None, JoinType.INNER, JoinType.LEFT)
    assert p.root.keys == (("`a__id`",), ("`b__id`",), ("`c__id`",))
    assert p.root.conditions[2] == "`b__id` = `c__id`"
    explained = p.explain()
    assert "multi-way join" in explained
    assert "join_strategy auto: one multi-way join on a.id = b.id = c.id" in explained
    assert "all 3 inputs share the common key" in explained


def test_binary_strategy_keeps_the_chain_of_binary_joins():
    p = plan(THREE_WAY, "binary")
    assert isinstance(p.root, Join) and isinstance(p.root.left, Join)
    assert "join_strategy binary: a chain of binary joins" in p.explain()


def test_auto_keeps_two_inputs_binary_and_multi_forces_them():
    sql = "SELECT a.v, b.v AS bv FROM a LEFT JOIN b ON a.id = b.id"
    auto = plan(sql)
    assert isinstance(auto.root, Join)
    assert "only 2 inputs" in auto.explain()
    forced = plan(sql, "multi")
    assert isinstance(forced.root, MultiJoin)
    assert "chosen by configuration" in forced.explain()


def test_a_right_join_of_the_first_two_inputs_becomes_a_left_join():
    p = plan("SELECT a.v, b.v AS bv, c.v AS cv FROM a RIGHT JOIN b ON a.id = b.id JOIN c ON c.id = b.id")
    assert isinstance(p.root, MultiJoin)
    assert [s.alias for s in p.root.inputs] == ["b", "a", "c"]
    assert p.root.join_types[1] is JoinType.LEFT
    assert p.root.keys == (("`b__id`",), ("`a__id`",), ("`c__id`",))


def test_composite_common_key_and_extra_conditions():
    p = plan("SELECT a.v FROM a JOIN b ON a.id = b.id AND a.ref = b.ref AND a.v < b.v "
             "JOIN c ON c.id = a.id AND c.ref = b.ref AND c.v = a.v")
    assert isinstance(p.root, MultiJoin)
    assert p.root.keys[2] == ("`c__id`", "`c__ref`")
    assert "`a__v` < `b__v`" in p.root.conditions[1]
    assert "`c__v` = `a__v`" in p.root.conditions[2] or "`a__v` = `c__v`" in p.root.conditions[2]


def test_auto_falls_back_to_binary_and_names_the_join_without_the_common_key():
    p = plan("SELECT a.v FROM a LEFT JOIN b ON a.id = b.id JOIN c ON b.ref = c.id")
    assert isinstance(p.root, Join)
    assert "join_strategy auto: binary joins, because join j2 (INNER JOIN c ON b.ref = c.id)" in p.explain()


@pytest.mark.parametrize("sql, named", [
    ("SELECT a.v FROM a LEFT JOIN b ON a.id = b.id JOIN c ON b.ref = c.id", "j2 (INNER JOIN c ON b.ref = c.id)"),
    ("SELECT a.v FROM a JOIN b ON a.id = b.id JOIN c ON a.id = c.id FULL JOIN d ON a.id = d.id", "j3 (FULL JOIN"),
    ("SELECT a.v FROM a JOIN b ON a.id = b.id JOIN c ON a.id = c.id RIGHT JOIN d ON a.id = d.id", "j3 (RIGHT JOIN"),
    ("SELECT a.v FROM a JOIN b ON a.id = b.id JOIN c ON a.id <=> c.id", "j2 (INNER JOIN c ON a.id <=> c.id)"),
    ("SELECT a.v FROM a JOIN b ON a.id = b.id WHERE EXISTS (SELECT 1 FROM c WHERE c.id = a.id)", "SEMI"),
])
def test_multi_on_a_query_that_does_not_qualify_is_a_compile_error_naming_the_join(sql, named):
    with pytest.raises(CompileError) as err:
        plan(sql, "multi")
    assert named in str(err.value)
    assert "join_strategy 'multi'" in str(err.value)


def test_the_key_must_be_linked_in_join_order_not_by_a_later_equality():
    # c joins on b.ref, which only a later join (d) equates with the key: a LEFT join with d
    # would not make b.ref equal to the key, so the chain does not share one key.
    with pytest.raises(CompileError, match="j2"):
        plan("SELECT a.v FROM a JOIN b ON a.id = b.id JOIN c ON c.id = b.ref "
             "LEFT JOIN d ON d.id = a.id AND d.id = b.ref", "multi")
