"""Compare joined results the way FORMAT.md compares them: as multisets of typed rows.

Standard library only, so both the main venv (tests) and the Flink venv can import it.

>>> same_result([["2021-12-25 00:00:00.02", "12.5"]], [["2021-12-25 00:00:00.020000", "12.50"]],
...             [["t", "TIMESTAMP(6)"], ["d", "DECIMAL(10, 2)"]])
(True, '')
>>> same_result([[0.1 + 0.2]], [[0.3]], [["x", "DOUBLE"]])
(True, '')
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from decimal import Decimal, InvalidOperation
from typing import Any

Row = list[Any]
REL_TOL = 1e-9
_SIGN = {"+I": 1, "+U": 1, "-U": -1, "-D": -1}


def _kind(flink_type: str | None) -> str:
    t = (flink_type or "").upper()
    for prefix, kind in (("TIMESTAMP", "timestamp"), ("DATE", "date"), ("DECIMAL", "decimal"),
                         ("DOUBLE", "double"), ("FLOAT", "double")):
        if t.startswith(prefix):
            return kind
    return "exact"


def _typed(value: Any, kind: str) -> Any:
    if value is None:
        return None
    try:
        if kind == "timestamp" and isinstance(value, str):
            return dt.datetime.fromisoformat(value.strip().replace("T", " "))
        if kind == "date" and isinstance(value, str):
            return dt.date.fromisoformat(value.strip())
        if kind == "decimal":
            return Decimal(str(value)).normalize()
    except (ValueError, InvalidOperation):
        return value
    return value


def _equal(a: Any, b: Any, kind: str) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if kind == "double" and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0) or a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def same_result(expected: list[Row], actual: list[Row], columns: list[list[str]] | None) -> tuple[bool, str]:
    """Compare two results as multisets of rows typed by `columns` ([name, Flink type]).

    Returns (True, "") or (False, a description of the rows missing and unexpected).
    """
    kinds = [_kind(t) for _, t in columns] if columns else None

    def typed(row: Row) -> list[Any]:
        return [_typed(v, kinds[i] if kinds and i < len(kinds) else "exact") for i, v in enumerate(row)]

    def rows_equal(a: list[Any], b: list[Any]) -> bool:
        return len(a) == len(b) and all(
            _equal(x, y, kinds[i] if kinds and i < len(kinds) else "exact") for i, (x, y) in enumerate(zip(a, b))
        )

    unmatched = [(row, typed(row)) for row in actual]
    missing = []
    for row in expected:
        want = typed(row)
        for i, (_, have) in enumerate(unmatched):
            if rows_equal(want, have):
                del unmatched[i]
                break
        else:
            missing.append(row)
    if not missing and not unmatched:
        return True, ""
    return False, f"missing (expected, not in Flink): {missing}; unexpected (in Flink only): {[r for r, _ in unmatched]}"


def expected_final_result(case: dict[str, Any]) -> list[Row] | None:
    """The result the case expects after its last run, or None when it expects none.

    That is the last run's ``expect_result``; otherwise the latest ``expect_result``
    (or the empty result before run 1) plus the ``expect_changelog`` of every later
    run, when each of them has one (a run's result is the previous result plus its
    changelog). Runs with ``expect_error`` change nothing.
    """
    runs = [r for r in case.get("runs", []) if "expect_error" not in r]
    start, base = 0, Counter()
    for i, run in enumerate(runs):
        if "expect_result" in run:
            start, base = i + 1, Counter(_key(r) for r in run["expect_result"])
    if start == 0 and not runs:
        return None
    for run in runs[start:]:
        if "expect_changelog" not in run:
            return None
        for kind, row in run["expect_changelog"]:
            base[_key(row)] += _SIGN[kind]
    if any(c < 0 for c in base.values()):
        return None
    return [json.loads(k) for k, c in base.items() for _ in range(c)]


def _key(row: Row) -> str:
    return json.dumps(row)
