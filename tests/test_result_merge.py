"""Result buckets a run retracts from, merged in Arrow by the tasks that read them (`bucket_merge`).

Arrow must tell rows apart exactly as Spark's grouping does, or a retraction would miss its row (or
hit another): the property test drives doubles with -0.0 and NaN, NULLs, decimals, timestamps,
strings, duplicate rows, updates and deletes through runs that retract, against batch evaluation, and the same
runs through the Spark merge that types Arrow cannot group take.
"""
from __future__ import annotations

import datetime as dt
import doctest
import math
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (ArrayType, DoubleType, IntegerType, NullType, StringType, StructField, StructType,
                               TimestampType)

from streamjoin.storage import bucket_merge
from streamjoin.storage.bucket_merge import WEIGHT, expanded, merged, mergeable

from scenario import Scenario, compacting_at, delete, insert, runs_match_batch
from test_regular_properties import changelog_runs

INPUTS = {"l": [("k", "int"), ("x", "double"), ("s", "string")],
          "r": [("k", "int"), ("d", "decimal(10,2)"), ("t", "timestamp")]}
JOINS = ["SELECT l.k, l.x, l.s, r.d, r.t FROM l LEFT JOIN r ON l.k = r.k",
         "SELECT l.x, r.d FROM l FULL JOIN r ON l.k = r.k",
         "SELECT l.s, l.x FROM l JOIN r ON l.k <=> r.k"]
DOUBLES = st.sampled_from([None, 0.0, -0.0, 1.5, math.nan])
ROWS = {"l": st.tuples(st.sampled_from([None, 1, 2]), DOUBLES, st.sampled_from([None, "a", "A"])),
        "r": st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, Decimal("1.50"), Decimal("-2.00")]),
                       st.sampled_from([None, dt.datetime(2026, 1, 1, 12), dt.datetime(1969, 12, 31, 23, 59)]))}


def comparable(rows: Counter) -> Counter:
    """NaN never equals itself: compare it as text."""
    return Counter({tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row): n
                    for row, n in rows.items()})


def check_runs(spark, root, sql: str, changes: list[dict]) -> None:
    with compacting_at(2, 1):  # every retracting run folds level 0, so later runs merge bucket files (and crowded ones)
        runs_match_batch(Scenario(spark, root, sql, **INPUTS), sql, INPUTS, changes, comparable)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=st.sampled_from(JOINS), changes=changelog_runs(runs=4, rows=ROWS))
def test_arrow_merges_of_retracted_buckets_match_batch(spark, tmp_path_factory, sql, changes):
    check_runs(spark, tmp_path_factory.mktemp("merge"), sql, changes)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=st.sampled_from(JOINS), changes=changelog_runs(runs=4, rows=ROWS))
def test_spark_merges_match_batch_too(spark, tmp_path_factory, sql, changes, monkeypatch_module):
    monkeypatch_module.setattr(bucket_merge, "mergeable", lambda schema: False)
    check_runs(spark, tmp_path_factory.mktemp("spark"), sql, changes)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_retractions_merge_in_arrow_and_replace_only_the_buckets_they_touch(spark, tmp_path):
    """Both merges run in the same one Spark job, and a bucket no retraction touches keeps its files."""
    from streamjoin.storage import delta_log

    with compacting_at(2, 1):
        model = Scenario(spark, tmp_path, "SELECT l.k, l.s FROM l JOIN r ON l.k = r.k", **INPUTS)
        model.run(l=[insert(k, 1.0, f"s{k}") for k in range(40)], r=[insert(k, None, None) for k in range(40)])
        model.run(l=[delete(3, 1.0, "s3")])  # folds level 0 into buckets
        before = {f.uri for f in delta_log.data_files(model.tables.result, delta_log.version(model.tables.result))}
        model.run(l=[delete(5, 1.0, "s5"), insert(5, 2.0, "t5")])
        after = {f.uri for f in delta_log.data_files(model.tables.result, delta_log.version(model.tables.result))}
    assert model.report.metrics["spark_jobs"] == 1
    assert model.changelog == Counter({(5, "s5"): -1, (5, "t5"): 1})
    assert model.result == Counter({(k, f"s{k}"): 1 for k in range(40) if k not in (3, 5)} | {(5, "t5"): 1})
    assert len(before - after) == 1, "only the retracted row's bucket is replaced"
    assert len(before & after) == len(before) - 1


