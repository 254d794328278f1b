"""A run's Spark jobs, counted by the status store and written to the run log: the one-pass design
(touched buckets, then one write pass for every table) must not grow back job by job."""
from __future__ import annotations

from scenario import Scenario, delete, insert

SQL = "SELECT l.k, l.v, r.w FROM l {join} r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def test_an_insert_only_binary_run_takes_two_spark_jobs(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL.format(join="JOIN"), **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20)], r=[insert(1, 100)])
    m.run(l=[insert(3, 30)], r=[insert(2, 200), insert(3, 300)])
    assert m.report.metrics["spark_jobs"] == 2, m.report.metrics
    assert m.result == {(1, 10, 100): 1, (2, 20, 200): 1, (3, 30, 300): 1}


def test_a_left_join_run_with_retractions_takes_three_spark_jobs(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL.format(join="LEFT JOIN"), **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20)], r=[insert(1, 100)])
    m.run(l=[delete(1, 10), insert(3, 30)], r=[insert(2, 200), delete(1, 100)])
    assert m.report.metrics["spark_jobs"] == 3, m.report.metrics
    assert m.result == {(2, 20, 200): 1, (3, 30, None): 1}


def test_every_second_of_a_run_before_its_commits_is_in_a_phase(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL.format(join="JOIN"), **INPUTS)
    m.run(l=[insert(1, 10)], r=[insert(1, 100)])
    phases = m.report.metrics["phases_s"]
    assert set(phases) == {"plan", "read", "join", "write", "count"}, phases
    assert sum(phases.values()) <= m.report.seconds <= sum(phases.values()) + 5.0, (phases, m.report.seconds)
