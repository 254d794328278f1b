"""Joins without an equality between their sides (theta and cross joins, EXISTS correlated by a
comparison only, uncorrelated EXISTS): Flink runs them in one key group, and so does streamjoin.

The cases (tests/cases/theta-*.json) port Flink's ITCases that join so (JoinITCase's dependent
condition derivation, SemiAntiJoinStreamITCase's EXISTS without equality) into several runs with
retractions; each run expects Spark's batch evaluation of the SQL, and Flink itself must end where
each case ends. A property test checks random changelogs at random run boundaries against batch.
"""
from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_cases import assert_flink_ends_where_cases_end
from scenario import cases_pass, compile_error, input_specs
from streamjoin.explain import describe
from streamjoin.sql import conditions
from streamjoin.sql.compiler import compile_sql
from streamjoin.sql.plan import SINGLE_GROUP_KEY
from test_regular_properties import COMPACTION, check_against_batch, changelog_runs


CASES = sorted((Path(__file__).parent / "cases").glob("theta-*.json"))
THETA = ["l.v > r.w", "(l.k = 1 AND r.w = 2) OR (l.v = 2 AND r.k = 3)", "l.k = r.k OR l.v = r.w", "l.v + r.w < 4"]
JOINS = {
    "inner": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l JOIN r ON {c}",
    "left": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l LEFT JOIN r ON {c}",
    "right": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l RIGHT JOIN r ON {c}",
    "full": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l FULL OUTER JOIN r ON {c}",
    "comma": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l, r WHERE {c}",
    "exists": "SELECT l.k, l.v FROM l WHERE EXISTS (SELECT 1 FROM r WHERE {c})",
    "not exists": "SELECT l.k, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE {c})",
}
LR = {"l": {"columns": [["k", "int"], ["v", "int"]]}, "r": {"columns": [["k", "int"], ["w", "int"]]}}


def test_the_cases_pass(spark):
    assert CASES
    cases_pass(spark, [], CASES)


def test_flink_ends_where_every_case_ends():
    assert_flink_ends_where_cases_end(CASES)


@pytest.mark.parametrize("join", sorted(JOINS))
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(cond=st.sampled_from(THETA), runs=changelog_runs(), compaction=COMPACTION)
def test_results_and_changelogs_match_batch(spark, tmp_path_factory, join, cond, runs, compaction):
    check_against_batch(spark, tmp_path_factory.mktemp("theta"), JOINS[join].format(c=cond), runs, compaction)


def test_a_join_without_equality_runs_in_one_key_group_and_says_so():
    plan = compile_sql("m", JOINS["left"].format(c="l.v > r.w"), input_specs(LR))
    assert plan.root.keys == (SINGLE_GROUP_KEY,) and plan.root.residual is not None
    assert "left join j1 ON no equality (one key group), residual" in plan.explain()
    assert "in one key group (the join has no equality: a change reads the other side's whole state)" in describe(plan)
    cross = compile_sql("m", "SELECT l.k, r.w FROM l CROSS JOIN r", input_specs(LR))
    assert cross.root.keys == (SINGLE_GROUP_KEY,) and cross.root.residual is None


def test_equalities_stay_keys_and_an_interval_join_stays_keyless():
    plan = compile_sql("m", JOINS["inner"].format(c="l.k = r.k AND l.v > r.w"), input_specs(LR))
    assert [(k.left, k.right) for k in plan.root.keys] == [("`l__k`", "`r__k`")]
    timed = {n: {**d, "columns": d["columns"] + [["ts", "timestamp"]], "event_time": "ts"} for n, d in LR.items()}
    interval = compile_sql("m", "SELECT l.k, r.w FROM l JOIN r ON l.ts BETWEEN r.ts - INTERVAL 1 SECOND AND r.ts",
                           input_specs(timed))
    assert interval.root.keys == () and interval.root.time_bound is not None


def test_a_multi_way_join_needs_the_common_key_and_names_the_join_without_one():
    sql = "SELECT l.k, r.w, s.w AS sw FROM l JOIN r ON l.k = r.k JOIN s ON r.w < s.w"
    message = compile_error("m", sql, {**LR, "s": LR["r"]}, {"join_strategy": "multi"})
    assert "join j2 (INNER JOIN s ON r.w < s.w) does not equate a column of s with the common key" in message
    first = compile_error("m", "SELECT l.k, r.w, s.w AS sw FROM l JOIN r ON l.v < r.w JOIN s ON l.k = s.k",
                          {**LR, "s": LR["r"]}, {"join_strategy": "multi"})
    assert "join j1 (INNER JOIN r ON l.v < r.w) has no equality between the two inputs" in first


def test_a_negated_disjunction_with_a_subquery_reads_as_and_ed_parts():
    assert doctest.testmod(conditions).failed == 0
