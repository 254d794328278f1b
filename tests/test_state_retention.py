"""State retention (state_ttl) and state compaction: what leaves state, and when."""
from __future__ import annotations

import doctest
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from streamjoin.storage import state

from scenario import Scenario, compacting_at, delete, insert

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def live_files(path: str) -> list[dict]:
    return pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()


@pytest.mark.parametrize("compaction", [(state.COMPACT_AT, state.LEVEL0_FILES), (1, 1)],
                         ids=["default", "compacting every run"])
def test_idle_rows_leave_state_after_the_ttl(spark, tmp_path, compaction):
    with compacting_at(*compaction):
        check_idle_rows_leave_state(spark, tmp_path)


def check_idle_rows_leave_state(spark, tmp_path) -> None:
    m = Scenario(spark, tmp_path, SQL, config={"state_ttl": "1 second"}, **INPUTS)
    m.run(r=[insert(1, 100)])
    time.sleep(1.5)
    m.run(l=[insert(1, 10)])  # r's row idled past the TTL: it no longer matches
    assert m.result == {(1, 10, None): 1}
    m.run(r=[delete(1, 100)])  # its late retraction finds nothing and is dropped, as in Flink
    assert m.result == {(1, 10, None): 1}


def test_rows_within_the_ttl_still_match(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, config={"state_ttl": "1 hour"}, **INPUTS)
    m.run(r=[insert(1, 100)])
    assert m.run(l=[insert(1, 10)]).changelog == {(1, 10, 100): 1}


def test_ttl_with_failing_retractions_is_a_config_error():
    from streamjoin import ConfigError, ModelConfig

    with pytest.raises(ConfigError, match="on_missing_retraction='ignore'"):
        ModelConfig.from_dict({"state_ttl": "1 hour", "on_missing_retraction": "fail"})


def test_state_files_stay_few_as_runs_fold_level0_and_compact_buckets(spark, tmp_path):
    with compacting_at(2, 2):
        m = Scenario(spark, tmp_path, SQL, config={"state_buckets": 1}, **INPUTS)
        state_table = m.tables.state("j1_left")
        seen = []
        for i in range(8):
            m.run(l=[insert(1, i)] + ([delete(1, i - 1)] if i else []), r=[insert(1, 100 + i)])
            files = live_files(state_table)
            level0 = [f for f in files if f["partition._bucket"] is None]
            seen.append((len(level0), len(files) - len(level0)))
            assert len(level0) <= 2 + 2 and len(files) - len(level0) <= 2, f"run {i}: {seen}"
        assert m.result == {(1, 7, 100 + j): 1 for j in range(8)}
    assert any(b for _, b in seen), f"level 0 was never folded into buckets: {seen}"
    assert any(b2 < b1 for (_, b1), (_, b2) in zip(seen, seen[1:])), f"no bucket was ever compacted: {seen}"


def test_result_additions_go_to_level0_which_retractions_and_crowding_fold(spark, tmp_path):
    sql = "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k"
    with compacting_at(8, 3):
        m = Scenario(spark, tmp_path, sql, **INPUTS)
        m.run(r=[insert(1, 100)])
        levels = []
        for i in range(4):  # insert-only runs of one row each: level 0 grows to 3 files, then a run folds it
            m.run(l=[insert(1, i)])
            levels.append(sum(f["partition._bucket"] is None for f in live_files(m.tables.result)))
        assert levels == [1, 2, 3, 0], levels
        m.run(l=[insert(1, 9)])
        m.run(l=[delete(1, 0)])  # a retraction folds level 0 too
        assert all(f["partition._bucket"] is not None for f in live_files(m.tables.result))
    assert m.result == {(1, i, 100): 1 for i in (1, 2, 3, 9)}


def test_compaction_examples():
    assert doctest.testmod(state).failed == 0


def test_a_crowded_bucket_merges_its_small_files_and_keeps_its_large_one(spark, tmp_path):
    with compacting_at(4, 1):
        m = Scenario(spark, tmp_path, SQL, config={"state_buckets": 1}, **INPUTS)
        path = m.tables.state("j1_left")
        m.run(l=[insert(k, k) for k in range(20_000)])
        m.run(l=[insert(5000, 0)])  # folds level 0: the first run's rows become the bucket's one large file
        (large,) = [f["path"] for f in live_files(path) if f["partition._bucket"] is not None]
        counts = []
        for i in range(1, 10):  # small runs, each retracting a row the large file holds; the 4th fold compacts
            m.run(l=[insert(5000 + i, i), delete(i, i)])
            bucket = [f["path"] for f in live_files(path) if f["partition._bucket"] is not None]
            counts.append(len(bucket))
            assert large in bucket, f"run {i}: the large file was rewritten for a small fold"
            assert len(bucket) <= state.COMPACT_AT, f"run {i}: {counts}"
        assert any(b < a for a, b in zip(counts, counts[1:])), f"no bucket was ever compacted: {counts}"
        assert m.result == {**{(k, k, None): 1 for k in range(10, 20_000)}, (0, 0, None): 1,
                            **{(5000 + i, i, None): 1 for i in range(10)}}


def test_crowded_result_buckets_are_compacted_by_folds_and_by_retracting_runs(spark, tmp_path):
    sql = "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k"
    with compacting_at(3, 1):  # every run folds level 0 into the result's buckets
        m = Scenario(spark, tmp_path, sql, config={"state_buckets": 2}, **INPUTS)
        counts, expected = [], {}

        def bucket_files() -> list[int]:
            files = [f["partition._bucket"] for f in live_files(m.tables.result) if f["partition._bucket"] is not None]
            return [files.count(b) for b in sorted(set(files))]

        for i in range(8):  # insert-only runs: each fold adds a file to the buckets it writes
            keys = [10 * i + j for j in range(4)]
            m.run(l=[insert(k, i) for k in keys], r=[insert(k, 7) for k in keys])
            expected.update({(k, i, 7): 1 for k in keys})
            counts.append(bucket_files())
            assert max(counts[-1], default=0) <= state.COMPACT_AT, f"run {i}: {counts}"
        for i in range(8):  # retracting runs: one row's retraction rewrites its bucket; the others gain files
            m.run(l=[delete(10 * i, i), insert(1000 + i, i)], r=[insert(1000 + i, 7)])
            del expected[(10 * i, i, 7)]
            expected[(1000 + i, i, 7)] = 1
            counts.append(bucket_files())
            assert max(counts[-1]) <= state.COMPACT_AT, f"retracting run {i}: {counts}"
        assert m.result == expected
