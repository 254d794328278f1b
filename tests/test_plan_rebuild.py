"""A model whose SQL changed so that its state no longer fits is rebuilt side by side from its inputs'
history and swapped in (`on_plan_change='rebuild'`, the default): the old result stays the model's
until the swap's run completes, the swap's changelog is exactly the difference between the old and
the new result (so a downstream model follows), later runs continue incrementally, and a rebuild cut
short at any commit, or killed, is completed by the next run.

The oracles are Spark's batch evaluation of the new SQL over the inputs' snapshots, the changelog
replayed, and the tables of an uninterrupted rebuild."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streamjoin import api
from streamjoin import InputSpec, ModelConfig, ModelTables, PlanChangedError, compile_sql, run_once
from streamjoin.api import last_complete_run
from streamjoin.conformance import CaseRunner
from streamjoin.runtime.rebuild import REBUILD_FOLDER
from streamjoin.runtime.report import RunReport
from streamjoin.storage import delta_log, filesystem
from streamjoin.storage.state import UPDATED

from oracle import batch_result
from scenario import Scenario
from test_exactly_once import CHILD, InjectedCrash, contents, crash_after
from test_projection_change import HISTORY, LEFT, as_rows, changed, changelog_rows, replayed
from test_regular_properties import INPUTS

# the same output columns, another join: inner, with a residual condition
INNER = "SELECT l.k AS lk, l.v, r.w FROM l JOIN r ON l.k = r.k AND l.v <= r.w"
THIRD = {"l": [("+I", [3, 1]), ("-D", [None, 2])], "r": [("+I", [1, 5]), ("-D", [3, 3])]}
FOURTH = {"l": [("+I", [1, 0]), ("-U", [3, 0]), ("+U", [3, 4])], "r": [("+I", [3, 9])]}


def seen(*runs: dict) -> dict[str, list]:
    out: dict[str, list] = {"l": [], "r": []}
    for run in runs:
        for name, rows in run.items():
            out[name] += rows
    return out


def with_history(spark, root: Path, runs=HISTORY) -> Scenario:
    model = Scenario(spark, root, LEFT, **INPUTS)
    for run in runs:
        model.run(**run)
    return model


def test_a_changed_join_is_rebuilt_side_by_side_and_swapped_in(spark, tmp_path, caplog):
    model = with_history(spark, tmp_path)
    before = model.result
    changed(model, INNER)
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        model.run(**THIRD)
    assert "rebuilding it side by side from its inputs while its tables keep the old result" in caplog.text
    assert "+  inner join j1 ON" in caplog.text
    report = model.report
    assert report.run_id == 3 and report.status == "committed" and "swapped_in" in report.metrics
    expected = batch_result(spark, INNER, INPUTS, seen(*HISTORY, THIRD))
    assert model.result == expected
    change = Counter(expected)
    change.subtract(before)
    assert model.changelog == Counter({k: v for k, v in change.items() if v})  # the net change, nothing else
    assert report.rows_out == {"+": sum(v for v in change.values() if v > 0),
                               "-": -sum(v for v in change.values() if v < 0)}
    assert replayed(model) == expected
    assert not filesystem.exists(filesystem.join(model.tables.home, REBUILD_FOLDER)), "the shadow is deleted"

    # the rebuilt state is the new plan's: the next run continues from it incrementally
    model.run(**FOURTH)
    assert model.report.run_id == 4 and "swapped_in" not in model.report.metrics
    assert model.result == batch_result(spark, INNER, INPUTS, seen(*HISTORY, THIRD, FOURTH))
    assert replayed(model) == model.result


def test_a_rebuild_held_to_a_budget_spans_runs_while_the_model_keeps_its_old_result(spark, tmp_path):
    model = with_history(spark, tmp_path)  # each input: 2 versions (4 + 3 rows of l, 3 + 3 of r)
    before, versions = model.result, model.versions()
    changed(model, INNER, rebuild_budget=3)
    model.run(**THIRD)  # a third version of each input (2 rows each)
    progress = []
    while model.report.status == "rebuilding":
        assert model.versions() == versions and model.result == before  # nothing of the model's own changed
        progress.append(model.report.metrics["rebuild"])
        model.run()
    assert progress == [{"l": {"read_to": 0, "latest": 2}, "r": {"read_to": 0, "latest": 2}},  # at least one version
                        {"l": {"read_to": 1, "latest": 2}, "r": {"read_to": 1, "latest": 2}}]
    assert "rebuilding side by side, read l to version 0 of 2, r to version 0 of 2 so far (rebuild_budget)" in \
        RunReport("m", None, "rebuilding", metrics={"rebuild": progress[0]}).summary()
    assert model.report.run_id == 3 and "swapped_in" in model.report.metrics
    expected = batch_result(spark, INNER, INPUTS, seen(*HISTORY, THIRD))
    assert model.result == expected and replayed(model) == expected


def test_state_tables_the_new_plan_does_not_keep_are_dropped_and_new_ones_kept(spark, tmp_path):
    three = {**INPUTS, "s": [("k", "int"), ("x", "int")]}
    two_way = "SELECT l.k AS lk, l.v, s.x FROM l JOIN s ON l.k = s.k"
    model = Scenario(spark, tmp_path, two_way, config={"join_strategy": "binary"}, **three)
    model.run(l=[("+I", [1, 1]), ("+I", [2, 2])], r=[("+I", [1, 7])], s=[("+I", [1, 10]), ("+I", [2, 20])])
    three_way = "SELECT l.k AS lk, l.v, s.x FROM l JOIN r ON l.k = r.k JOIN s ON l.k = s.k"
    changed(model, three_way, join_strategy="binary")
    model.run(r=[("+I", [2, 8])])
    assert sorted(Path(p).name for p in model.tables.state_tables()) == ["j1_left", "j1_right", "j2_left", "j2_right"]
    assert model.result == Counter({(1, 1, 10): 1, (2, 2, 20): 1})
    back = "SELECT l.k AS lk, l.v, s.x FROM l LEFT JOIN s ON l.k = s.k"
    changed(model, back, join_strategy="binary")
    model.run(l=[("+I", [3, 3])])
    assert sorted(Path(p).name for p in model.tables.state_tables()) == ["j1_left", "j1_right"]  # j2's are gone
    assert model.result == Counter({(1, 1, 10): 1, (2, 2, 20): 1, (3, 3, None): 1})
    assert model.changelog == Counter({(3, 3, None): 1})


def test_a_rebuild_that_changes_the_output_columns_swaps_them_in_and_the_changelog_gains_them(spark, tmp_path):
    model = with_history(spark, tmp_path)
    before = model.result
    new_sql = "SELECT l.k AS lk, r.w, r.k AS rk FROM l JOIN r ON l.k = r.k"  # another join; v dropped, rk added
    changed(model, new_sql)
    model.run(**THIRD)
    assert "swapped_in" in model.report.metrics
    expected = batch_result(spark, new_sql, INPUTS, seen(*HISTORY, THIRD))
    assert model.result == expected
    columns = [f.name for f in delta_log.table_schema(model.tables.changelog) if f.name not in ("_row_kind", "_run_id")]
    assert columns == ["lk", "v", "w", "rk"]
    change = as_rows(expected, ["lk", "w", "rk"], columns, 1)
    change.update(as_rows(before, ["lk", "v", "w"], columns, -1))
    assert changelog_rows(model, model.report.run_id) == Counter({k: v for k, v in change.items() if v})
    model.run(**FOURTH)
    assert model.result == batch_result(spark, new_sql, INPUTS, seen(*HISTORY, THIRD, FOURTH))
    assert replayed(model) == model.result


def test_a_rebuild_that_changes_an_output_columns_type_is_refused_and_changes_nothing(spark, tmp_path):
    model = with_history(spark, tmp_path, HISTORY[:1])
    versions = model.versions()
    changed(model, "SELECT l.k AS lk, l.v, CAST(r.w AS BIGINT) AS w FROM l JOIN r ON l.k = r.k")
    with pytest.raises(PlanChangedError) as refused:
        model.run()
    message = str(refused.value)
    assert "its state was rebuilt side by side, but so did the type of output column(s) w int before, bigint now, " \
           "which its changelog table keeps" in message
    assert "set on_plan_change='full_refresh'; downstream models need a full refresh too" in message
    assert model.versions() == versions


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory) -> dict[str, Counter]:
    model = with_history(spark, tmp_path_factory.mktemp("uninterrupted"))
    changed(model, INNER)
    model.run(**THIRD)
    return contents(model)


def test_a_rebuild_cut_short_at_any_commit_keeps_the_old_model_until_the_swap_completes(
        spark, tmp_path, monkeypatch, uninterrupted):
    model = with_history(spark, tmp_path)
    old = contents(model)
    changed(model, INNER)
    model.runner.append_changes(2, THIRD)
    committed: list[str] = []
    for attempt in range(40):  # the first dies before any commit, each later one after one more table's
        with monkeypatch.context() as patch:
            done = crash_after(patch, 1 if attempt else 0)
            try:
                report = run_once(spark, model.plan, model.tables)
            except InjectedCrash:
                assert len(done) == (1 if attempt else 0)
                committed += done
                assert last_complete_run(model.tables) == 2, "the old model stays complete until the swap's run log"
                continue
        break
    shadow = filesystem.join(model.tables.home, REBUILD_FOLDER)
    assert any(p.startswith(shadow) for p in committed) and model.tables.result in committed
    assert report.run_id == 3 and "swapped_in" in report.metrics
    assert contents(model) == uninterrupted != old


def test_a_killed_swap_is_completed_by_the_next_run(spark, tmp_path, uninterrupted):
    model = with_history(spark, tmp_path)
    changed(model, INNER)
    model.runner.append_changes(2, THIRD)
    case = {**model.runner.case, "sql": INNER}
    child = subprocess.Popen([sys.executable, str(CHILD), json.dumps(case), str(tmp_path), "--hold-after-first-commit"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "running"
        assert child.stdout.readline().strip() == "committed"  # its first commit to one of the model's own tables
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=120)
    assert last_complete_run(model.tables) == 2
    report = run_once(spark, model.plan, model.tables)
    assert report.run_id == 3 and "swapped_in" in report.metrics
    assert contents(model) == uninterrupted


def test_a_downstream_model_follows_the_swap_as_a_change(spark, tmp_path):
    upstream = with_history(spark, tmp_path / "up")
    out = [("lk", "int"), ("v", "int"), ("w", "int")]
    specs = {"u": InputSpec.from_dict("u", {"columns": [list(c) for c in out], "location": upstream.tables.changelog}),
             "r": upstream.runner.specs["r"]}
    sql = "SELECT u.lk, u.v, r.w AS rw FROM u JOIN r ON u.lk = r.k"
    plan = compile_sql("down", sql, specs, ModelConfig())
    down = ModelTables(str(tmp_path / "down"), "down")

    def down_result() -> Counter:
        rows = DeltaTable(down.result).to_pyarrow_table()
        return Counter(tuple(r.values()) for r in rows.drop_columns(["_bucket"]).to_pylist())

    def expected(*runs: dict) -> Counter:
        u_rows = [("+I", list(row)) for row, n in upstream.result.items() for _ in range(n)]
        return batch_result(spark, sql, {"u": out, "r": INPUTS["r"]}, {"u": u_rows, "r": seen(*runs)["r"]})

    run_once(spark, plan, down)
    assert down_result() == expected(*HISTORY)
    changed(upstream, INNER)
    upstream.run(**THIRD)
    assert "swapped_in" in upstream.report.metrics
    report = run_once(spark, plan, down)
    assert report.status == "committed" and "swapped_in" not in report.metrics  # the downstream model's plan fits
    assert down_result() == expected(*HISTORY, THIRD)


@pytest.mark.parametrize("was", ["a narrower interval join", "a regular join"])
def test_a_rebuilt_interval_join_carries_on_with_the_rebuilt_watermark_and_late_rows(spark, tmp_path, was):
    """An interval join rebuilt from another bound, or from a regular join whose state tables have
    the same names and other columns, continues exactly as a model of the new SQL that read the same
    history in one run: same state, late rows and result, and the same next run (whose late row is
    judged by the watermark the rebuild left)."""
    def t(hhmm: str) -> str:
        return f"2021-12-25 {hhmm}:00"

    inputs = {"orders": {"columns": [["id", "int"], ["ts", "timestamp"]], "event_time": "ts"},
              "shipments": {"columns": [["order_id", "int"], ["ts", "timestamp"]], "event_time": "ts",
                            "watermark_delay": "10 minutes"}}
    sql = ("SELECT o.id, o.ts AS ordered, s.ts AS shipped FROM orders o LEFT JOIN shipments s ON o.id = s.order_id "
           "AND s.ts BETWEEN o.ts AND o.ts + INTERVAL '{bound}' HOUR")
    runs = [{"orders": [[1, t("10:00")], [2, t("10:30")]], "shipments": [[1, t("10:20")]]},
            {"shipments": [[9, t("12:00")]]},
            {"orders": [[3, t("13:00")]], "shipments": [[9, t("14:00")]]},
            {"shipments": [[2, t("11:00")], [3, t("13:20")]], "orders": [[4, t("13:30")]]}]  # 2 at 11:00 is late

    def as_changes(run: dict) -> dict:
        return {name: [["+I", row] for row in rows] for name, rows in run.items()}

    def case(bound: int | None) -> dict:
        text = sql.format(bound=bound) if bound else sql.split(" AND s.ts")[0]
        return {"name": "m", "inputs": inputs, "sql": text, "config": {}, "runs": []}

    rebuilt = CaseRunner(spark, case(1 if was == "a narrower interval join" else None), str(tmp_path / "rebuilt"))
    for i, run in enumerate(runs[:2]):
        rebuilt.append_changes(i, as_changes(run))
        run_once(spark, rebuilt.plan, rebuilt.tables)
    rebuilt.plan = CaseRunner(spark, case(2), str(tmp_path / "rebuilt")).plan
    for i, run in enumerate(runs[2:], start=2):
        rebuilt.append_changes(i, as_changes(run))
        report = run_once(spark, rebuilt.plan, rebuilt.tables)
        assert ("swapped_in" in report.metrics) == (i == 2)

    fresh = CaseRunner(spark, case(2), str(tmp_path / "fresh"))
    fresh.append_changes(0, {name: [r for run in runs[:3] for r in as_changes(run).get(name, [])] for name in inputs})
    run_once(spark, fresh.plan, fresh.tables)
    fresh.append_changes(1, as_changes(runs[3]))
    run_once(spark, fresh.plan, fresh.tables)

    def tables(runner: CaseRunner) -> dict[str, Counter]:
        """Every table but the run log and changelog, rows as JSON, write times and run ids (the two
        models number their runs differently) left out."""
        out = {}
        for path in runner.tables.all_tables():
            name = os.path.relpath(path, runner.tables.home)
            if name not in ("runs", "changelog"):
                rows = DeltaTable(path).to_pyarrow_table()
                rows = rows.drop_columns([c for c in rows.column_names if c in (UPDATED, "_run", "_run_id")])
                out[name] = Counter(json.dumps(r, sort_keys=True, default=str) for r in rows.to_pylist())
        return out

    assert "late_rows" in tables(fresh) and tables(rebuilt) == tables(fresh)
    assert sorted(rebuilt.changelog(4)) == sorted(fresh.changelog(2))


def test_the_published_views_show_the_old_result_until_the_swap_completes(spark, tmp_path, monkeypatch):
    left, right = str(tmp_path / "left"), str(tmp_path / "right")
    write_deltalake(left, pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    write_deltalake(right, pa.table({"k": [2, 3, 4]}))
    inputs = {"l": {"location": left, "changelog_format": "append", "relation": "l_in"},
              "r": {"location": right, "changelog_format": "append", "relation": "r_in"}}
    root, relation = str(tmp_path / "models"), "default.rebuilt_view"

    def run(sql: str) -> None:
        api.run_model(spark, name="rv", sql=sql, inputs=inputs, config={}, root=root, relation=relation)

    def shown() -> list[tuple]:
        return sorted(tuple(r) for r in spark.table(relation).collect())

    run("SELECT l.k, l.v FROM l_in l JOIN r_in r ON l.k = r.k")
    assert shown() == [(2, "b"), (3, "c")]
    write_deltalake(right, pa.table({"k": [1]}), mode="append")
    anti = "SELECT l.k, l.v FROM l_in l WHERE NOT EXISTS (SELECT 1 FROM r_in r WHERE r.k = l.k AND r.k > 1)"
    tables = ModelTables(root, "rv")
    real = delta_log.commit

    def commit(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if path == tables.result:
            raise InjectedCrash("the swap dies after committing the model's result")

    with monkeypatch.context() as patch:
        patch.setattr(delta_log, "commit", commit)
        with pytest.raises(InjectedCrash):
            run(anti)
    assert shown() == [(2, "b"), (3, "c")], "the view stays on the last complete run"
    run(anti)
    assert shown() == [(1, "a")]
    assert sorted(tuple(r) for r in spark.table(f"{relation}__changelog").where("_run_id = 2")
                  .select("k", "v", "_row_kind").collect()) == [(1, "a", "+I"), (2, "b", "-D"), (3, "c", "-D")]


def test_rebuild_budget_is_a_positive_whole_number_and_no_part_of_the_plan():
    from streamjoin.errors import ConfigError
    from streamjoin.runtime.plan_change import plan_fingerprint

    for bad in (0, -5, 2.5, "100", True):
        with pytest.raises(ConfigError, match="rebuild_budget .* must be a whole number of changes, at least 1"):
            ModelConfig.from_dict({"rebuild_budget": bad})
    specs = {n: InputSpec.from_dict(n, {"columns": [list(c) for c in cols]}) for n, cols in INPUTS.items()}
    plans = [compile_sql("m", INNER, specs, ModelConfig.from_dict(config))
             for config in ({}, {"rebuild_budget": 10}, {"on_plan_change": "fail"})]
    assert len({plan_fingerprint(p) for p in plans}) == 1, "changing how a model rebuilds needs no rebuild"


def test_a_budgeted_rebuild_starts_at_the_oldest_checkpoint_of_an_input_whose_early_logs_are_gone(spark, tmp_path):
    model = with_history(spark, tmp_path, [*HISTORY, THIRD])  # three versions of each input
    for spec in model.plan.inputs.values():  # log retention: a checkpoint, and the logs before it removed
        latest = delta_log.version(spec.location)
        delta_log.table(spec.location).create_checkpoint()
        for v in range(latest):
            filesystem.delete_file(filesystem.join(spec.location, "_delta_log", f"{v:020d}.json"))
    changed(model, INNER, rebuild_budget=1)
    model.run(**FOURTH)
    while model.report.status == "rebuilding":
        model.run()
    assert "swapped_in" in model.report.metrics
    assert model.result == batch_result(spark, INNER, INPUTS, seen(*HISTORY, THIRD, FOURTH))
