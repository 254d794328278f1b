"""State reads that keep only the touched keys' rows as the files are read (`file_reads.read_chosen` with `keys`).

The filter runs in Arrow, so it must keep every row Spark's equality would match: the property
test drives string, date and mixed int/bigint keys, NULL keys under `=` and `<=>`, and a computed
key (which reads whole buckets instead), through bucketed state, against batch evaluation.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import DateType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from streamjoin.storage.file_reads import row_groups_with, rows_with_keys
from streamjoin.storage.parquet_files import FOLDED_ROW_GROUP_ROWS
from streamjoin.storage.state import plain_key_columns

from scenario import Scenario, compacting_at, insert, runs_match_batch
from test_regular_properties import changelog_runs

INPUTS = {"l": [("s", "string"), ("d", "date"), ("v", "int")], "r": [("s", "string"), ("d", "date"), ("w", "bigint")]}
JOINS = [
    "SELECT l.s, l.d, l.v, r.w FROM l JOIN r ON l.s = r.s AND l.d = r.d",
    "SELECT l.s, l.v, r.s AS rs, r.w FROM l LEFT JOIN r ON l.s <=> r.s",
    "SELECT l.s, l.v, r.w FROM l FULL JOIN r ON l.v = r.w",
    "SELECT l.s, l.d, r.d AS rd FROM l JOIN r ON lower(l.s) = r.s",
    "SELECT l.s, l.v FROM l LEFT ANTI JOIN r ON l.d <=> r.d AND l.v < r.w",
]
STRINGS = st.sampled_from([None, "a", "b", "A", "é"])
DATES = st.sampled_from([None, dt.date(2024, 1, 1), dt.date(1969, 12, 31)])


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=st.sampled_from(JOINS),
       changes=changelog_runs(rows={name: st.tuples(STRINGS, DATES, st.integers(0, 2)) for name in INPUTS}))
def test_keyed_reads_of_bucketed_state_match_batch(spark, tmp_path_factory, sql, changes):
    with compacting_at(1, 1):  # every run folds level 0, so later runs read bucket files
        runs_match_batch(Scenario(spark, tmp_path_factory.mktemp("k"), sql, **INPUTS), sql, INPUTS, changes)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=st.sampled_from(JOINS),
       changes=changelog_runs(rows={name: st.tuples(STRINGS, DATES, st.integers(0, 2)) for name in INPUTS}))
def test_keyed_reads_of_a_large_level0_match_batch(spark, tmp_path_factory, sql, changes):
    # level 0 counts as large from one row: a run that finds rows there reads them by key, then folds them
    with compacting_at(8, 16, level0_rows=1):
        runs_match_batch(Scenario(spark, tmp_path_factory.mktemp("l0"), sql, **INPUTS), sql, INPUTS, changes)


def test_only_bare_columns_of_exactly_comparable_types_filter_in_arrow():
    schema = StructType([StructField("a", IntegerType()), StructField("b", StringType()),
                         StructField("c", DateType()), StructField("x", DoubleType()), StructField("n`m", LongType())])
    assert plain_key_columns(schema, ["`a`", "b", "`n``m`"], ["bigint", "string", "bigint"]) == ("a", "b", "n`m")
    assert plain_key_columns(schema, ["`c`"], ["date"]) == ("c",)
    assert plain_key_columns(schema, ["`a`"], ["string"]) == ()  # a cast to text: '1' vs 1
    assert plain_key_columns(schema, ["`x`"], ["double"]) == ()  # -0.0 and NaN compare differently
    assert plain_key_columns(schema, ["lower(`b`)"], ["string"]) == ()
    assert plain_key_columns(schema, ["`a`", "`x`"], ["int", "double"]) == ()


def test_rows_with_keys_keep_matches_and_null_keys_once():
    table = pa.table({"a": pa.array([1, 1, 2, None, 2], pa.int32()), "b": ["x", "y", "x", "x", None],
                      "t": pa.array([0, 5, 10, 0, 10], pa.timestamp("us", tz="UTC")), "v": [1, 2, 3, 4, 5]})
    wanted = pa.table({"a": pa.array([1, 2, 2], pa.int64()), "b": ["y", "x", "x"]})
    assert rows_with_keys(table, wanted)["v"].to_pylist() == [2, 3, 4, 5]
    by_time = pa.table({"t": pa.array([10], pa.timestamp("us", tz="UTC"))})
    assert rows_with_keys(table, by_time)["v"].to_pylist() == [3, 5]
    assert rows_with_keys(table.slice(0, 0), wanted).num_rows == 0
    none = pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())})
    assert Counter(rows_with_keys(table, none)["v"].to_pylist()) == Counter([4, 5])


KEYS = st.one_of(st.none(), st.integers(-3, 40))


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(KEYS, max_size=60), wanted=st.lists(KEYS, max_size=8), sort=st.booleans(),
       group=st.integers(1, 9), wide=st.booleans())
def test_row_groups_a_read_skips_hold_no_wanted_key(tmp_path_factory, keys, wanted, sort, group, wide):
    """A read with wanted keys skips the row groups whose statistics rule them out: it keeps what a
    whole read keeps (rows of the wanted keys, rows with a NULL key), each at its place in the file,
    for sorted and unsorted files, int32 and int64 keys, any row group size."""
    import pyarrow.parquet as pq

    from streamjoin.storage.file_reads import ROW_POSITION, read_file, row_groups_with

    if sort:
        keys = sorted(keys, key=lambda k: (k is None, k or 0))
    path = str(tmp_path_factory.mktemp("groups") / "f.parquet")
    kind = pa.int64() if wide else pa.int32()
    pq.write_table(pa.table({"k": pa.array(keys, kind), "v": list(range(len(keys)))}), path, row_group_size=group)
    schema = pa.schema([("k", kind), ("v", pa.int64()), (ROW_POSITION, pa.int64())])
    asked = pa.table({"k": pa.array(wanted, pa.int64())})
    whole = rows_with_keys(read_file(path, schema, {}), asked).to_pylist()
    assert rows_with_keys(read_file(path, schema, {}, wanted=asked), asked).to_pylist() == whole
    assert all(r["v"] == r[ROW_POSITION] for r in whole)
    meta = pq.ParquetFile(path).metadata
    chosen = [g for g in row_groups_with(meta, asked) if meta.row_group(g).num_rows]  # (an empty file: one empty group)
    parts = [keys[g * group:(g + 1) * group] for g in range(meta.num_row_groups)]
    holding = [g for g, part in enumerate(parts) if any(k is None or k in wanted for k in part)]
    spanning = [g for g, part in enumerate(parts) if part and (None in part or any(
        min(part) <= w <= max(part) for w in wanted if w is not None))]
    # every group holding a wanted key or a NULL is read; a group is read only if its range spans a wanted key
    assert set(holding) <= set(chosen) and chosen == spanning


def test_a_read_of_keys_in_a_column_that_is_not_an_integer_reads_every_row_group(tmp_path):
    import pyarrow.parquet as pq

    from streamjoin.storage.file_reads import row_groups_with

    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"s": ["a", "b", "c", "d"], "i": [1, 2, 3, 4]}), path, row_group_size=1)
    meta = pq.ParquetFile(path).metadata
    assert row_groups_with(meta, pa.table({"s": ["a"]})) is None
    assert row_groups_with(meta, pa.table({"i": pa.array([3], pa.int64())})) == [2]
    assert row_groups_with(meta, pa.table({"x": pa.array([3], pa.int64())})) is None


def test_a_folded_bucket_file_is_read_by_the_row_groups_of_the_touched_keys(spark, tmp_path):
    # one bucket: its file holds every key, sorted, in row groups of at most FOLDED_ROW_GROUP_ROWS rows
    sql, inputs = "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k", {"l": [("k", "bigint"), ("v", "int")],
                                                                      "r": [("k", "bigint"), ("w", "int")]}
    keys = 3 * FOLDED_ROW_GROUP_ROWS + 1
    with compacting_at(1, 1):
        model = Scenario(spark, tmp_path, sql, config={"state_buckets": 1}, **inputs)
        runs_match_batch(model, sql, inputs, [{"l": [insert(k, k % 7) for k in range(keys)]},
                                              {"r": [insert(5, 1), insert(keys - 1, 2)]}])
    (left,) = [p for p in model.tables.state_tables() if p.endswith("_left")]
    files = [pq.ParquetFile(uri).metadata for uri in DeltaTable(left).file_uris()]
    (bucket,) = [m for m in files if m.num_rows == keys]
    assert bucket.num_row_groups == 4
    assert all(bucket.row_group(g).num_rows <= FOLDED_ROW_GROUP_ROWS for g in range(bucket.num_row_groups))
    key = bucket.schema.column(0).name
    assert row_groups_with(bucket, pa.table({key: pa.array([keys - 1], pa.int64())})) == [3]
