"""Nested joins: a join whose right side is itself a join (a joined subquery or CTE outer-joined later in
FROM, a parenthesized join, a joined subquery in [NOT] IN or [NOT] EXISTS), as Flink plans it.

The cases (tests/cases/nested-*.json) run four runs with updates, deletes, duplicates and NULL keys
over three inputs; each run expects Spark's batch evaluation of the SQL, and Flink itself must end
where each case ends. `test_regular_properties.SUBQUERY_FORMS` checks random changelogs at random run
boundaries against batch; `test_compiler` the plans and what stays refused.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from scenario import cases_pass, input_specs
from streamjoin.sql.compiler import compile_sql
from streamjoin.sql.plan import Join, subtree

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))
from client import run_reports  # noqa: E402
from compare import expected_final_result, same_result  # noqa: E402

CASES = sorted((Path(__file__).parent / "cases").glob("nested-*.json"))


def test_each_case_plans_a_join_whose_right_side_is_a_join():
    for path in CASES:
        case = json.loads(path.read_text())
        plan = compile_sql(case["name"], case["sql"], input_specs(case["inputs"]))
        assert any(isinstance(n, Join) and isinstance(n.right, Join) for n in subtree(plan.root)), plan.explain()


def test_the_cases_pass(spark):
    assert len(CASES) >= 3
    cases_pass(spark, [], CASES)


def test_flink_ends_where_every_case_ends():
    cases = [json.loads(p.read_text()) for p in CASES]
    reports, stderr = run_reports(cases)
    for case, report in zip(cases, reports):
        assert report["ok"], f"{case['name']}: Flink failed: {report['error']}\n{stderr[-3000:]}"
        same, why = same_result(expected_final_result(case), report["result"], report["columns"])
        assert same, f"{case['name']}: Flink's final result differs from the case's: {why}"
