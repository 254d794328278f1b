"""Flink as the oracle of case files: run through real Flink, each case ends where the case says."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))
from client import run_reports  # noqa: E402
from compare import expected_final_result, same_result  # noqa: E402


def assert_flink_ends_where_cases_end(paths: Iterable[Path]) -> None:
    """Each case file of `paths`, run in one Flink process, ends with the case's final result
    (`compare.expected_final_result`)."""
    cases = [json.loads(p.read_text()) for p in paths]
    reports, stderr = run_reports(cases)
    for case, report in zip(cases, reports):
        assert report["ok"], f"{case['name']}: Flink failed: {report['error']}\n{stderr[-3000:]}"
        same, why = same_result(expected_final_result(case), report["result"], report["columns"])
        assert same, f"{case['name']}: Flink's final result differs from the case's: {why}"
