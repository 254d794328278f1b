"""`streamjoin.explain.describe`: what a model computes and keeps, from its plan and (after runs) its
tables: each operator's state and layout, append-only inputs, the watermark, retention, the state's
figures after the last run, and whether a changed model still fits that state."""
from __future__ import annotations

import re

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from streamjoin import InputSpec, ModelConfig, ModelTables, compile_sql, run_once
from streamjoin.errors import InputError
from streamjoin.explain import describe
from streamjoin.storage import delta_log


def spec(name: str, columns: dict[str, str], **extra) -> InputSpec:
    return InputSpec.from_dict(name, {"columns": [{"name": c, "type": t} for c, t in columns.items()], **extra})


ORDERS = spec("orders", {"order_id": "bigint", "product_id": "bigint", "ts": "timestamp"},
              unique_key=["order_id"], event_time="ts", watermark_delay="5 seconds", changelog_format="append")
PRICES = spec("prices", {"product_id": "bigint", "price": "int", "ts": "timestamp"}, unique_key=["product_id"],
              event_time="ts", changelog_format="upsert")
SHIPS = spec("ships", {"order_id": "bigint", "ts": "timestamp"}, event_time="ts", changelog_format="append")


def section(text: str, name: str) -> str:
    """The lines of `text` from the heading `name:` to the next blank line."""
    return text.split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]


def test_a_regular_join_names_each_sides_layout_key_buckets_and_unbounded_retention():
    plan = compile_sql("m", "select o.order_id, p.price from orders o left join prices p on o.product_id = p.product_id",
                       {"orders": ORDERS, "prices": PRICES}, ModelConfig.from_dict({"state_buckets": 8}))
    text = describe(plan)
    assert text.startswith(plan.explain())
    state = section(text, "operators and their state")
    assert "j1 (left join): binary operator" in state
    assert ("state j1_left: orders AS o: one row per unique key (order_id), with its match count (its unmatched rows "
            "are padded); keyed by o.product_id in 8 buckets") in state
    assert "state j1_right: prices AS p: at most one row per join key; keyed by p.product_id in 8 buckets" in state
    assert "state prices_upsert holds its latest row per unique key (product_id)" in state
    assert "must be append-only" not in text
    assert "watermark: none: no join of this model waits for event time" in text
    assert "j1: every live row stays (set state_ttl to bound it" in section(text, "retention")
    assert "\nstate:" not in text  # without tables there is nothing to compare with


def test_state_ttl_is_the_retention_of_a_regular_join():
    plan = compile_sql("m", "select * from orders o join ships s on o.order_id = s.order_id",
                       {"orders": ORDERS, "ships": SHIPS}, ModelConfig.from_dict({"state_ttl": "2 hours"}))
    assert "j1: rows not updated for state_ttl 2 hours leave state" in section(describe(plan), "retention")
    assert "every live row, counted (no unique key declared)" in describe(plan)


def test_an_interval_join_names_its_bound_its_append_only_inputs_and_its_watermark():
    sql = ("select o.order_id, s.ts from orders o join ships s on o.order_id = s.order_id "
           "and s.ts between o.ts and o.ts + interval 4 hours")
    plan = compile_sql("m", sql, {"orders": ORDERS, "ships": SHIPS}, ModelConfig.from_dict({"allowed_lateness": "90 seconds"}))
    text = describe(plan)
    assert "interval operator (Flink's RowTimeIntervalJoin): pairs with o.ts - s.ts in [-4 hours, 0 seconds]" in text
    assert "interval `o__ts` - `s__ts` in [-4 hours, 0 seconds]" in plan.explain()  # not the bound's Python repr
    inputs = section(text, "inputs")
    assert "orders: changelog_format append; event time ts; must be append-only: the interval join j1 reads it" in inputs
    assert "ships: changelog_format append; event time ts; must be append-only: the interval join j1 reads it" in inputs
    assert re.search(r"watermark: .*orders\.ts - 5 seconds, ships\.ts .*allowed_lateness 90 seconds", text)


def test_the_watermark_counts_every_input_with_an_event_time_also_one_a_regular_join_reads():
    """FORMAT.md: one watermark per model, over every input that declares an event time."""
    sql = ("select o.order_id, s.ts, p.price from orders o join ships s on o.order_id = s.order_id "
           "and s.ts between o.ts and o.ts + interval 4 hours left join prices p on o.product_id = p.product_id")
    plan = compile_sql("m", sql, {"orders": ORDERS, "ships": SHIPS, "prices": PRICES})
    assert re.search(r"watermark: .*orders\.ts - 5 seconds, prices\.ts, ships\.ts \(unset until", describe(plan))


