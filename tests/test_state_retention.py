"""State retention (state_ttl) and state compaction: what leaves state, and when."""
from __future__ import annotations

import time

import pyarrow as pa
from deltalake import DeltaTable

import streamjoin.state
from scenario import Scenario, delete, insert

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def live_files(path: str) -> int:
    return len(pa.table(DeltaTable(path).get_add_actions(flatten=True)))


def test_idle_rows_leave_state_after_the_ttl(spark, tmp_path):
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
    import pytest

    from streamjoin import ConfigError, ModelConfig

    with pytest.raises(ConfigError, match="on_missing_retraction='ignore'"):
        ModelConfig.from_dict({"state_ttl": "1 hour", "on_missing_retraction": "fail"})


def test_crowded_buckets_are_compacted_without_changing_results(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(streamjoin.state, "COMPACT_AT", 3)
    m = Scenario(spark, tmp_path, SQL, config={"state_buckets": 1}, **INPUTS)
    state = m.tables.state("j1_left")
    for i in range(5):
        m.run(l=[insert(1, i)] + ([delete(1, i - 1)] if i else []), r=[insert(1, 100 + i)])
        assert live_files(state) <= 3
    assert m.result == {(1, 4, 100 + j): 1 for j in range(5)}
