"""Input formats end to end: Delta change data feed, Debezium envelopes and upsert tables.

Inputs are written the way their producers write them (delta-rs updates, deletes and merges
on a CDF-enabled table; Debezium rows; upsert rows with a delete flag) and each run's result
is compared with a batch query over the inputs' current rows, computed independently of
streamjoin's readers: the CDF table's own snapshot, and the Debezium and upsert rows applied
in Python.
"""
from __future__ import annotations

import shutil
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from streamjoin.storage import delta_log
from streamjoin.api import run_model
from streamjoin.errors import CompileError, ConfigError, InputError
from streamjoin.storage.tables import ModelTables

ORDERS = pa.schema([("id", pa.int64()), ("cid", pa.int64()), ("amount", pa.int64()), ("region", pa.string())])
CUSTOMERS = pa.schema([("cid", pa.int64()), ("name", pa.string()), ("seq", pa.int64()), ("deleted", pa.bool_())])
SQL = "SELECT o.id, o.amount, c.name FROM shop.orders o LEFT JOIN shop.customers c ON o.cid = c.cid"


def rows(spark, sql: str) -> Counter:
    return Counter(tuple(r) for r in spark.sql(sql).collect())


def batch(spark, orders: list[tuple], customers: list[tuple]) -> Counter:
    """The model's SQL over the inputs' current rows."""
    spark.createDataFrame(orders, "id long, cid long, amount long, region string").createOrReplaceTempView("o_now")
    spark.createDataFrame(customers, "cid long, name string, seq long").createOrReplaceTempView("c_now")
    return rows(spark, "SELECT o.id, o.amount, c.name FROM o_now o LEFT JOIN c_now c ON o.cid = c.cid")


