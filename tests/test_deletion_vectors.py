"""Inputs with deletion vectors: tables where another engine (Databricks, Delta Lake 3) deleted rows
by marking them in the log instead of rewriting files. streamjoin reads them as any Delta reader
must, without those rows, checked against delta-rs's own reading of the same version (its scan
applies deletion vectors) rather than against streamjoin's readers. The vectors are committed as
such an engine commits them (`deletion_vectors.delete_rows`)."""
from __future__ import annotations

from collections import Counter

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import StructType

from deletion_vectors import delete_rows
from streamjoin.api import run_model
from streamjoin.errors import InputError, StreamJoinError
from streamjoin.storage import delta_log, file_reads
from streamjoin.storage.tables import ModelTables

ORDERS = pa.schema([("id", pa.int64()), ("cid", pa.int64()), ("amount", pa.int64())])
CUSTOMERS = pa.schema([("cid", pa.int64()), ("name", pa.string())])
SQL = "SELECT o.id, o.amount, c.name FROM dv.orders o LEFT JOIN dv.customers c ON o.cid = c.cid"


def live(path: str, names: list[str]) -> list[tuple]:
    """A table's rows as delta-rs reads its latest version (deletion vectors applied)."""
    table = pa.table(DeltaTable(path).scan(columns=names))
    return [tuple(r[n] for n in names) for r in table.to_pylist()]


def files_by_rows(path: str) -> dict[int, str]:
    """A table's live data files (their paths in the log) by their row counts."""
    return {a["num_records"]: a["path"] for a in pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()}


def rows(spark, sql: str) -> Counter:
    return Counter(tuple(r) for r in spark.sql(sql).collect())


def test_reads_leave_out_the_rows_a_deletion_vector_deletes(spark, tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"k": pa.array(range(10_000), pa.int64())}))
    write_deltalake(path, pa.table({"k": pa.array(range(20_000, 20_010), pa.int64())}), mode="append")
    big = files_by_rows(path)[10_000]
    # more than 4096 positions in one 65,536-row block (a Roaring bitmap container), and a few (an array one)
    delete_rows(path, {big: [*range(0, 9_000, 2), 9_001, 9_500]})
    want = Counter(live(path, ["k"]))
    assert len(want) == 10_010 - 4_502
    files = delta_log.data_files(path, delta_log.version(path))
    assert sorted(len(f.deleted) for f in files) == [0, 4_502]
    schema = StructType.fromDDL("k long")
    assert Counter(tuple(r) for r in file_reads.read(spark, files, schema).collect()) == want
    # each row keeps its place in its file (here its value, in the first file)
    placed = file_reads.read(spark, files, schema, positions=True).where("k < 10000").collect()
    assert sorted(r["k"] for r in placed) == sorted(k for (k,) in want if k < 10_000)
    assert all(r[file_reads.ROW_POSITION] == r["k"] for r in placed)


