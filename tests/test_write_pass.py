"""The write pass (`storage.writes.RunWriter`): several tables' rows in one frame, written in one Spark job.

Targets share the frame's columns by type, so the frame is as wide as the widest target per type;
each table's files must still hold exactly its own rows, columns and types.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow.dataset as ds

from streamjoin.storage.writes import TARGET, VALUE, RunWriter


def written(tmp_path, actions, table: str) -> list[dict]:
    """The rows of a table's files (with their Hive partition values), sorted."""
    paths = [str(tmp_path / table / a.path) for a in actions.result()]
    rows = ds.dataset(paths, format="parquet", partitioning="hive", partition_base_dir=str(tmp_path / table)).to_table()
    return sorted(rows.to_pylist(), key=repr)


def test_tables_share_the_frames_columns_by_type_and_keep_their_own_rows(spark, tmp_path):
    people = spark.createDataFrame(
        [(1, "ann", Decimal("1.50"), dt.date(2026, 1, 2)), (2, None, Decimal("2.25"), None)],
        "id long, name string, score decimal(10,2), born date")
    orders = spark.createDataFrame([(10, 1, "x", "y", (1, "a")), (11, None, None, "z", None)],
                                   "order_id long, person long, note string, tag string, s struct<i:int,t:string>")
    counts = spark.createDataFrame([(5, 1), (6, 0), (7, 1)], "n long, part int")
    writer = RunWriter(tag="t", parallelism=2)
    actions = {"people": writer.write(people, str(tmp_path / "people")),
               "orders": writer.write(orders, str(tmp_path / "orders")),
               "counts": writer.write(counts, str(tmp_path / "counts"), partition_by=["part"])}
    total = writer.count(orders, orders.order_id)
    # the target, the counter's value, and per type the most any table has: 2 long (orders),
    # 2 string (orders), 1 decimal, 1 date, 1 struct, 1 int (not the 13 columns of all three tables)
    wide = writer._wide().columns
    assert len(wide) == 2 + 2 + 2 + 1 + 1 + 1 + 1, wide
    assert {TARGET, VALUE} <= set(wide)
    writer.run()

    assert written(tmp_path, actions["people"], "people") == sorted([
        {"id": 1, "name": "ann", "score": Decimal("1.50"), "born": dt.date(2026, 1, 2)},
        {"id": 2, "name": None, "score": Decimal("2.25"), "born": None}], key=repr)
    assert written(tmp_path, actions["orders"], "orders") == sorted([
        {"order_id": 10, "person": 1, "note": "x", "tag": "y", "s": {"i": 1, "t": "a"}},
        {"order_id": 11, "person": None, "note": None, "tag": "z", "s": None}], key=repr)
    assert written(tmp_path, actions["counts"], "counts") == sorted([
        {"n": 5, "part": 1}, {"n": 6, "part": 0}, {"n": 7, "part": 1}], key=repr)
    assert {a.partition_values["part"] for a in actions["counts"].result()} == {"0", "1"}
    assert total.result() == 21
