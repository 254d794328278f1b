"""Bad input: a clear error naming the model, the input and the row; every table left as it was."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from scenario import Scenario, delete, insert
from streamjoin import InputError
from streamjoin.api import run_model
from streamjoin.spec import InputSpec
from streamjoin.storage import delta_log
from streamjoin.storage.input_schema import check_input_schema
from streamjoin.storage.tables import ModelTables

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


@pytest.fixture
def model(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, name="bad_input_model", **INPUTS)
    m.run(l=[insert(1, 10), insert(2, 20)], r=[insert(1, 100)])
    return m


def append_raw(model: Scenario, name: str, table: pa.Table) -> None:
    write_deltalake(model.runner.specs[name].location, table, mode="append")


def fails_unchanged(model: Scenario, *fragments: str, **changes) -> str:
    before = model.versions()
    with pytest.raises(InputError) as err:
        model.run(**changes)
    message = str(err.value)
    assert "model 'bad_input_model'" in message
    for f in fragments:
        assert f in message, message
    assert model.versions() == before, "a failed run must leave every table at its version"
    return message


@pytest.mark.parametrize("kind", ["+X", "", None])
def test_unknown_or_null_row_kind(model, kind):
    before = model.versions()
    append_raw(model, "l", pa.table({"k": pa.array([3], pa.int32()), "v": pa.array([30], pa.int32()),
                                     "_row_kind": pa.array([kind], pa.string())}))
    with pytest.raises(InputError) as err:
        model.report = None
        from streamjoin.runtime.run import run_once
        run_once(model.runner.spark, model.plan, model.tables)
    message = str(err.value)
    assert "input 'l'" in message and "row kind" in message
    assert repr(kind) in message or f'"_row_kind":{json.dumps(kind)}' in message, message  # the row is shown
    # how to recover: the run committed nothing; fix the input and rerun (a full refresh if it was read before)
    assert "nothing was committed" in message and "fix or remove these rows in the input's Delta table" in message
    assert "rerun the model, with --full-refresh if it has read this input before" in message, message
    assert model.versions() == before


def test_retraction_of_a_row_never_inserted_fails_by_default(model):
    message = fails_unchanged(model, "input 'r'", "never held", '"k":7', l=[insert(3, 30)], r=[delete(7, 700)])
    assert "on_missing_retraction" in message


def test_retraction_of_more_copies_than_held(model):
    fails_unchanged(model, "input 'l'", "retracted 2 time(s), held 1", l=[delete(1, 10), delete(1, 10)])


def test_missing_retractions_can_be_ignored(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, config={"on_missing_retraction": "ignore"}, **INPUTS)
    m.run(l=[insert(1, 10)], r=[delete(1, 5)])
    assert m.result == {(1, 10, None): 1}
    m.run(r=[insert(1, 5)])
    assert m.result == {(1, 10, 5): 1}


def test_duplicate_unique_key(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, unique_keys={"l": ["k"]}, name="bad_input_model", **INPUTS)
    m.run(l=[insert(1, 10)])
    fails_unchanged(m, "input 'l'", "unique key", '"k":1', l=[insert(1, 11)])


def test_schema_that_no_longer_matches(model):
    location = model.runner.specs["r"].location
    before = model.versions()
    write_deltalake(location, pa.table({"k": pa.array(["x"]), "w": pa.array(["y"]), "_row_kind": ["+I"]}),
                    mode="overwrite", schema_mode="overwrite")
    with pytest.raises(InputError) as err:
        from streamjoin.runtime.run import run_once
        run_once(model.runner.spark, model.plan, model.tables)
    message = str(err.value)
    assert "input 'r'" in message and "column 'k'" in message and "--full-refresh" in message
    assert model.versions() == before


CUSTOMER = pa.struct([("id", pa.int32()), ("name", pa.string())])


def customers_table(tmp_path) -> str:
    """A changelog whose `customer` struct has no `email` field."""
    path = str(tmp_path / "customers")
    write_deltalake(path, pa.table({"cid": pa.array([1], pa.int32()), "customer": pa.array([{"id": 1, "name": "ann"}], CUSTOMER),
                                    "_row_kind": ["+I"]}))
    return path


def test_a_struct_field_missing_on_a_first_run_is_named_by_its_path(spark, tmp_path):
    orders = str(tmp_path / "orders")
    write_deltalake(orders, pa.table({"id": pa.array([7], pa.int32()), "cid": pa.array([1], pa.int32()),
                                      "_row_kind": ["+I"]}))
    inputs = {"orders": {"location": orders},
              "customers": {"location": customers_table(tmp_path),
                            "columns": [["cid", "int"], ["customer", "struct<id:int,name:string,email:string>"]]}}
    with pytest.raises(InputError) as err:
        run_model(spark, name="bad_input_model", sql="SELECT o.id, c.customer FROM orders o JOIN customers c ON o.cid = c.cid",
                  inputs=inputs, config={}, root=str(tmp_path / "models"))
    message = str(err.value)
    assert "model 'bad_input_model', input 'customers'" in message
    assert "does not match its declaration: struct field 'customer.email' is missing" in message, message
    assert "no longer" not in message, message
    assert not delta_log.exists(ModelTables(str(tmp_path / "models"), "bad_input_model").runs)


def test_the_schema_error_gives_the_full_refresh_hint_only_where_state_exists(spark, tmp_path):
    spec = InputSpec.from_dict("customers", {"location": customers_table(tmp_path), "columns": [
        ["cid", "bigint"], ["customer", "struct<id:int,name:int,email:string>"]]})
    with pytest.raises(InputError) as first:
        check_input_schema(spec, "m", has_state=False)
    found = "column 'cid' is int, declared bigint; struct field 'customer.name' is string, declared int; " \
            "struct field 'customer.email' is missing"
    assert str(first.value) == (f"model 'm', input 'customers': the input's Delta table at {spec.location} does not "
                                f"match its declaration: {found}. Fix the declaration (or the table), then rerun")
    with pytest.raises(InputError) as later:
        check_input_schema(spec, "m", has_state=True)
    assert str(later.value) == (f"model 'm', input 'customers': the input's schema no longer matches its declaration: "
                                f"{found}. Fix the declaration, then run the model with --full-refresh to rebuild "
                                "its state from the input")


def test_an_added_column_the_model_does_not_read_is_carried_on(model):
    location = model.runner.specs["r"].location
    write_deltalake(location, pa.table({"k": pa.array([2], pa.int32()), "w": pa.array([200], pa.int32()),
                                        "_row_kind": ["+I"], "note": ["new column"]}), mode="append", schema_mode="merge")
    assert "note" in DeltaTable(location).schema().to_arrow().names
    model.report = None
    from streamjoin.runtime.run import run_once
    model.report = run_once(model.runner.spark, model.plan, model.tables)
    assert model.changelog == {(2, 20, None): -1, (2, 20, 200): 1}
    assert model.result == {(1, 10, 100): 1, (2, 20, 200): 1}


def test_tables_are_standard_delta(model):
    for path in model.tables.all_tables():
        table = DeltaTable(path)
        assert table.version() >= 0
        for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
            assert action["num_records"] is not None  # file statistics are written for data skipping
            assert os.path.exists(os.path.join(path, action["path"]))
    assert sorted(DeltaTable(model.tables.result).to_pyarrow_table().drop(["_bucket"]).to_pylist(),
                  key=lambda r: r["k"]) == [{"k": 1, "v": 10, "w": 100}, {"k": 2, "v": 20, "w": None}]


def test_a_null_event_time_fails_the_run(spark, tmp_path):
    """As in Flink, where a NULL rowtime stops the job: the watermark needs a time on every row."""
    from streamjoin.conformance import CaseRunner
    from streamjoin.runtime.run import run_once

    case = {"name": "bad_input_model", "sql": "SELECT o.id, s.id AS sid FROM o JOIN s ON o.id = s.id "
            "AND s.ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR", "runs": [],
            "inputs": {n: {"columns": [["id", "int"], ["ts", "timestamp"]], "event_time": "ts",
                           "watermark_delay": "0 seconds"} for n in ("o", "s")}}
    runner = CaseRunner(spark, case, str(tmp_path))
    runner.append_changes(0, {"o": [["+I", [1, "2026-01-01 10:00:00"]]], "s": [["+I", [1, "2026-01-01 10:30:00"]]]})
    run_once(spark, runner.plan, runner.tables)
    before = runner.versions()
    runner.append_changes(1, {"s": [["+I", [2, "2026-01-01 10:40:00"]], ["+I", [3, None]]]})
    with pytest.raises(InputError) as err:
        run_once(spark, runner.plan, runner.tables)
    message = str(err.value)
    assert "model 'bad_input_model'" in message and "input 's'" in message and "NULL event time" in message
    assert '"id":3' in message, message
    assert runner.versions() == before


def test_a_result_table_changed_outside_streamjoin_fails_the_retracting_run(model):
    DeltaTable(model.tables.result).delete("k = 1")  # someone else's write: the joined row (1, 10, 100) is gone
    before = model.versions()
    with pytest.raises(Exception) as err:
        model.run(l=[delete(1, 10)])
    message = str(err.value)
    assert "model bad_input_model's run retracts a row its result table does not hold" in message, message
    assert '{"k":1,"v":10,"w":100}' in message, message
    after = model.versions()
    assert after == before, {k: (v, after[k]) for k, v in before.items() if after[k] != v}