def test_a_model_reads_its_inputs_without_the_rows_deletion_vectors_delete(spark, tmp_path):
    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    write_deltalake(orders, pa.Table.from_pylist([{"id": i, "cid": i % 4, "amount": i} for i in range(8)],
                                                 schema=ORDERS), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(orders, pa.Table.from_pylist([{"id": 8, "cid": None, "amount": 8}], schema=ORDERS), mode="append")
    write_deltalake(customers, pa.Table.from_pylist([{"cid": c, "name": f"c{c}"} for c in range(4)], schema=CUSTOMERS))
    # before the model's first run, another engine deleted orders 1 and 6 and customer 2
    delete_rows(orders, {files_by_rows(orders)[8]: [1, 6]})
    delete_rows(customers, {files_by_rows(customers)[4]: [2]})
    inputs = {"orders": {"relation": "dv.orders", "location": orders, "changelog_format": "cdf"},
              "customers": {"relation": "dv.customers", "location": customers, "changelog_format": "append"}}
    spark.sql("CREATE DATABASE IF NOT EXISTS dv")
    root = str(tmp_path / "models")

    def run_and_check() -> dict[str, int]:
        report = run_model(spark, name="m", sql=SQL, inputs=inputs, config={}, root=root, relation="dv.m")
        spark.createDataFrame(live(orders, ORDERS.names), "id long, cid long, amount long").createOrReplaceTempView("o_now")
        spark.createDataFrame(live(customers, CUSTOMERS.names), "cid long, name string").createOrReplaceTempView("c_now")
        want = rows(spark, "SELECT o.id, o.amount, c.name FROM o_now o LEFT JOIN c_now c ON o.cid = c.cid")
        assert rows(spark, "SELECT * FROM dv.m") == want
        assert rows(spark, "SELECT * FROM dv.m__batch") == want  # the inputs' snapshots, read by the views' source
        return report.changes_in

    assert run_and_check() == {"orders": 7, "customers": 3}  # the rows read, as counted
    assert rows(spark, "SELECT id FROM dv.m") == Counter({(i,): 1 for i in (0, 2, 3, 4, 5, 7, 8)})
    # a later delete of the cdf input, a version without change data files: the file goes, and comes
    # back with its new vector; the model retracts what it joined to the deleted rows alone
    delete_rows(orders, {files_by_rows(orders)[8]: [1, 6, 3]})
    run_and_check()
    assert rows(spark, "SELECT id, _row_kind FROM dv.m__changelog WHERE _run_id = 2") == Counter({(3, "-D"): 1})

    # an append-only input's rows deleted after a run: no changelog does that
    tables = ModelTables(root, "m")
    before = {p: delta_log.version(p) for p in tables.all_tables()}
    delete_rows(customers, {files_by_rows(customers)[4]: [2, 0]})
    with pytest.raises(InputError, match="removed data; a changelog input must be append-only"):
        run_model(spark, name="m", sql=SQL, inputs=inputs, config={}, root=root, relation="dv.m")
    assert {p: delta_log.version(p) for p in tables.all_tables()} == before


def test_a_row_a_deletion_vector_deletes_moves_no_watermark(spark, tmp_path):
    """An interval join over orders whose latest order another engine deleted, beside the same join
    over orders that never held it: their results agree. (A file's footer still counts the deleted
    row: had the watermark come from it, it would have passed order 3's time in run 1, order 3 would
    have been late in run 2, and shipment 30 would have found no order in run 3.)"""
    utc = pa.timestamp("us", tz="UTC")
    orders_schema = pa.schema([("id", pa.int64()), ("placed_at", utc)])
    shipments_schema = pa.schema([("sid", pa.int64()), ("oid", pa.int64()), ("shipped_at", utc)])
    sql = ("SELECT o.id, s.sid FROM wm.orders o JOIN wm.shipments s ON o.id = s.oid "
           "AND s.shipped_at BETWEEN o.placed_at AND o.placed_at + INTERVAL '4' HOUR")

    def at(hhmm: str) -> dt.datetime:
        return dt.datetime.fromisoformat(f"2026-01-01T{hhmm}:00+00:00")

    def append(path: str, schema: pa.Schema, rows_: list[tuple]) -> None:
        write_deltalake(path, pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows_], schema=schema),
                        mode="append")

    results = {}
    for variant in ("deleted", "never written"):
        orders, shipments = str(tmp_path / variant / "orders"), str(tmp_path / variant / "shipments")
        if variant == "deleted":
            append(orders, orders_schema, [(1, at("10:00")), (2, at("20:00"))])
            delete_rows(orders, {files_by_rows(orders)[2]: [1]})
        else:
            append(orders, orders_schema, [(1, at("10:00"))])
        append(shipments, shipments_schema, [(10, 1, at("11:00")), (99, 5, at("23:00"))])
        inputs = {"orders": {"relation": "wm.orders", "location": orders, "changelog_format": "append",
                             "event_time": "placed_at", "watermark_delay": "0 seconds"},
                  "shipments": {"relation": "wm.shipments", "location": shipments, "changelog_format": "append",
                                "event_time": "shipped_at", "watermark_delay": "0 seconds"}}
        root = str(tmp_path / variant / "models")
        run_model(spark, name="w", sql=sql, inputs=inputs, config={}, root=root)
        append(orders, orders_schema, [(3, at("15:00"))])
        run_model(spark, name="w", sql=sql, inputs=inputs, config={}, root=root)
        append(shipments, shipments_schema, [(30, 3, at("16:00"))])
        run_model(spark, name="w", sql=sql, inputs=inputs, config={}, root=root)
        results[variant] = sorted(live(ModelTables(root, "w").result, ["id", "sid"]))
    assert results["deleted"] == results["never written"] == [(1, 10), (3, 30)]


def test_deletion_vectors_in_a_model_s_own_table_stop_it_until_a_full_refresh(spark, tmp_path):
    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    write_deltalake(orders, pa.Table.from_pylist([{"id": i, "cid": i % 2, "amount": i} for i in range(6)],
                                                 schema=ORDERS), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(customers, pa.Table.from_pylist([{"cid": c, "name": f"c{c}"} for c in range(2)], schema=CUSTOMERS))
    inputs = {"orders": {"relation": "dv.orders", "location": orders, "changelog_format": "cdf"},
              "customers": {"relation": "dv.customers", "location": customers, "changelog_format": "append"}}
    root = str(tmp_path / "models")
    run_model(spark, name="k", sql=SQL, inputs=inputs, config={}, root=root)
    tables = ModelTables(root, "k")
    kept = delta_log.data_files(tables.result, delta_log.version(tables.result))
    delete_rows(tables.result, {kept[0].path: [0]})  # someone deletes a result row with another engine
    DeltaTable(orders).delete("id = 5")  # a retraction: the run reads the result's files
    before = {p: delta_log.version(p) for p in tables.all_tables()}
    with pytest.raises(StreamJoinError, match="model 'k': its table result has deletion vectors .* another engine "
                                              ".* --full-refresh"):
        run_model(spark, name="k", sql=SQL, inputs=inputs, config={}, root=root)
    assert {p: delta_log.version(p) for p in tables.all_tables()} == before
    run_model(spark, name="k", sql=SQL, inputs=inputs, config={}, root=root, full_refresh=True)
    assert sorted(live(tables.result, ["id", "amount", "name"])) == [(i, i, f"c{i % 2}") for i in range(5)]
    run_model(spark, name="k", sql=SQL, inputs=inputs, config={}, root=root)  # and runs go on
