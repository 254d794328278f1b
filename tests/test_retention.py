"""Changelog retention keeps `streamjoin.changelog_consistent` true: the generic test's own SQL
(macros/tests.sql, rendered as dbt renders it) runs through Spark against the views a model
publishes, before and after `maintain --changelog-keep-runs` trims the changelog."""
from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from generic_tests import Relation, generic_test_sql
from streamjoin.api import run_model
from streamjoin.maintain import maintain
from streamjoin.retention import net_change
from streamjoin.storage import delta_log
from streamjoin.storage.tables import ModelTables

SQL = "SELECT l.k, l.v, r.w FROM kept.l l LEFT JOIN kept.r r ON l.k = r.k"
RUNS = [  # (l changes, r changes) as (row kind, k, value)
    ([("+I", 1, 10), ("+I", 2, 20)], [("+I", 1, 100)]),
    ([("+I", 3, 30)], [("+I", 2, 200), ("+I", 3, 300)]),
    ([("-D", 1, 10)], [("-U", 2, 200), ("+U", 2, 201)]),
    ([("+I", 4, 40), ("+I", 2, 20)], [("+I", 4, 400), ("-D", 3, 300)]),
    ([("-D", 2, 20)], [("+I", 5, 500)]),
]


def append(path: str, changes: list[tuple[str, int, int]], value: str) -> None:
    write_deltalake(path, pa.table({"k": pa.array([c[1] for c in changes], pa.int32()),
                                    value: pa.array([c[2] for c in changes], pa.int32()),
                                    "_row_kind": [c[0] for c in changes]}), mode="append")


@pytest.fixture
def model(spark, tmp_path):
    inputs = {"l": {"relation": "kept.l", "location": str(tmp_path / "l")},
              "r": {"relation": "kept.r", "location": str(tmp_path / "r")}}
    spark.sql("CREATE DATABASE IF NOT EXISTS kept")
    root = str(tmp_path / "models")

    def run(index: int) -> None:
        append(inputs["l"]["location"], RUNS[index][0], "v")
        append(inputs["r"]["location"], RUNS[index][1], "w")
        run_model(spark, name="kept_model", sql=SQL, inputs=inputs, config={}, root=root, relation="kept.kept_model")

    run.tables = ModelTables(root, "kept_model")
    return run


def test_changelog_consistent_holds_after_retention_trims_the_changelog(spark, model):
    relation = Relation("kept", "kept_model")
    for index in range(3):
        model(index)
    check = generic_test_sql(spark, "changelog_consistent", relation)
    assert spark.sql(check).collect() == []
    changelog = model.tables.changelog
    before = delta_log.version(changelog)

    maintain(model.tables, changelog_keep_runs=1, vacuum_hours=0)  # keeps run 3, folds runs 1-2 into their net change
    assert delta_log.added_between(changelog, before, delta_log.version(changelog), what="changelog") == [], \
        "an incremental reader of the changelog sees no change in retention"
    model(3)
    runs = sorted({r.run for r in spark.sql(f"SELECT _run_id AS run FROM {relation}__changelog").collect()})
    assert runs == [2, 3, 4], "runs 1 and 2 are one net change, tagged with run 2"
    assert spark.sql(check).collect() == []

    maintain(model.tables, changelog_keep_runs=1, vacuum_hours=0)  # the net change itself is trimmed again
    model(4)
    assert spark.sql(check).collect() == []
    assert spark.sql(f"SELECT * FROM {relation}").count() == 3  # (2,20,201), (3,30,NULL) and (4,40,400)
    live = DeltaTable(changelog).to_pyarrow_table()
    assert set(live["_run_id"].to_pylist()) == {3, 4, 5}  # run 3 now stands for runs 1-3


def test_changelog_consistent_names_every_difference_copy_by_copy(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS kept")
    spark.sql("CREATE OR REPLACE VIEW kept.off AS SELECT * FROM VALUES "
              "(1, 10), (2, 20), (2, 20), (2, 20), (4, 40), (NULL, NULL) AS t(k, v)")
    spark.sql("CREATE OR REPLACE VIEW kept.off__changelog AS SELECT * FROM VALUES "
              "(1, 10, '+I', 1), (1, 10, '+I', 1), (1, 10, '+I', 2), (1, 10, '-D', 2), (2, 20, '+I', 1), "
              "(3, 30, '-D', 2), (4, 40, '+I', 1), (4, 40, '-U', 2), (4, 40, '+U', 2), (NULL, NULL, '+I', 1) "
              "AS t(k, v, _row_kind, _run_id)")
    check = generic_test_sql(spark, "changelog_consistent", Relation("kept", "off"))
    assert Counter(tuple(r) for r in spark.sql(check).collect()) == Counter({
        ("only in the replayed changelog", 1, 10): 1, ("only in the result", 2, 20): 2,
        ("retracted more often than added", 3, 30): 1})


def test_net_change_sums_weights_per_row_and_keeps_a_negative_sum_as_deletions():
    rows = pa.table({"k": pa.array([1, 1, 2, None, None, 3, 3], pa.int32()),
                     "s": pa.array([{"a": 1}, {"a": 1}, {"a": 2}, None, None, {"a": 3}, {"a": 3}]),
                     "_row_kind": ["+I", "-D", "+I", "+I", "+U", "-U", "-D"],
                     "_run_id": pa.array([1, 2, 1, 1, 2, 2, 2], pa.int64())})
    net = net_change([rows], schema=rows.schema, run_id=2)
    assert net.schema == rows.schema
    by_file = net_change([rows.slice(0, 3), rows.slice(3)], schema=rows.schema, run_id=2)
    assert sorted(by_file.to_pylist(), key=repr) == sorted(net.to_pylist(), key=repr), "summed file by file: the same"
    assert sorted(net.to_pylist(), key=repr) == sorted([
        {"k": 2, "s": {"a": 2}, "_row_kind": "+I", "_run_id": 2},
        {"k": None, "s": None, "_row_kind": "+I", "_run_id": 2},
        {"k": None, "s": None, "_row_kind": "+I", "_run_id": 2},
        {"k": 3, "s": {"a": 3}, "_row_kind": "-D", "_run_id": 2},
        {"k": 3, "s": {"a": 3}, "_row_kind": "-D", "_run_id": 2},
    ], key=repr)
    flat = net_change([rows.drop(["s"])], schema=rows.drop(["s"]).schema, run_id=2)  # Arrow's group-by: the same
    assert sorted(flat.to_pylist(), key=repr) == sorted([{k: v for k, v in r.items() if k != "s"} for r in net.to_pylist()],
                                                        key=repr)
