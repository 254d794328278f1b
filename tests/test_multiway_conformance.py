"""The multi-way conformance cases pass under both join strategies."""
from __future__ import annotations

import glob
import json
import os

import pytest

from streamjoin.compiler import compile_sql
from streamjoin.conformance import run_case
from streamjoin.errors import CompileError
from streamjoin.spec import InputSpec, ModelConfig

CASES = "/work/shared/conformance/cases"
PATHS = sorted(glob.glob(f"{CASES}/seed-multi-join-*.json") + glob.glob(f"{CASES}/flink-multijoin-*.json"))
NO_COMMON_KEY = {"seed-multi-join-left-then-inner": "j2 (INNER JOIN c ON b.c_ref = c.id)"}


def load(path: str, strategy: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        case = json.load(fh)
    return {**case, "config": {**(case.get("config") or {}), "join_strategy": strategy}}


@pytest.mark.parametrize("strategy", ["binary", "multi"])
@pytest.mark.parametrize("path", PATHS, ids=[os.path.basename(p)[:-5] for p in PATHS])
def test_case_passes(spark, path, strategy):
    case = load(path, strategy)
    if strategy == "multi" and case["name"] in NO_COMMON_KEY:
        specs = {n: InputSpec.from_dict(n, raw) for n, raw in case["inputs"].items()}
        with pytest.raises(CompileError, match=NO_COMMON_KEY[case["name"]].replace("(", r"\(").replace(")", r"\)")):
            compile_sql(case["name"], case["sql"], specs, ModelConfig.from_dict(case["config"]))
        return
    outcome = run_case(spark, case)
    assert outcome["ok"], outcome["error"]


def test_cases_exist():
    assert len(PATHS) >= 5
