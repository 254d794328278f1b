"""The storage layer on an S3-compatible object store (moto on 127.0.0.1): delta-rs commits, log
reads, app transactions and conflicts, bookkeeping files, a model's folders and markers, and a
whole model run whose tables all live in the bucket."""
from __future__ import annotations

import uuid

import boto3
import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StructField, StructType

from scenario import Scenario, delete, insert, update_after, update_before
from streamjoin import status
from streamjoin.__main__ import main as status_main
from streamjoin.errors import ConcurrentRunError, ConfigError, ModelBusyError
from streamjoin.runtime import lease
from streamjoin.spec import InputSpec
from streamjoin.storage import delta_log, filesystem
from streamjoin.storage.tables import ModelTables

SCHEMA = StructType([StructField("k", IntegerType()), StructField("v", IntegerType())])


def rows(*pairs: tuple[int, int]) -> pa.Table:
    return pa.table({"k": pa.array([p[0] for p in pairs], pa.int32()), "v": pa.array([p[1] for p in pairs], pa.int32())})


def test_commits_log_reads_and_app_transactions_work_on_the_object_store(s3_lake):
    path = filesystem.join(s3_lake.uri, f"t-{uuid.uuid4().hex[:8]}")
    assert not delta_log.exists(path) and delta_log.version(path) is None
    first = delta_log.write_small(rows((1, 10), (2, 20)), path, tag="r1")
    delta_log.commit(path, first, SCHEMA, app_id="streamjoin:m", run_id=1, metadata={delta_log.MANIFEST_KEY: "one"},
                     read_version=None)
    second = delta_log.write_small(rows((3, 30)), path, tag="r2")
    delta_log.commit(path, second, SCHEMA, app_id="streamjoin:m", run_id=2, metadata={delta_log.MANIFEST_KEY: "two"},
                     read_version=0)

    assert delta_log.version(path) == 1
    assert delta_log.app_version(path, "streamjoin:m") == 2
    assert delta_log.latest_metadata(path, delta_log.MANIFEST_KEY) == "two"
    assert delta_log.latest_metadata(path, delta_log.MANIFEST_KEY, 0) == "one"
    files = delta_log.data_files(path, 1)
    assert sorted(f.num_records for f in files) == [1, 2]
    assert all(f.uri.startswith(path + "/data/r") for f in files), files
    added = delta_log.added_between(path, 0, 1, what="t")
    assert [f.num_records for f in added] == [1] and added[0].uri == path + "/" + second[0].path
    assert delta_log.table_bytes(path, 1) == sum(filesystem.size(f.uri) for f in files)
    removes = delta_log.remove_actions([f for f in files if f.num_records == 2])
    assert [r.path for r in removes] == [first[0].path]
    assert delta_log.rows_after(path, 1, removes) == 1


def test_of_two_commits_on_one_version_only_one_lands(s3_lake):
    path = filesystem.join(s3_lake.uri, f"t-{uuid.uuid4().hex[:8]}")
    delta_log.commit(path, delta_log.write_small(rows((1, 1)), path, tag="r1"), SCHEMA, app_id="a", run_id=1,
                     metadata={}, read_version=None)
    delta_log.commit(path, delta_log.write_small(rows((2, 2)), path, tag="r2"), SCHEMA, app_id="a", run_id=2,
                     metadata={}, read_version=0)
    with pytest.raises(ConcurrentRunError):
        delta_log.commit(path, delta_log.write_small(rows((3, 3)), path, tag="r2"), SCHEMA, app_id="a", run_id=2,
                         metadata={}, read_version=0)
    assert delta_log.version(path) == 1
    assert sorted(f.num_records for f in delta_log.data_files(path, 1)) == [1, 1]
    with pytest.raises(ConcurrentRunError):  # creating a table that another writer created
        delta_log.commit(path, [], SCHEMA, app_id="a", run_id=1, metadata={}, read_version=None)
    assert delta_log.version(path) == 1


def test_a_models_folders_and_markers_live_in_the_bucket(s3_lake):
    tables = ModelTables(filesystem.join(s3_lake.uri, f"models-{uuid.uuid4().hex[:8]}"), "m")
    assert tables.state_tables() == []
    for name in ("j1_right", "j1_left"):
        path = tables.state(name)
        delta_log.commit(path, delta_log.write_small(rows((1, 1)), path, tag="r1"), SCHEMA, app_id="a", run_id=1,
                         metadata={}, read_version=None)
    assert tables.state_tables() == [tables.state("j1_left"), tables.state("j1_right")]
    assert tables.all_tables()[-3:] == [tables.changelog, tables.result, tables.runs]
    with lease.holding(tables, "run", exclusive_of=("maintain",)):
        assert [m["what"] for m in lease.holders(tables)] == ["run"]
        with pytest.raises(ModelBusyError):
            with lease.holding(tables, "maintain", exclusive_of=("run",)):
                pass
    assert lease.holders(tables) == []


SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
RUNS = [
    {"l": [insert(1, 10), insert(2, 20), insert(None, 5)], "r": [insert(1, 100), insert(1, 101)]},
    {"l": [delete(1, 10), insert(3, 30)], "r": [update_before(1, 100), update_after(1, 102), insert(2, 200)]},
    {"l": [insert(1, 11)], "r": [delete(2, 200), insert(3, 300)]},
]


def test_a_model_whose_inputs_and_tables_are_all_in_the_bucket_runs_as_on_a_local_disk(spark, s3_lake, tmp_path, capsys):
    root = filesystem.join(s3_lake.uri, f"case-{uuid.uuid4().hex[:8]}")
    remote = Scenario(spark, root, SQL, **INPUTS)
    local = Scenario(spark, tmp_path, SQL, **INPUTS)
    for changes in RUNS:
        remote.run(**changes)
        local.run(**changes)
        assert remote.changelog == local.changelog
        assert remote.result == local.result
    assert remote.result == {(1, 11, 101): 1, (1, 11, 102): 1, (2, 20, None): 1, (3, 30, 300): 1, (None, 5, None): 1}
    assert {"changelog", "result", "runs", "state"} <= set(filesystem.list_names(remote.tables.home))
    assert delta_log.app_version(remote.tables.runs, "streamjoin:m") == 3
    assert status.model_tables(root) == [remote.tables]
    assert status_main(["status", root]) == 0
    shown = capsys.readouterr().out
    assert f"model m ({remote.tables.home})" in shown, shown
    result_line = next(line.split() for line in shown.splitlines() if line.startswith("result "))
    assert result_line[1] == "2" and result_line[3] == str(sum(remote.result.values())), shown  # version, rows


def test_an_input_declares_the_storage_options_of_its_location(s3_lake):
    boto3.client("s3", endpoint_url=s3_lake.options["AWS_ENDPOINT_URL"], aws_access_key_id="test",
                 aws_secret_access_key="test", region_name="us-east-1").create_bucket(Bucket="inputs")
    location = f"s3://inputs/orders-{uuid.uuid4().hex[:8]}"
    assert filesystem.options_for(location) == {}  # only the fixture's bucket is registered
    spec = InputSpec.from_dict("orders", {"columns": [["k", "int"], ["v", "int"]], "location": location,
                                          "storage_options": s3_lake.options})
    assert filesystem.options_for(f"{location}/_delta_log") == s3_lake.options
    delta_log.commit(spec.location, delta_log.write_small(rows((1, 1)), spec.location, tag="i0"), SCHEMA,
                     app_id="load", run_id=1, metadata={}, read_version=None)
    assert delta_log.version(spec.location) == 0


def test_storage_options_that_are_not_a_mapping_are_a_declaration_error():
    with pytest.raises(ConfigError, match="input 'orders': storage_options must map option names to values"):
        InputSpec.from_dict("orders", {"columns": [["k", "int"]], "storage_options": ["AWS_REGION=us-east-1"]})


def test_a_model_whose_output_columns_change_in_the_bucket_reads_its_older_files_as_on_a_local_disk(spark, s3_lake,
                                                                                                     tmp_path):
    from test_projection_change import COLUMN_CHANGES, HISTORY, INPUTS as PAIR_INPUTS, LAST, LEFT, MORE, changed, replayed

    remote = Scenario(spark, filesystem.join(s3_lake.uri, f"columns-{uuid.uuid4().hex[:8]}"), LEFT, **PAIR_INPUTS)
    local = Scenario(spark, tmp_path, LEFT, **PAIR_INPUTS)
    for model in (remote, local):
        for run in HISTORY:
            model.run(**run)
        changed(model, COLUMN_CHANGES["added"])
        model.run(**MORE).run(**LAST)  # older files of the changelog lack the new column
    assert remote.result == local.result and replayed(remote) == replayed(local) == local.result


def test_a_model_rebuilt_in_the_bucket_is_swapped_in_as_on_a_local_disk(spark, s3_lake, tmp_path):
    from test_plan_rebuild import INNER, THIRD
    from test_projection_change import HISTORY, INPUTS as PAIR_INPUTS, LEFT, changed, replayed

    remote = Scenario(spark, filesystem.join(s3_lake.uri, f"rebuild-{uuid.uuid4().hex[:8]}"), LEFT, **PAIR_INPUTS)
    local = Scenario(spark, tmp_path, LEFT, **PAIR_INPUTS)
    for model in (remote, local):
        for run in HISTORY:
            model.run(**run)
        changed(model, INNER)
        model.run(**THIRD)  # rebuilt side by side, its files copied by the object store, then swapped in
        assert "swapped_in" in model.report.metrics
    assert remote.result == local.result and remote.changelog == local.changelog
    assert replayed(remote) == remote.result
    assert not filesystem.is_dir(filesystem.join(remote.tables.home, "_rebuild"))
