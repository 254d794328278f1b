"""Every shared conformance case passes through the real pipeline (compiler, operators, Delta state)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streamjoin.conformance import run_case

CASES_DIR = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "cases"
CASES = sorted(CASES_DIR.glob("*.json"))


def test_the_shared_cases_are_there():
    assert CASES, f"no conformance cases found in {CASES_DIR}: the shared/ folder must sit beside the repository"


@pytest.fixture(scope="module")
def outcomes(spark):
    """Run every case once; small runs are latency-bound, so three cases share the session at a time."""
    cases = [json.loads(p.read_text()) for p in CASES]
    with ThreadPoolExecutor(max_workers=3) as pool:
        return {p.stem: outcome for p, outcome in zip(CASES, pool.map(lambda c: run_case(spark, c), cases))}


@pytest.mark.parametrize("name", [p.stem for p in CASES])
def test_case(outcomes, name):
    outcome = outcomes[name]
    assert outcome["ok"], outcome["error"]
