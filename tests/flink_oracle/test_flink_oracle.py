"""Every conformance case, run through real Apache Flink, ends where the case says.

Run from the repository root with the main venv: ``.venv/bin/python -m pytest tests/flink_oracle``.
Flink runs in ``.venv-flink`` (``make flink-setup``), reached through client.py; all
cases go to ONE Flink process (one JVM) at the start of the module.

A case's expected final result is the last run's ``expect_result``, or, for cases
that give only changelogs (the append-only interval joins), the previous result plus
each later run's ``expect_changelog`` (compare.expected_final_result).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE.parent.parent.parent / "shared" / "conformance" / "cases"
CASE_PATHS = sorted(CASES_DIR.glob("*.json"))


def _load(module: str) -> Any:
    """Import a sibling module by path under a unique name (this folder is no package)."""
    name = f"flink_oracle_{module}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{module}.py")
        assert spec and spec.loader
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


client = _load("client")
compare = _load("compare")
case_plan = _load("case_plan")

# Cases whose final result cannot equal Flink's, each with the exact reason. The test
# still checks the precise relation that must hold instead of skipping the case.
END_OF_INPUT_PADDING = {
    "seed-interval-left-join-padding": (
        "LEFT interval join. Its expectations stop after run 4, whose watermark (13:01) "
        "has not closed the windows of orders 4 (13:00) and 5 (13:01), so streamjoin still "
        "holds them unpadded. Flink's sources are bounded: at end of input Flink advances "
        "the watermark to +infinity, closing every window, so it also emits orders 4 and 5 "
        "null-padded. Flink's result must be the expected rows plus only such null-padded rows."
    ),
}


# Rides along with the conformance cases: a query Flink rejects fails its case only.
BAD_SQL_CASE = {"name": "oracle-bad-sql", "inputs": {"t": {"columns": [["x", "int"]]}},
                "sql": "SELECT nope FROM t", "runs": [{"changes": {"t": [["+I", [1]]]}}]}


@pytest.fixture(scope="module")
def flink_reports() -> dict[str, dict[str, Any]]:
    """Flink's report of every case, from one run of the oracle."""
    if not client.FLINK_PYTHON.exists():
        pytest.fail(f"the Flink oracle needs {client.FLINK_PYTHON}: {client.SETUP_HINT}", pytrace=False)
    cases = [json.loads(p.read_text()) for p in CASE_PATHS] + [BAD_SQL_CASE]
    reports, _ = client.run_reports(cases)
    return {r["case"]: r for r in reports}


def test_the_conformance_directory_has_cases() -> None:
    assert CASE_PATHS, f"no conformance cases in {CASES_DIR}"


@pytest.mark.parametrize("path", CASE_PATHS, ids=[p.stem for p in CASE_PATHS])
def test_flink_ends_where_the_case_expects(path: Path, flink_reports: dict[str, dict[str, Any]]) -> None:
    case = json.loads(path.read_text())
    report = flink_reports[case["name"]]
    assert report["ok"], f"Flink failed the case: {report['error']}"
    expected = compare.expected_final_result(case)
    if expected is None:
        return  # the case states no final result; that Flink ran it is the whole check
    if case["name"] in END_OF_INPUT_PADDING:
        extra = _rows_beyond(expected, report["result"], report["columns"])
        assert all(None in row for row in extra), (
            f"{END_OF_INPUT_PADDING[case['name']]}\nbut Flink's extra rows are not all null-padded: {extra}"
        )
        return
    same, diff = compare.same_result(expected, report["result"], report["columns"])
    assert same, f"Flink's final result differs from the case's: {diff}"


def _rows_beyond(expected: list[list[Any]], actual: list[list[Any]], columns: Any) -> list[list[Any]]:
    """The rows of `actual` left over once every expected row is matched; fails if one is missing."""
    leftover = list(actual)
    for row in expected:
        for i, candidate in enumerate(leftover):
            if compare.same_result([row], [candidate], columns)[0]:
                del leftover[i]
                break
        else:
            pytest.fail(f"expected row {row} is not in Flink's result {actual}")
    return leftover