def test_a_temporal_join_takes_changes_on_both_sides():
    sql = ("select o.order_id, p.price from orders o left join prices for system_time as of o.ts as p "
           "on o.product_id = p.product_id")
    text = describe(compile_sql("m", sql, {"orders": ORDERS, "prices": PRICES}, ModelConfig()))
    assert "state j1_probes: orders AS o: probes the watermark has not passed yet" in text
    assert "state j1_versions: prices AS p: per key, the versions a future probe can still select" in text
    inputs = section(text, "inputs")
    assert "orders: changelog_format append; event time ts; inserts only" in inputs
    assert "prices: changelog_format upsert; event time ts; inserts, updates and deletes" in inputs


def test_an_asof_join_keeps_every_live_row_whatever_the_state_ttl():
    sql = "select o.order_id, p.price from orders o asof join prices p match_condition(o.ts >= p.ts) on o.product_id = p.product_id"
    text = describe(compile_sql("m", sql, {"orders": ORDERS, "prices": PRICES}, ModelConfig.from_dict({"state_ttl": "1 hour"})))
    assert section(text, "retention").strip() == \
        "j1: every live row of both inputs stays (state_ttl does not apply to ASOF joins)"
    assert "state j1_left: orders AS o: every live row" in text and "watermark: none" in text


def test_after_runs_it_shows_the_states_figures_and_whether_a_changed_model_still_fits(spark, tmp_path):
    orders, ships = str(tmp_path / "orders"), str(tmp_path / "ships")
    write_deltalake(orders, pa.table({"order_id": [1, 2, 3], "product_id": [7, 7, 8]}))
    write_deltalake(ships, pa.table({"order_id": [1, 1, 4], "carrier": ["a", "b", "c"]}))
    inputs = {"orders": InputSpec.from_dict("orders", {"location": orders, "changelog_format": "append",
                                                      "columns": [{"name": "order_id", "type": "bigint"},
                                                                  {"name": "product_id", "type": "bigint"}]}),
              "ships": InputSpec.from_dict("ships", {"location": ships, "changelog_format": "append",
                                                    "columns": [{"name": "order_id", "type": "bigint"},
                                                                {"name": "carrier", "type": "string"}]})}
    sql = "select o.order_id, s.carrier from orders o left join ships s on o.order_id = s.order_id"
    plan = compile_sql("m", sql, inputs, ModelConfig())
    tables = ModelTables(str(tmp_path / "models"), "m")
    assert "state: no run yet" in describe(plan, tables)

    run_once(spark, plan, tables)
    text = describe(plan, tables)
    for side, rows in (("left", 3), ("right", 3)):
        path = tables.state(f"j1_{side}")
        files = len(delta_log.data_files(path, delta_log.version(path)))
        assert re.search(rf"state j1_{side}: .*\[after the last run: {rows} rows in {files} files, \d+\.\d\d MiB\]", text), text
    assert re.search(r"state: built by this plan \(last run 1, .* UTC\): the next run continues from it", text)

    changed = compile_sql("m", sql.replace("left join", "join"), inputs, ModelConfig.from_dict({"on_plan_change": "fail"}))
    text = describe(changed, tables)
    assert "state: built by another plan (last run 1," in text and "needs a rebuild" in text
    rebuilt = describe(compile_sql("m", sql.replace("left join", "join"), inputs, ModelConfig()), tables)
    assert "so the next run rebuilds it side by side from its inputs, keeping the old result until it swaps the new " \
           "one in (on_plan_change='rebuild')" in rebuilt
    diff = ["--- plan of the last run", "+++ plan now", "-  left join j1 ON `o__order_id` = `s__order_id`",
            "+  inner join j1 ON `o__order_id` = `s__order_id`"]
    assert [line for line in text.splitlines() if line.startswith(("---", "+++", "-  ", "+  "))] == diff
    buckets = compile_sql("m", sql, inputs, ModelConfig.from_dict({"state_buckets": 4}))
    assert "(the outlines are equal: the state's bucket count changed)" in describe(buckets, tables)

    # the run refuses, says how to go on and shows the same difference; nothing is written
    write_deltalake(orders, pa.table({"order_id": [5], "product_id": [9]}), mode="append")
    versions = {p: delta_log.version(p) for p in tables.all_tables()}
    with pytest.raises(InputError) as refused:
        run_once(spark, changed, tables)
    message = str(refused.value)
    assert "model 'm'" in message and "run it with --full-refresh (or set on_plan_change" in message
    assert all(line in message.splitlines() for line in diff)
    assert {p: delta_log.version(p) for p in tables.all_tables()} == versions


