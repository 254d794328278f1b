"""The multi-way conformance cases pass under both join strategies.

tests/test_conformance.py runs every case with the strategy its config chooses; here each
multi-way case runs again with the other one (or, without a common key, `multi` must refuse it).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin.sql.compiler import compile_sql
from streamjoin.conformance import run_case
from streamjoin.errors import CompileError
from streamjoin.sql.plan import MultiJoin
from streamjoin.spec import InputSpec, ModelConfig

CASES = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "cases"
PATHS = sorted([*CASES.glob("seed-multi-join-*.json"), *CASES.glob("flink-multijoin-*.json")])
NO_COMMON_KEY = {"seed-multi-join-left-then-inner": "j2 (INNER JOIN c ON b.c_ref = c.id)"}


def compiled(case: dict):
    specs = {n: InputSpec.from_dict(n, raw) for n, raw in case["inputs"].items()}
    return compile_sql(case["name"], case["sql"], specs, ModelConfig.from_dict(case.get("config")))


def with_other_strategy(case: dict) -> dict:
    """The case with the strategy its own config does not choose."""
    other = "binary" if isinstance(compiled(case).root, MultiJoin) else "multi"
    return {**case, "config": {**(case.get("config") or {}), "join_strategy": other}}


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_case_passes_under_the_other_strategy(spark, path: Path):
    case = with_other_strategy(json.loads(path.read_text()))
    if case["config"]["join_strategy"] == "multi" and case["name"] in NO_COMMON_KEY:
        with pytest.raises(CompileError, match=NO_COMMON_KEY[case["name"]].replace("(", r"\(").replace(")", r"\)")):
            compiled(case)
        return
    outcome = run_case(spark, case)
    assert outcome["ok"], outcome["error"]


def test_cases_exist():
    assert len(PATHS) >= 5