def test_client_keys_results_by_case_name() -> None:
    if not client.FLINK_PYTHON.exists():
        pytest.fail(f"the Flink oracle needs {client.FLINK_PYTHON}: {client.SETUP_HINT}", pytrace=False)
    case = {
        "name": "client-smoke",
        "inputs": {
            "l": {"columns": [["k", "int"], ["d", "decimal(10,2)"], ["day", "date"]]},
            "r": {"columns": [["k", "int"], ["x", "double"], ["ok", "boolean"]]},
        },
        "sql": "SELECT l.k, l.d, l.day, r.x, r.ok FROM l LEFT JOIN r ON l.k = r.k",
        "runs": [
            {"changes": {"l": [["+I", [1, "12.50", "2021-12-25"]], ["+I", [2, "0.10", "2021-12-26"]]]}},
            {"changes": {"r": [["+I", [1, 0.5, True]]], "l": [["-D", [2, "0.10", "2021-12-26"]]]}},
        ],
    }
    assert client.run_in_flink([case]) == {"client-smoke": [[1, "12.50", "2021-12-25", 0.5, True]]}


def test_client_raises_with_flinks_error_and_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    failed = {"case": "bad-sql", "ok": False, "error": "Column 'nope' not found", "result": None,
              "columns": None, "sql": None}
    monkeypatch.setattr(client, "run_reports", lambda cases: ([failed], "log line from the JVM"))
    with pytest.raises(client.FlinkOracleError, match="(?s)bad-sql: Column 'nope' not found.*log line"):
        client.run_in_flink([{"name": "bad-sql"}])


def test_flink_reports_a_bad_query_on_its_case_only(flink_reports: dict[str, dict[str, Any]]) -> None:
    bad = flink_reports[BAD_SQL_CASE["name"]]
    assert not bad["ok"] and "nope" in bad["error"]


def test_watermark_advances_only_at_the_end_of_a_run() -> None:
    plan = case_plan.plan_case({
        "name": "wm",
        "inputs": {
            "o": {"columns": [["id", "int"], ["t", "timestamp"]], "event_time": "t"},
            "s": {"columns": [["id", "int"], ["t", "timestamp"]], "event_time": "t",
                  "watermark_delay": "1 hour"},
        },
        "sql": "SELECT 1",
        "runs": [
            {"changes": {"o": [["+I", [1, "2021-12-25 08:00:00"]]]}},  # s has no row yet: no watermark
            {"changes": {"s": [["+I", [1, "2021-12-25 10:00:00"]], ["+I", [2, "2021-12-25 09:30:00"]]]}},
            {"changes": {"o": [["+I", [2, "2021-12-25 07:00:00"]]]}},  # raises no maximum
        ],
    })
    assert [r.watermark for r in plan.source_rows] == [None, None, "2021-12-25 08:00:00", None]


def test_a_run_that_expects_an_error_is_not_fed_to_flink() -> None:
    plan = case_plan.plan_case({
        "name": "err", "inputs": {"t": {"columns": [["x", "int"]]}}, "sql": "SELECT x FROM t",
        "runs": [{"changes": {"t": [["+I", [1]]]}},
                 {"changes": {"t": [["+I", [2]]]}, "expect_error": "boom"}],
    })
    assert [r.values for r in plan.source_rows] == [("1",)]


def test_planning_reports_every_problem_at_once() -> None:
    with pytest.raises(case_plan.CasePlanError) as info:
        case_plan.plan_case({"name": "bad", "inputs": {"t": {"columns": [["x", "money"]],
                                                              "watermark_delay": "soon"}},
                             "sql": "SELECT x FROM t", "runs": [{"changes": {"u": [["+I", [1]]]}}]})
    message = str(info.value)
    assert "money" in message and "soon" in message and "'u'" in message


@pytest.mark.parametrize("module", ["case_plan", "compare", "sql_rewrite"])
def test_docstring_examples(module: str) -> None:
    import doctest

    result = doctest.testmod(_load(module))
    assert result.failed == 0