def test_merged_rows_group_as_spark_groups_them():
    held = pa.table({"x": pa.array([0.0, -0.0, math.nan, None, None], pa.float64()),
                     "s": ["a", "a", "b", None, None]})
    change = pa.table({"x": pa.array([-0.0, float("-nan"), None], pa.float64()), "s": ["a", "b", None],
                       WEIGHT: pa.array([-1, -1, -3], pa.int64())})
    rows = {(None if r["x"] is None else ("NaN" if math.isnan(r["x"]) else r["x"]), r["s"]): r[WEIGHT]
            for r in merged(held, change).to_pylist()}
    assert rows == {(0.0, "a"): 1, (None, None): -1}  # -0.0 is 0.0, NaNs are one NaN, NULLs are equal
    (zero,) = [r["x"] for r in merged(held, change).to_pylist() if r["s"] == "a"]
    assert math.copysign(1, zero) == 1  # written back as Spark's grouping writes it: 0.0
    assert expanded(merged(held.slice(0, 0), change.slice(0, 0))).num_rows == 0


def test_only_flat_types_of_binary_collation_merge_in_arrow():
    flat = StructType([StructField("a", IntegerType()), StructField("x", DoubleType()),
                       StructField("s", StringType()), StructField("t", TimestampType())])
    assert mergeable(flat)
    assert not mergeable(StructType([*flat.fields, StructField("l", ArrayType(IntegerType()))]))
    assert not mergeable(StructType([StructField("s", StringType("UTF8_LCASE"))]))
    assert not mergeable(StructType([StructField("n", NullType())]))


def test_bucket_merge_examples():
    assert doctest.testmod(bucket_merge).failed == 0


def _counted(rows: pa.Table) -> Counter:
    """Rows as a multiset, -0.0 as 0.0 and NaN as text (as Spark's grouping tells them apart)."""
    return Counter(tuple("NaN" if isinstance(v, float) and math.isnan(v) else (0.0 if v == 0.0 and isinstance(v, float)
                                                                                else v) for v in r.values())
                   for r in rows.to_pylist())


CELLS = st.tuples(st.sampled_from([None, 0.0, -0.0, 1.5, math.nan]), st.sampled_from([None, "a", "b"]))


@settings(max_examples=200, deadline=None)
@given(held=st.lists(CELLS, max_size=12), change=st.lists(st.tuples(CELLS, st.integers(-3, 3)), max_size=8),
       compared=st.sampled_from([bucket_merge.COMPARED, 0]), sliced=st.sampled_from([bucket_merge.SLICED_DROPS, 0]))
def test_applying_a_change_keeps_what_merging_the_bucket_keeps(held, change, compared, sliced, monkeypatch_module):
    """`applied` (only the stored rows a retraction may equal are compared; with `COMPARED` at 0 every
    bucket is merged whole; with `SLICED_DROPS` at 0 the rows it drops are filtered out, not sliced
    around) keeps exactly the rows, and finds exactly the unmet retractions, of a whole merge: the
    property that lets it skip grouping the bucket."""
    monkeypatch_module.setattr(bucket_merge, "COMPARED", compared)
    monkeypatch_module.setattr(bucket_merge, "SLICED_DROPS", sliced)
    types = [pa.float64(), pa.string()]
    table = pa.table([pa.array([r[i] for r in held], t) for i, t in enumerate(types)], names=["x", "s"])
    delta = pa.table([pa.array([r[i] for r, _ in change], t) for i, t in enumerate(types)]
                     + [pa.array([w for _, w in change], pa.int64())], names=["x", "s", WEIGHT])
    sums = merged(table, delta)
    kept, short = bucket_merge.applied(table, delta)
    assert kept.schema == table.schema
    assert _counted(kept) == _counted(expanded(sums))
    assert _counted(short) == _counted(sums.filter(pa.compute.less(sums[WEIGHT], 0)))
