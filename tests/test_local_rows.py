"""Frames of the driver's rows (file listings, empty inputs) are Spark local relations: the same rows and
schema as PySpark's `createDataFrame` of a list, and an empty one leaves the plans it is unioned into."""
from __future__ import annotations

import datetime as dt
import decimal

from pyspark.sql.types import StructType

from streamjoin.local_rows import empty_frame, local_frame
from streamjoin.storage import file_reads

TYPES = ("a int, b bigint, c string, d date, e timestamp, f timestamp_ntz, g decimal(10,2), "
                           "h double, i boolean, j array<int>, k map<string,int>, m binary")  # DDL (parsed with a session)
ROW = (1, 2, "é", dt.date(1969, 12, 31), dt.datetime(2024, 3, 31, 2, 30), dt.datetime(2024, 1, 1, 12),
       decimal.Decimal("-1.25"), 1.5, True, [1, None], {"q": 1}, b"ab")


def optimized(df) -> str:
    return df._jdf.queryExecution().optimizedPlan().toString()


def test_rows_and_schema_are_those_of_pyspark_lists(spark):
    rows, types = [ROW, (None,) * len(ROW)], StructType.fromDDL(TYPES)
    ours = local_frame(spark, rows, types)
    assert ours.schema == types
    assert ours.collect() == spark.createDataFrame(rows, types).collect()
    assert "LocalRelation" in optimized(ours) and "LogicalRDD" not in optimized(ours)
    listing = local_frame(spark, [("file:///x/a.parquet", 3)], "_uri string, bucket int")
    assert [tuple(r) for r in listing.collect()] == [("file:///x/a.parquet", 3)]


def test_an_empty_read_leaves_the_union_it_joins(spark):
    other = spark.range(3).selectExpr("CAST(id AS INT) AS a")
    for empty in (empty_frame(spark, "a int"), file_reads.read(spark, [], StructType.fromDDL("a int"))):
        assert empty.columns == other.columns and empty.count() == 0
        plan = optimized(other.unionByName(empty))
        assert "Union" not in plan and "LogicalRDD" not in plan, plan


def test_an_empty_frame_is_built_once_per_session_and_schema(spark):
    schema = StructType.fromDDL("a int, b string")
    assert empty_frame(spark, schema) is empty_frame(spark, StructType.fromDDL("a int, b string"))
    assert empty_frame(spark, StructType.fromDDL("a int, b int")).schema == StructType.fromDDL("a int, b int")
