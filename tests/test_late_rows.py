"""Late rows of an interval join: recorded per run and input, shown by `status`, and subtracted by
`streamjoin.matches_batch`, whose SQL (macros/tests.sql) runs here over the views a run publishes.

Orders and shipments join when a shipment is at most 4 hours after its order; both inputs have a
watermark delay of 0, so after run 1 the watermark is 20:00 and order state keeps orders from
16:00 (20:00 - 4 h) on. In run 2 order 2 (15:00) is late and not kept, so its shipment in run 3
finds nothing; shipment 11 (12:00) is late and order 1 (10:00) has left state; shipment 80
(19:30) is late but order 8 (19:00) is still in state, so that pair is emitted (as in Flink).
"""
from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from generic_tests import Relation, generic_test_sql
from streamjoin import status
from streamjoin.api import batch_views_agree, run_model
from streamjoin.storage.tables import ModelTables

SQL = ("SELECT o.id, s.sid FROM lr.orders o JOIN lr.shipments s ON o.id = s.oid "
       "AND s.shipped_at BETWEEN o.placed_at AND o.placed_at + INTERVAL '4' HOUR")
UTC = pa.timestamp("us", tz="UTC")


def at(hhmm: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-01-01T{hhmm}:00+00:00")


def append(path: Path, schema: pa.Schema, rows: list[tuple]) -> None:
    write_deltalake(str(path), pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema),
                    mode="append")


def matches_batch(spark, schema: str | None, identifier: str, tables: ModelTables | None = None) -> Counter:
    """The rows `streamjoin.matches_batch` returns for a model (whose Delta tables are `tables`)."""
    relation = Relation(schema, identifier)
    sql = generic_test_sql(spark, "matches_batch", relation, {relation.render(): tables} if tables else {})
    return Counter(tuple(r) for r in spark.sql(sql).collect())


def rows(spark, sql: str) -> Counter:
    return Counter(tuple(r) for r in spark.sql(sql).collect())


