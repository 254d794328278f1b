"""Nested joins: a join whose right side is itself a join (a joined subquery or CTE outer-joined later in
FROM, a parenthesized join, a joined subquery in [NOT] IN or [NOT] EXISTS), as Flink plans it.

The cases (tests/cases/nested-*.json) run four runs with updates, deletes, duplicates and NULL keys
over three inputs; each run expects Spark's batch evaluation of the SQL, and Flink itself must end
where each case ends; the `__batch` views equal the result after every run. `test_regular_properties.SUBQUERY_FORMS` checks random changelogs at random run
boundaries against batch; `test_compiler` the plans and what stays refused.
"""
from __future__ import annotations

import json
from pathlib import Path

from flink_cases import assert_flink_ends_where_cases_end
from scenario import cases_pass, input_specs
from test_batch_views import assert_views_match
from streamjoin.sql.compiler import compile_sql
from streamjoin.sql.plan import Join, subtree


CASES = sorted((Path(__file__).parent / "cases").glob("nested-*.json"))


def test_each_case_plans_a_join_whose_right_side_is_a_join():
    for path in CASES:
        case = json.loads(path.read_text())
        plan = compile_sql(case["name"], case["sql"], input_specs(case["inputs"]))
        assert any(isinstance(n, Join) and isinstance(n.right, Join) for n in subtree(plan.root)), plan.explain()


def test_the_cases_pass(spark):
    assert len(CASES) >= 3
    cases_pass(spark, [], CASES)


def test_each_case_s_result_equals_its_batch_views_after_every_run(spark):
    """The `__batch` views (`streamjoin.matches_batch` in dbt) evaluate the nested SQL as Spark reads it."""
    for path in CASES:
        assert_views_match(spark, json.loads(path.read_text()), path.stem.replace("-", "_"))


def test_flink_ends_where_every_case_ends():
    assert_flink_ends_where_cases_end(CASES)
