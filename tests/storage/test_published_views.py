"""Published views read one committed version of a Delta table through the `streamjoin_delta` data
source, without links or copies of its files: on a local disk and in an object store, while later
commits add and remove files."""
from __future__ import annotations

import uuid

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from streamjoin import api
from streamjoin.storage import delta_log, filesystem
from streamjoin.storage.tables import ModelTables
from streamjoin.storage.file_reads import with_positions
from streamjoin.storage.version_source import FILE_OPEN_BYTES, TASK_BYTES, _File, packed, reference

SCHEMA = StructType([StructField("k", IntegerType()), StructField("day", StringType()), StructField("v", LongType())])


def batch(*rows: tuple[int, str, int]) -> pa.Table:
    return pa.table({"k": pa.array([r[0] for r in rows], pa.int32()), "day": [r[1] for r in rows],
                     "v": pa.array([r[2] for r in rows], pa.int64())})


def read(spark, path: str, version: int, schema: StructType = SCHEMA, **kw) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {reference(spark, path, version, schema, **kw)}").collect())


def test_a_reference_reads_its_version_while_later_commits_add_and_remove_files(spark, tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, batch((1, "mon", 10), (2, "tue", 20)), partition_by=["day"])
    write_deltalake(path, batch((3, "mon", 30)), partition_by=["day"], mode="append")
    spark.sql(f"CREATE OR REPLACE VIEW default.pinned AS SELECT k, day, v FROM {reference(spark, path, 1, SCHEMA)}")
    write_deltalake(path, batch((9, "wed", 90)), partition_by=["day"], mode="overwrite")  # removes every file

    assert read(spark, path, 0) == [(1, "mon", 10), (2, "tue", 20)]  # partition values typed as the schema says
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM default.pinned").collect()) == \
        [(1, "mon", 10), (2, "tue", 20), (3, "mon", 30)]
    assert read(spark, path, 2) == [(9, "wed", 90)]
    assert not any(p.is_file() and p.stat().st_nlink > 1 for p in tmp_path.rglob("*"))  # nothing linked


def test_rows_carry_their_position_in_the_log_for_an_upsert_history(spark, tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, batch((1, "mon", 10), (1, "mon", 11)))
    write_deltalake(path, batch((1, "mon", 12)), mode="append")
    write_deltalake(path, batch((2, "tue", 20)), mode="overwrite")
    assert read(spark, path, 1, with_positions(SCHEMA), files="added") == [
        (1, "mon", 10, 0, 0), (1, "mon", 11, 0, 1), (1, "mon", 12, 1, 0)]
    assert [r[:3] for r in read(spark, path, 2, with_positions(SCHEMA))] == [(2, "tue", 20)]


def test_a_table_of_many_small_files_is_read_by_one_task_each_row_with_its_files_position(spark, tmp_path):
    """Spark's Python tasks cost tens of milliseconds each: one per file made a lookup model's views
    take a minute after a dozen runs."""
    path = str(tmp_path / "t")
    for i in range(30):
        write_deltalake(path, batch((i, "mon", i)), mode="append")
    frame = spark.sql(f"SELECT * FROM {reference(spark, path, 29, with_positions(SCHEMA), files='added')}")
    assert frame.rdd.getNumPartitions() == 1
    assert sorted(tuple(r) for r in frame.collect()) == [(i, "mon", i, i, 0) for i in range(30)]