def test_on_plan_change_full_refresh_rebuilds_a_changed_model_and_fail_refuses_it(spark, tmp_path, caplog):
    from streamjoin import api

    left, right = str(tmp_path / "left"), str(tmp_path / "right")
    write_deltalake(left, pa.table({"k": [1, 2], "v": ["a", "b"]}))
    write_deltalake(right, pa.table({"k": [2, 3]}))
    inputs = {"l": {"location": left, "changelog_format": "append", "relation": "l_in"},
              "r": {"location": right, "changelog_format": "append", "relation": "r_in"}}
    root = str(tmp_path / "models")
    tables = ModelTables(root, "pc")
    inner, left_join = ("SELECT l.k, l.v FROM l_in l JOIN r_in r ON l.k = r.k",
                        "SELECT l.k, l.v FROM l_in l LEFT JOIN r_in r ON l.k = r.k")
    api.run_model(spark, name="pc", sql=inner, inputs=inputs, config={}, root=root)
    versions = {p: delta_log.version(p) for p in tables.all_tables()}

    with pytest.raises(InputError, match=r"set on_plan_change='rebuild' .* or 'full_refresh'\)\. What changed:\n--- plan of the last run"):
        api.run_model(spark, name="pc", sql=left_join, inputs=inputs, config={"on_plan_change": "fail"}, root=root)
    assert {p: delta_log.version(p) for p in tables.all_tables()} == versions

    with caplog.at_level("WARNING", logger="streamjoin"):
        report = api.run_model(spark, name="pc", sql=left_join, inputs=inputs,
                               config={"on_plan_change": "full_refresh"}, root=root)
    assert "refreshing it in full (on_plan_change='full_refresh')" in caplog.text
    assert "+  left join j1 ON `l__k` = `r__k`" in caplog.text
    assert report.run_id == 1 and report.changes_in == {"l": 2, "r": 2}  # replayed from the inputs' start
    assert sorted(delta_log.table(tables.result).to_pyarrow_table().select(["k", "v"]).to_pylist(),
                  key=lambda r: r["k"]) == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]

    # the state fits again: the next run continues from it
    write_deltalake(right, pa.table({"k": [1]}), mode="append")
    report = api.run_model(spark, name="pc", sql=left_join, inputs=inputs,
                           config={"on_plan_change": "full_refresh"}, root=root)
    assert report.run_id == 2 and report.changes_in == {"l": 0, "r": 1}


def test_on_plan_change_takes_rebuild_fail_or_full_refresh_and_rebuilds_by_default():
    from streamjoin.errors import ConfigError

    with pytest.raises(ConfigError, match="on_plan_change 'swap' is not one of rebuild, fail, full_refresh"):
        ModelConfig.from_dict({"on_plan_change": "swap"})
    assert ModelConfig.from_dict({}).on_plan_change == "rebuild"


def test_a_lookup_join_keeps_no_state_and_says_what_it_looks_up():
    probes = spec("clicks", {"order_id": "bigint"}, proc_time="pt", changelog_format="append")
    sql = "select c.order_id, p.price from clicks c join prices for system_time as of c.pt as p on c.order_id = p.product_id"
    text = describe(compile_sql("m", sql, {"clicks": probes, "prices": PRICES}, ModelConfig()))
    assert ("lookup operator: each run reads the dimension at the version the run reads to and consolidates only "
            "the rows whose product_id its probe rows look up") in text
    computed = sql.replace("on c.order_id = p.product_id", "on c.order_id = p.product_id + 1")
    assert "consolidates all of them (no ON key compares with a dimension column as declared)" in describe(
        compile_sql("m", computed, {"clicks": probes, "prices": PRICES}, ModelConfig()))
    assert "j1: keeps no state" in section(text, "retention")
    assert "clicks: changelog_format append; inserts only" in section(text, "inputs")