class Upserts:
    """An upsert table (key cid, sequence seq, delete flag) and what its rows mean, kept in Python."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.current: dict[int, tuple] = {}

    def write(self, batch: list[tuple]) -> None:
        write_deltalake(self.path, pa.Table.from_pylist(
            [dict(zip(CUSTOMERS.names, r)) for r in batch], schema=CUSTOMERS), mode="append")
        for cid, name, seq, deleted in sorted(batch, key=lambda r: r[2]):  # newest sequence wins
            if deleted:
                self.current.pop(cid, None)
            else:
                self.current[cid] = (cid, name, seq)


def test_cdf_and_upsert_inputs_follow_updates_deletes_and_merges(spark, tmp_path):
    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    first = [(1, 10, 5, "eu"), (2, 10, 7, "us"), (3, 20, 1, "eu"), (4, None, 2, "us")]
    write_deltalake(orders, pa.Table.from_pylist([dict(zip(ORDERS.names, r)) for r in first], schema=ORDERS),
                    partition_by=["region"], configuration={"delta.enableChangeDataFeed": "true"})
    upserts = Upserts(customers)
    # two versions of customer 10 in one run: the higher sequence wins, whatever the row order
    upserts.write([(10, "ann v2", 2, False), (10, "ann v1", 1, False), (20, "bob", 1, False), (30, "gone", 1, True)])
    inputs = {"orders": {"relation": "shop.orders", "location": orders, "changelog_format": "cdf"},
              "customers": {"relation": "shop.customers", "location": customers, "changelog_format": "upsert",
                            "unique_key": ["cid"], "delete_column": "deleted", "sequence_column": "seq"}}
    spark.sql("CREATE DATABASE IF NOT EXISTS fmt")
    root = str(tmp_path / "models")

    def run_and_check() -> None:
        run_model(spark, name="m", sql=SQL, inputs=inputs, config={}, root=root, relation="fmt.m")
        now_orders = [tuple(r.values()) for r in DeltaTable(orders).to_pyarrow_table().select(ORDERS.names).to_pylist()]
        want = batch(spark, now_orders, list(upserts.current.values()))
        assert rows(spark, "SELECT * FROM fmt.m") == want
        assert rows(spark, "SELECT * FROM fmt.m__batch") == want

    run_and_check()
    table = DeltaTable(orders)
    table.update(updates={"amount": "amount + 100"}, predicate="id = 1")  # cdc: update pre/post images
    table.delete("id = 3")
    upserts.write([(20, "bob", 2, True), (10, "ann v3", 3, False), (40, "dan", 1, False)])
    run_and_check()
    assert rows(spark, "SELECT id, amount, name, _row_kind FROM fmt.m__changelog WHERE _run_id = 2") == Counter({
        (1, 5, "ann v2", "-D"): 1, (1, 105, "ann v3", "+I"): 1, (2, 7, "ann v2", "-D"): 1, (2, 7, "ann v3", "+I"): 1,
        (3, 1, "bob", "-D"): 1})
    DeltaTable(orders).merge(pa.Table.from_pylist([{"id": 2, "cid": 40, "amount": 8, "region": "us"},
                                                   {"id": 5, "cid": 40, "amount": 9, "region": "eu"}], schema=ORDERS),
                             predicate="t.id = s.id", source_alias="s", target_alias="t") \
        .when_matched_update_all().when_not_matched_insert_all().execute()
    write_deltalake(orders, pa.Table.from_pylist([{"id": 6, "cid": 10, "amount": 1, "region": "eu"}], schema=ORDERS),
                    mode="append")  # a version without cdc files: its added file is all inserts
    upserts.write([(10, "ann v3", 3, False)])  # the same row again changes nothing
    run_and_check()


def test_debezium_envelopes_become_a_changelog_and_bad_ones_fail_the_run(spark, tmp_path):
    payload = pa.struct([("id", pa.int64()), ("cid", pa.int64()), ("amount", pa.int64())])
    schema = pa.schema([("before", payload), ("after", payload), ("op", pa.string()), ("ts_ms", pa.int64())])
    events, customers = str(tmp_path / "events"), str(tmp_path / "customers")
    write_deltalake(customers, pa.table({"cid": [10, 20], "name": ["ann", "bob"]}))
    live: dict[int, tuple] = {}

    def emit(batch: list[tuple], *, valid: bool = True) -> None:
        write_deltalake(events, pa.Table.from_pylist(
            [{"before": b, "after": a, "op": op, "ts_ms": 0} for op, b, a in batch], schema=schema), mode="append")
        for op, before, after in batch if valid else ():
            if op in ("u", "d"):
                del live[before["id"]]
            if op in ("c", "r", "u"):
                live[after["id"]] = (after["id"], after["cid"], after["amount"])

    def order(i, cid, amount):
        return {"id": i, "cid": cid, "amount": amount}

    emit([("r", None, order(1, 10, 5)), ("c", None, order(2, 20, 7)), ("c", None, order(3, 30, 1))])
    inputs = {"orders": {"relation": "orders", "location": events, "changelog_format": "debezium"},
              "customers": {"relation": "customers", "location": customers, "changelog_format": "append"}}
    sql = "SELECT o.id, o.amount, c.name FROM orders o JOIN customers c ON o.cid = c.cid"
    root = str(tmp_path / "models")

    def run_and_check() -> None:
        run_model(spark, name="dbz", sql=sql, inputs=inputs, config={}, root=root, relation="dbz")
        spark.createDataFrame(list(live.values()) or [(0, 0, 0)][:0], "id long, cid long, amount long") \
            .createOrReplaceTempView("dbz_orders_now")
        want = rows(spark, "SELECT o.id, o.amount, c.name FROM dbz_orders_now o JOIN parquet.`{}` c ON o.cid = c.cid"
                    .format(customers))
        assert rows(spark, "SELECT * FROM dbz") == want
        assert rows(spark, "SELECT * FROM dbz__batch") == want

    run_and_check()
    emit([("u", order(1, 10, 5), order(1, 20, 6)), ("d", order(2, 20, 7), None), (None, None, None)])  # + a tombstone
    run_and_check()
    assert rows(spark, "SELECT id, amount, name, _row_kind FROM dbz__changelog WHERE _run_id = 2") == Counter(
        {(1, 5, "ann", "-D"): 1, (1, 6, "bob", "+I"): 1, (2, 7, "bob", "-D"): 1})

    tables = ModelTables(root, "dbz")
    before = {p: delta_log.version(p) for p in tables.all_tables()}
    emit([("u", None, order(3, 10, 2))], valid=False)  # an update without its before image
    with pytest.raises(InputError) as failure:
        run_model(spark, name="dbz", sql=sql, inputs=inputs, config={}, root=root, relation="dbz")
    message = str(failure.value)
    assert "dbz" in message and "orders" in message and "replica identity" in message
    assert {p: delta_log.version(p) for p in tables.all_tables()} == before


@pytest.mark.parametrize("declaration, complaint", [
    ({"changelog_format": "upsert"}, "needs a unique_key"),
    ({"changelog_format": "append", "sequence_column": "k"}, "only applies to changelog_format 'upsert'"),
    ({"changelog_format": "cdf", "op_column": "op"}, "op_column contradicts changelog_format 'cdf'"),
    ({"changelog_format": "kafka"}, "is not one of changelog, append, cdf, debezium, upsert"),
])
def test_contradictory_format_declarations_are_compile_errors(tmp_path, declaration, complaint):
    write_deltalake(str(tmp_path / "t"), pa.table({"k": [1], "deleted": [False]}))
    inputs = {"t": {"location": str(tmp_path / "t"), **declaration},
              "u": {"location": str(tmp_path / "t"), "changelog_format": "append"}}
    with pytest.raises(ConfigError) as failure:
        run_model(None, name="bad", sql="SELECT t.k FROM t JOIN u ON t.k = u.k", inputs=inputs, config={},
                  root=str(tmp_path / "models"))
    assert complaint in str(failure.value) and "bad" in str(failure.value) and "input 't'" in str(failure.value)


def test_an_interval_join_rejects_an_updating_format(tmp_path):
    write_deltalake(str(tmp_path / "t"), pa.table({"k": [1], "ts": pa.array([0], pa.timestamp("us", "UTC"))}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    inputs = {"a": {"location": str(tmp_path / "t"), "changelog_format": "cdf", "event_time": "ts"},
              "b": {"location": str(tmp_path / "t"), "changelog_format": "append", "event_time": "ts"}}
    sql = "SELECT a.k FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL 1 HOUR AND b.ts"
    with pytest.raises(CompileError, match="changelog_format 'cdf' produces updates and deletes"):
        run_model(None, name="iv", sql=sql, inputs=inputs, config={}, root=str(tmp_path / "models"))


def test_a_replaced_input_table_stops_the_model_until_a_full_refresh(spark, tmp_path):
    left, right = str(tmp_path / "left"), str(tmp_path / "right")
    for path in (left, right):
        write_deltalake(path, pa.table({"k": [1, 2]}))
    write_deltalake(right, pa.table({"k": [5]}), mode="append")
    inputs = {"l": {"location": left, "changelog_format": "append"}, "r": {"location": right, "changelog_format": "append"}}
    sql = "SELECT l.k FROM l JOIN r ON l.k = r.k"
    root = str(tmp_path / "models")
    run_model(spark, name="rb", sql=sql, inputs=inputs, config={}, root=root)
    shutil.rmtree(right)  # rebuilt upstream: a new table at the same path, as far along as the old one
    write_deltalake(right, pa.table({"k": [2]}))
    write_deltalake(right, pa.table({"k": [1]}), mode="append")
    tables = ModelTables(root, "rb")
    before = {p: delta_log.version(p) for p in tables.all_tables()}
    with pytest.raises(InputError, match="replaced by a new table.*--full-refresh") as failure:
        run_model(spark, name="rb", sql=sql, inputs=inputs, config={}, root=root)
    assert "rb" in str(failure.value) and "'r'" in str(failure.value)
    assert {p: delta_log.version(p) for p in tables.all_tables()} == before
    run_model(spark, name="rb", sql=sql, inputs=inputs, config={}, root=root, full_refresh=True)
    assert sorted(r["k"] for r in DeltaTable(tables.result).to_pyarrow_table().to_pylist()) == [1, 2]