def test_files_are_packed_into_tasks_as_spark_packs_its_own_scans():
    files = [_File(i, f"f{i}", {}, size=size) for i, size in enumerate([TASK_BYTES // 2, TASK_BYTES // 2, 10, TASK_BYTES])]
    assert [[f.ordinal for f in task.files] for task in packed(files)] == [[0], [1, 2], [3]]
    small = [_File(i, f"f{i}", {}, size=0) for i in range(TASK_BYTES // FILE_OPEN_BYTES + 1)]
    assert [len(task.files) for task in packed(small)] == [TASK_BYTES // FILE_OPEN_BYTES, 1]
    assert packed([]) == []


def test_a_change_data_feed_is_read_from_the_table_at_a_version_then_version_by_version(spark, tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, batch((1, "mon", 10), (2, "tue", 20)), partition_by=["day"],
                    configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).update(updates={"v": "v + 1"}, predicate="k = 1")  # version 1, before the first read
    DeltaTable(path).update(updates={"v": "v + 1"}, predicate="k = 1")  # version 2: update pre/post images
    DeltaTable(path).delete("k = 2")  # version 3
    write_deltalake(path, batch((3, "mon", 30)), partition_by=["day"], mode="append")  # version 4: no cdc files
    feed = StructType([*SCHEMA.fields, StructField(delta_log.CHANGE_TYPE, StringType())])
    rows = read(spark, path, 4, with_positions(feed), files="changes", since=1)
    files = [{r[:4] for r in rows if r[4] == position} for position in sorted({r[4] for r in rows})]
    # the table at version 1 (one file per partition), every row an insert, then each later version's changes
    assert sorted(map(tuple, files[:2])) == [((1, "mon", 11, "insert"),), ((2, "tue", 20, "insert"),)]
    assert files[2:] == [{(1, "mon", 11, "update_preimage"), (1, "mon", 12, "update_postimage")},
                         {(2, "tue", 20, "delete")}, {(3, "mon", 30, "insert")}]


def test_the_source_reads_a_version_by_path_with_the_tables_own_schema(spark, tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, batch((1, "mon", 10)))
    write_deltalake(path, batch((2, "tue", 20)), mode="append")
    frame = spark.read.format("streamjoin_delta").option("path", path).option("version", "0").load()
    assert frame.schema.names == ["k", "day", "v"]
    assert [tuple(r) for r in frame.collect()] == [(1, "mon", 10)]


def test_a_model_in_the_bucket_publishes_views_over_the_bucket(spark, s3_lake):
    base = filesystem.join(s3_lake.uri, f"pub-{uuid.uuid4().hex[:8]}")
    left, right = filesystem.join(base, "left"), filesystem.join(base, "right")
    options = s3_lake.options
    write_deltalake(left, pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["a", "b"]}), storage_options=options)
    write_deltalake(right, pa.table({"k": pa.array([2, 2], pa.int32()), "w": ["x", "y"]}), storage_options=options)
    inputs = {"l": {"location": left, "changelog_format": "append", "relation": "l_in"},
              "r": {"location": right, "changelog_format": "upsert", "unique_key": ["k"], "relation": "r_in"}}
    sql = "SELECT l.k, l.v, r.w FROM l_in l LEFT JOIN r_in r ON l.k = r.k"
    root = filesystem.join(base, "models")

    def views() -> dict[str, list[tuple]]:
        return {v: sorted(map(tuple, spark.sql(f"SELECT k, v, w FROM default.bucket_model{v}").collect()), key=str)
                for v in ("", "__batch")}

    api.run_model(spark, name="bm", sql=sql, inputs=inputs, config={}, root=root, relation="default.bucket_model")
    assert views() == {"": [(1, "a", None), (2, "b", "y")], "__batch": [(1, "a", None), (2, "b", "y")]}
    write_deltalake(right, pa.table({"k": pa.array([1], pa.int32()), "w": ["z"]}), storage_options=options, mode="append")
    api.run_model(spark, name="bm", sql=sql, inputs=inputs, config={}, root=root, relation="default.bucket_model")
    assert views() == {"": [(1, "a", "z"), (2, "b", "y")], "__batch": [(1, "a", "z"), (2, "b", "y")]}
    changes = spark.sql("SELECT k, w, _row_kind, _run_id FROM default.bucket_model__changelog WHERE _run_id = 2").collect()
    assert set(map(tuple, changes)) == {(1, None, "-D", 2), (1, "z", "+I", 2)}
    tables = ModelTables(root, "bm")
    assert "published" not in filesystem.list_names(tables.home)
    assert delta_log.version(tables.result) == 1


def test_a_source_in_the_bucket_is_published_as_of_its_current_version(spark, s3_lake):
    location = filesystem.join(s3_lake.uri, f"src-{uuid.uuid4().hex[:8]}")
    write_deltalake(location, pa.table({"k": pa.array([1, 1], pa.int32()), "v": ["old", "new"]}),
                    storage_options=s3_lake.options)
    declaration = {"location": location, "changelog_format": "upsert", "unique_key": ["k"]}
    assert api.publish_input(spark, name="orders", declaration=declaration, relation="shop_src.orders")
    write_deltalake(location, pa.table({"k": pa.array([2], pa.int32()), "v": ["later"]}),
                    storage_options=s3_lake.options, mode="append")
    assert [tuple(r) for r in spark.sql("SELECT k, v FROM shop_src.orders").collect()] == [(1, "new")]
    assert api.publish_input(spark, name="orders", declaration=declaration, relation="shop_src.orders")
    assert sorted(tuple(r) for r in spark.sql("SELECT k, v FROM shop_src.orders").collect()) == [(1, "new"), (2, "later")]
