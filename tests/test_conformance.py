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


@pytest.fixture
def tests_settings_kept(spark):
    """The runner's `local_session` returns the tests' session here, with streamjoin's defaults set on
    it (200 shuffle partitions among them): put the tests' settings back for the tests that follow."""
    from streamjoin.runtime.run import session_conf
    from streamjoin.session import DEFAULTS

    with session_conf(spark, {key: None for key in DEFAULTS if spark.conf.isModifiable(key)}):
        yield


def test_the_runner_prints_a_line_per_case_and_a_summary_and_fails_on_a_mismatch(spark, tmp_path, capsys,
                                                                                  tests_settings_kept):
    from streamjoin.conformance import main

    good = CASES_DIR / "flink-semi-itcase-join.json"
    wrong = json.loads(good.read_text())
    wrong["name"] = "wrong-expectation"
    wrong["runs"][-1]["expect_result"] = wrong["runs"][-1]["expect_result"][1:]  # one row too few
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    assert main([str(good)]) == 0
    out = capsys.readouterr()
    assert [json.loads(line)["ok"] for line in out.out.splitlines()] == [True]
    assert out.err.strip().endswith("1 of 1 cases ok")
    assert main([str(good), str(tmp_path / "wrong.json")]) == 1
    out = capsys.readouterr()
    assert {json.loads(line)["case"]: json.loads(line)["ok"] for line in out.out.splitlines()} == {
        "flink-semi-itcase-join": True, "wrong-expectation": False}
    assert out.err.strip().endswith("1 of 2 cases ok; failed: wrong-expectation")
