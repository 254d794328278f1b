"""A small run planned in one partition: every leaf in one partition, so the run's one job needs no
shuffle; the same runs planned in two partitions shuffle, and give the same results."""
from __future__ import annotations

import threading

import pytest
from scenario import Scenario, delete, insert

from streamjoin import one_partition
from streamjoin.runtime import run, sizing
from streamjoin.storage import bucket_merge, state

SQL = "SELECT l.k, l.v, r.w FROM l {join} r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def left_join_runs(spark, tmp_path) -> Scenario:
    """Runs of a LEFT join with retractions, state folded into bucket files, and NULL keys."""
    m = Scenario(spark, tmp_path, SQL.format(join="LEFT JOIN"), **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20), insert(None, 5)], r=[insert(1, 100), insert(None, 7)])
    m.run(l=[delete(1, 10), insert(3, 30)], r=[insert(2, 200), delete(1, 100)])
    m.run(l=[insert(1, 11), delete(None, 5)], r=[delete(2, 200), insert(3, 300), insert(3, 301)])
    return m


EXPECTED = {(2, 20, None): 1, (3, 30, 300): 1, (3, 30, 301): 1, (1, 11, None): 1}


def test_a_small_left_join_run_with_retractions_runs_in_one_stage(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(state, "LEVEL0_FILES", 1)  # every run also reads and rewrites bucket files
    m = left_join_runs(spark, tmp_path)
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.report.metrics["spark_stages"] == 1, m.report.metrics
    assert m.result == EXPECTED


def test_a_small_run_spreads_a_merge_of_large_bucket_files_over_one_stage_more(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(state, "LEVEL0_FILES", 1)
    monkeypatch.setattr(bucket_merge, "SPREAD_BYTES", 1)  # every bucket file counts as large
    m = left_join_runs(spark, tmp_path)
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.report.metrics["spark_stages"] == 2, m.report.metrics  # the plan's, and the merges' after its shuffle
    assert m.result == EXPECTED


def test_the_same_runs_in_two_partitions_shuffle_and_agree(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(state, "LEVEL0_FILES", 1)
    monkeypatch.setattr(run, "shuffle_partitions", lambda read_bytes, parallelism: 2)
    monkeypatch.setattr(run, "in_one_partition", lambda change_bytes, read_bytes: False)
    m = left_join_runs(spark, tmp_path)
    assert m.report.metrics["spark_jobs"] == 1, m.report.metrics
    assert m.report.metrics["spark_stages"] > 3, m.report.metrics
    assert m.result == EXPECTED


def test_only_small_changes_on_a_state_one_partition_reads_are_planned_in_one_partition():
    kib = 1024
    assert sizing.in_one_partition(30 * kib, 600 * kib)  # 1k changes on a small state
    assert sizing.in_one_partition(30 * kib, 8 * sizing.MIN_BYTES)  # on a state of 200k changes: its tasks keep
    # the touched keys' rows as they read it, so Spark gets few rows
    assert not sizing.in_one_partition(1500 * kib, 1900 * kib)  # 100k narrow changes: keep both cores
    assert sizing.in_one_partition(30 * kib, sizing.ONE_PARTITION_READ_BYTES)  # one task reads what they touch
    assert not sizing.in_one_partition(30 * kib, sizing.ONE_PARTITION_READ_BYTES + 1)  # a state to read on every core


def test_a_three_way_multi_join_run_runs_in_one_stage(spark, tmp_path):
    sql = "SELECT a.k, a.v, b.w, c.x FROM a JOIN b ON a.k = b.k LEFT JOIN c ON a.k = c.k"
    m = Scenario(spark, tmp_path, sql, config={"join_strategy": "multi"},
                 a=[("k", "int"), ("v", "int")], b=[("k", "int"), ("w", "int")], c=[("k", "int"), ("x", "int")])
    m.run(a=[insert(1, 10), insert(2, 20)], b=[insert(1, 100), insert(2, 200)], c=[insert(2, 7)])
    m.run(a=[delete(2, 20), insert(3, 30)], b=[insert(3, 300)], c=[insert(1, 8), delete(2, 7)])
    assert [v["operator"] for v in m.report.metrics.values() if isinstance(v, dict) and "operator" in v] == ["3-way join"]
    assert m.report.metrics["spark_stages"] == 1, m.report.metrics
    assert m.result == {(1, 10, 100, 8): 1, (3, 30, 300, None): 1}


@pytest.mark.parametrize("join", ["JOIN", "FULL JOIN"])
def test_a_run_leaves_the_session_as_it_found_it(spark, tmp_path, join):
    rules = "spark.sql.optimizer.excludedRules"
    spark.conf.set(rules, "org.apache.spark.sql.catalyst.optimizer.ConstantFolding")
    try:
        m = Scenario(spark, tmp_path, SQL.format(join=join), **INPUTS)
        m.run(l=[insert(1, 10)], r=[insert(1, 100)])
        assert spark.conf.get(rules) == "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"
        assert not one_partition.active()
    finally:
        spark.conf.unset(rules)


def test_the_scope_is_the_deciding_thread_s_alone(spark):
    frame = spark.range(4)
    seen: list[bool] = []
    with one_partition.scope() as decide:
        assert not one_partition.active()
        decide(True)
        gathered = one_partition.gathered(frame)
        other = threading.Thread(target=lambda: seen.append(one_partition.active()))
        other.start()
        other.join()
    assert seen == [False]  # another thread (a dbt thread's run) plans as it decides
    assert not one_partition.active()
    assert gathered.rdd.getNumPartitions() == 1 and sorted(r.id for r in gathered.collect()) == [0, 1, 2, 3]
    assert one_partition.gathered(frame) is frame