def test_late_rows_are_recorded_shown_and_subtracted_by_matches_batch(spark, tmp_path):
    orders_schema = pa.schema([("id", pa.int64()), ("placed_at", UTC)])
    shipments_schema = pa.schema([("sid", pa.int64()), ("oid", pa.int64()), ("shipped_at", UTC)])
    orders, shipments = tmp_path / "orders", tmp_path / "shipments"
    inputs = {"orders": {"relation": "lr.orders", "location": str(orders), "changelog_format": "append",
                         "event_time": "placed_at", "watermark_delay": "0 seconds"},
              "shipments": {"relation": "lr.shipments", "location": str(shipments), "changelog_format": "append",
                            "event_time": "shipped_at", "watermark_delay": "0 seconds"}}
    root = str(tmp_path / "models")
    spark.sql("CREATE DATABASE IF NOT EXISTS lr")

    def run(full_refresh: bool = False):
        return run_model(spark, name="shipped", sql=SQL, inputs=inputs, config={}, root=root,
                         relation="lr.shipped", full_refresh=full_refresh)

    append(orders, orders_schema, [(1, at("10:00")), (8, at("19:00")), (9, at("20:00"))])
    append(shipments, shipments_schema, [(10, 1, at("11:00")), (90, 9, at("20:00"))])
    first = run()
    append(orders, orders_schema, [(2, at("15:00"))])
    append(shipments, shipments_schema, [(11, 1, at("12:00")), (80, 8, at("19:30"))])
    second = run()
    append(orders, orders_schema, [(3, at("21:00"))])
    append(shipments, shipments_schema, [(20, 2, at("16:00")), (30, 3, at("21:30"))])
    third = run()

    # the run log: late rows per run and input, counted in the write pass at no extra Spark job
    late = [next(m["rows_late"] for m in r.metrics.values() if isinstance(m, dict) and "rows_late" in m)
            for r in (first, second, third)]
    assert late == [{}, {"orders": 1, "shipments": 2}, {"orders": 0, "shipments": 1}]
    assert second.metrics["spark_jobs"] == first.metrics["spark_jobs"]
    # the rows, as read from their inputs
    table = DeltaTable(ModelTables(root, "shipped").late_rows).to_pyarrow_table().to_pylist()
    recorded = sorted((r["_run_id"], r["_input"], r["_side"], json.dumps(r[r["_input"]], default=str)) for r in table)
    assert recorded == [
        (2, "orders", "left", json.dumps({"id": 2, "placed_at": at("15:00")}, default=str)),
        (2, "shipments", "right", json.dumps({"sid": 11, "oid": 1, "shipped_at": at("12:00")}, default=str)),
        (2, "shipments", "right", json.dumps({"sid": 80, "oid": 8, "shipped_at": at("19:30")}, default=str)),
        (3, "shipments", "right", json.dumps({"sid": 20, "oid": 2, "shipped_at": at("16:00")}, default=str)),
    ]
    text = status.report(status.model_tables(root))
    assert re.search(r"^3 .* shipments=1 ", text, re.M) and re.search(r"^2 .* orders=1, shipments=2 ", text, re.M), text
    assert "late rows" in text and "late_rows" in text

    # the result lies between the batch join over the on-time rows and the one over every row
    result = rows(spark, "SELECT * FROM lr.shipped")
    assert result == Counter({(1, 10): 1, (9, 90): 1, (8, 80): 1, (3, 30): 1})
    assert rows(spark, "SELECT * FROM lr.shipped__batch") - result == Counter({(1, 11): 1, (2, 20): 1})
    assert result - rows(spark, "SELECT * FROM lr.shipped__batch_on_time") == Counter({(8, 80): 1})
    tables = ModelTables(root, "shipped")
    assert not batch_views_agree(tables)
    assert matches_batch(spark, "lr", "shipped", tables) == Counter()
    # and the test does fail on a result that misses an on-time pair
    spark.sql("CREATE OR REPLACE TEMP VIEW shipped_wrong AS SELECT * FROM lr.shipped WHERE id <> 3")
    spark.sql("CREATE OR REPLACE TEMP VIEW shipped_wrong__batch AS SELECT * FROM lr.shipped__batch")
    spark.sql("CREATE OR REPLACE TEMP VIEW shipped_wrong__batch_on_time AS SELECT * FROM lr.shipped__batch_on_time")
    assert matches_batch(spark, None, "shipped_wrong") == Counter({("only in the batch evaluation", 3, 30): 1})

    # a full refresh reads every row in one run, before any watermark: no row is late, every pair is found
    refreshed = run(full_refresh=True)
    assert not any(m.get("rows_late") for m in refreshed.metrics.values() if isinstance(m, dict))
    assert rows(spark, "SELECT * FROM lr.shipped") == rows(spark, "SELECT * FROM lr.shipped__batch") \
        == rows(spark, "SELECT * FROM lr.shipped__batch_on_time") == result + Counter({(1, 11): 1, (2, 20): 1})
    # without late rows the two views are one SELECT, evaluated once (lr.wrong, a result that differs from
    # the model's batch view, has no `__batch_on_time` to read), and the test is equality, copy by copy
    assert batch_views_agree(tables) and matches_batch(spark, "lr", "shipped", tables) == Counter()
    spark.sql("CREATE OR REPLACE VIEW lr.wrong AS SELECT * FROM lr.shipped WHERE id <> 3 "
              "UNION ALL SELECT 7, 70 UNION ALL SELECT 7, 70")
    spark.sql("CREATE OR REPLACE VIEW lr.wrong__batch AS SELECT * FROM lr.shipped__batch")
    assert matches_batch(spark, "lr", "wrong", tables) == Counter({("only in the batch evaluation", 3, 30): 1,
                                                                   ("only in the streaming result", 7, 70): 2})
