"""A run's Spark jobs, counted by the status store and written to the run log: the one-pass design
(one write pass for every table; state and result files chosen inside it) must not grow back job by job."""
from __future__ import annotations

import pytest

from scenario import Scenario, delete, insert

from streamjoin.storage import state

SQL = "SELECT l.k, l.v, r.w FROM l {join} r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def test_an_insert_only_binary_run_takes_one_spark_job(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(state, "LEVEL0_FILES", 1)  # every run folds level 0 into bucket files
    m = Scenario(spark, tmp_path, SQL.format(join="JOIN"), **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20)], r=[insert(1, 100)])
    m.run(l=[insert(3, 30)], r=[insert(2, 200), insert(3, 300)])
    m.run(l=[insert(2, 21), insert(4, 40)], r=[insert(1, 101)])
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.report.metrics["j1"]["touched_keys"] == 3, m.report.metrics
    assert m.result == {(1, 10, 100): 1, (2, 20, 200): 1, (3, 30, 300): 1, (1, 10, 101): 1, (2, 21, 200): 1}


def test_a_first_run_with_an_input_that_has_no_changes_yet_takes_one_spark_job(spark, tmp_path):
    """An empty input's file says nothing of its row kinds, and needs not: no job counts them."""
    m = Scenario(spark, tmp_path, SQL.format(join="LEFT JOIN"), **INPUTS)
    m.run(l=[insert(1, 10)])
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.result == {(1, 10, None): 1}


def test_a_left_join_run_with_retractions_takes_one_spark_job(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(state, "LEVEL0_FILES", 1)
    m = Scenario(spark, tmp_path, SQL.format(join="LEFT JOIN"), **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20)], r=[insert(1, 100)])
    m.run(l=[delete(1, 10), insert(3, 30)], r=[insert(2, 200), delete(1, 100)])
    m.run(l=[insert(1, 11)], r=[delete(2, 200), insert(3, 300)])
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.report.rows_out == {"+": 3, "-": 2}, m.report.rows_out
    assert m.result == {(2, 20, None): 1, (3, 30, 300): 1, (1, 11, None): 1}


def test_every_second_of_a_run_before_its_commits_is_in_a_phase(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL.format(join="JOIN"), **INPUTS)
    m.run(l=[insert(1, 10)], r=[insert(1, 100)])
    phases = m.report.metrics["phases_s"]
    assert set(phases) == {"plan", "read", "join", "write", "count"}, phases
    assert sum(phases.values()) <= m.report.seconds <= sum(phases.values()) + 5.0, (phases, m.report.seconds)


TIMED = {"columns": [["k", "int"], ["v", "int"], ["ts", "timestamp"]], "event_time": "ts"}
TIME_JOINS = {
    "interval": "SELECT a.k, a.v, b.v AS bv FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts AND b.ts + INTERVAL '1' MINUTE",
    "window": "SELECT A.k, A.v, B.v AS bv, A.window_start FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) A "
              "JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) B "
              "ON A.k = B.k AND A.window_start = B.window_start AND A.window_end = B.window_end",
    "temporal": "SELECT a.k, a.v, b.v AS bv FROM a JOIN b FOR SYSTEM_TIME AS OF a.ts AS b ON a.k = b.k",
}


@pytest.mark.parametrize("kind", sorted(TIME_JOINS))
def test_a_time_based_join_takes_its_watermark_from_its_files_footers_in_one_spark_job(spark, tmp_path, kind):
    """Each input's largest event time this run comes from its files' footers (`storage.time_range`),
    not from a Spark job ahead of the write pass; the joins' results are checked elsewhere."""
    from streamjoin.conformance import CaseRunner
    from streamjoin.runtime.run import run_once

    inputs = {"a": TIMED, "b": {**TIMED, "unique_key": ["k"]} if kind == "temporal" else TIMED}
    runner = CaseRunner(spark, {"name": kind, "sql": TIME_JOINS[kind], "inputs": inputs, "runs": []}, str(tmp_path))
    runs = [{"a": [["+I", [1, 10, "2024-01-01 00:00:20"]]], "b": [["+I", [1, 100, "2024-01-01 00:00:10"]]]},
            {"a": [["+I", [2, 20, "2024-01-01 00:03:00"]]], "b": [["+I", [2, 200, "2024-01-01 00:03:00"]]]}]
    for i, changes in enumerate(runs):
        runner.append_changes(i, changes)
        report = run_once(spark, runner.plan, runner.tables)
        assert report.metrics["spark_jobs"] == 1, (kind, i, report.metrics)
    assert (1, 10, 100) in {r[:3] for r in runner.result()}, kind
