"""An input's event-time range read from its files' Parquet footers (`storage.time_range`), against
Spark's own minimum and maximum over the same files; where a footer cannot say it exactly, no range."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from streamjoin.storage.delta_log import DataFile
from streamjoin.storage.time_range import TimeRange, time_range

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
MICROS = st.one_of(st.none(), st.integers(-10**15, 10**15))  # about 1938 to 2001, before and after the epoch


def _write(path, values, unit: str, *, row_group_size: int = 1 << 20, column: str = "ts", **options) -> DataFile:
    scale = {"ms": 1000, "us": 1}[unit]
    stamps = pa.array([None if v is None else v // scale for v in values], pa.int64()).cast(pa.timestamp(unit, "UTC"))
    pq.write_table(pa.table({column: stamps, "x": list(range(len(values)))}), path, row_group_size=row_group_size,
                   **options)
    return DataFile(uri=str(path), partition={}, num_records=len(values))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(files=st.lists(st.tuples(st.lists(MICROS, max_size=12), st.sampled_from(["ms", "us"]), st.integers(1, 5)),
                      min_size=1, max_size=4),
       without_column=st.booleans())
def test_the_footers_give_the_range_spark_reads(spark, tmp_path_factory, files, without_column):
    folder = tmp_path_factory.mktemp("tr")
    written = [_write(folder / f"f{i}.parquet", values, unit, row_group_size=size)
               for i, (values, unit, size) in enumerate(files)]
    if without_column:  # a file from before the table had the column: NULL there, as Delta reads it
        pq.write_table(pa.table({"x": [1, 2]}), folder / "old.parquet")
        written.append(DataFile(uri=str(folder / "old.parquet"), partition={}, num_records=2))
    rows = spark.read.schema("ts timestamp, x long").parquet(*[f.uri for f in written])
    want = rows.agg(F.min(F.unix_micros("ts")).alias("lo"), F.max(F.unix_micros("ts")).alias("hi")).first()
    assert time_range(written, "TS") == TimeRange(want["lo"], want["hi"])  # names match ignoring case


def test_no_range_where_a_footer_cannot_say_it_exactly(tmp_path):
    values = [1_000_000, None, 3_000_000]
    assert time_range([_write(tmp_path / "plain.parquet", values, "us")], "ts") == TimeRange(1_000_000, 3_000_000)
    assert time_range([_write(tmp_path / "nostats.parquet", values, "us", write_statistics=False)], "ts") is None
    naive = tmp_path / "naive.parquet"  # a timestamp not adjusted to UTC: Spark reads it as TIMESTAMP_NTZ
    pq.write_table(pa.table({"ts": pa.array(values, pa.int64()).cast(pa.timestamp("us"))}), naive)
    assert time_range([DataFile(uri=str(naive), partition={}, num_records=3)], "ts") is None
    nanos = tmp_path / "nanos.parquet"
    pq.write_table(pa.table({"ts": pa.array(values, pa.int64()).cast(pa.timestamp("ns", "UTC"))}), nanos)
    assert time_range([DataFile(uri=str(nanos), partition={}, num_records=3)], "ts") is None
    assert time_range([_write(tmp_path / "nulls.parquet", [None, None], "us")], "ts") == TimeRange(None, None)
