"""`<model>__batch` for the time-based joins, lookup joins and ASOF joins: the model's own SQL over
its inputs, decided as of the last run, equals the result after every run when every row arrives
ahead of the watermark.

A temporal join's batch joins each probe row behind the watermark with the version valid at its
time; a lookup join's batch joins each probe row with the dimension as the run that read it left it;
a window join's batch keeps the windows that fired; an ASOF join's batch picks each left row's
nearest right row in a LATERAL subquery. The runs are random (hypothesis), so probes wait, keys
gain, replace and delete versions, windows stay open across run boundaries, and ASOF inputs update
and delete rows.
"""
from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.api import publish, run_model
from streamjoin.conformance import CaseRunner
from streamjoin.runtime.run import run_once
import test_asof_join as asof_cases
import test_interval_cascade as interval_cascades
import test_lookup_join as lookup_cases
from test_temporal_join import INNER, LEFT, ORDERS, RATES, on_time_changelogs
from test_temporal_join import SCENARIOS as TEMPORAL_SCENARIOS
from test_flink_agreement import CHAINED, chained_case
from test_temporal_join import t as at_second
from test_window_join import S, WINDOWS, L, R, append_only_runs, cascade_sql, property_sql, random_on_time_case


def rows(spark, relation: str) -> Counter:
    return Counter(tuple(r) for r in spark.table(relation).collect())


def published_runs(spark, case: dict, relation: str) -> Iterator[tuple[Counter, Counter, Counter]]:
    """Run the case run by run, publishing the model's views after each: (result, __batch, __batch_on_time)."""
    with tempfile.TemporaryDirectory(prefix="streamjoin-views-") as root:
        runner = CaseRunner(spark, case, root)
        for i, run in enumerate(case["runs"]):
            runner.append_changes(i, run.get("changes", {}))
            run_once(spark, runner.plan, runner.tables)
            publish(spark, plan=runner.plan, tables=runner.tables, relation=relation, sql=case["sql"],
                    relations={name: name for name in case["inputs"]})
            yield rows(spark, relation), rows(spark, f"{relation}__batch"), rows(spark, f"{relation}__batch_on_time")


def assert_views_match(spark, case: dict, relation: str) -> None:
    for i, (result, batch, on_time) in enumerate(published_runs(spark, case, relation)):
        assert result == batch == on_time, (f"run {i}: result {sorted(result.elements(), key=repr)} != batch "
                                            f"{sorted(batch.elements(), key=repr)}\ncase: {json.dumps(case)}")


def test_a_temporal_batch_joins_the_probes_behind_the_watermark_with_the_version_valid_at_their_time(spark):
    rate = lambda cur, value, s, kind="+I": [kind, [cur, value, at_second(s)]]  # noqa: E731
    order = lambda i, cur, s: ["+I", [i, cur, at_second(s)]]  # noqa: E731
    case = {"name": "temporal-views", "sql": LEFT, "inputs": {"orders": ORDERS, "rates": RATES}, "runs": [
        # W = 5: order 1 (at 4) joins the rate valid at 4; order 2 (at 10) waits, so the batch leaves it out
        {"changes": {"orders": [order(1, "EUR", 4), order(2, "EUR", 10)],
                     "rates": [rate("EUR", 100, 1), rate("EUR", 150, 5)]}},
        # W = 20: order 2 joins the rate valid at 10 (150), not the latest (220) nor the deletion at 11; order 3
        # (at 20) finds no USD rate valid at 20 (the one at 30 is later): null-padded
        {"changes": {"orders": [order(3, "USD", 20)],
                     "rates": [rate("EUR", 200, 11, "-D"), rate("EUR", 220, 12), rate("USD", 1, 30)]}},
    ]}
    views = list(published_runs(spark, case, "default.temporal_views"))
    assert [sorted(v[0]) for v in views] == [[(1, "EUR", 100)], [(1, "EUR", 100), (2, "EUR", 150), (3, "USD", None)]]
    assert all(result == batch == on_time for result, batch, on_time in views)


def test_a_temporal_batch_reads_a_change_data_feed_as_the_model_read_it(spark, tmp_path):
    """A `cdf` versioned input: the first run reads the table as it is, later runs its change data
    feed (updates as pre/post images, deletes); the versions in the batch are those."""
    schema = pa.schema([("cur", pa.string()), ("rate", pa.int32()), ("ts", pa.timestamp("us", tz="UTC"))])
    rates, orders = str(tmp_path / "rates"), str(tmp_path / "orders")
    when = lambda s: datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=s)  # noqa: E731

    def append(path: str, table: pa.Table) -> None:
        write_deltalake(path, table, mode="append", configuration={"delta.enableChangeDataFeed": "true"})

    def order(*rows: tuple[int, str, int]) -> None:
        append(orders, pa.table({"id": pa.array([r[0] for r in rows], pa.int32()), "cur": [r[1] for r in rows],
                                 "ts": pa.array([when(r[2]) for r in rows], pa.timestamp("us", tz="UTC"))}))

    def rate(*rows: tuple[str, int, int]) -> None:
        append(rates, pa.Table.from_pylist([{"cur": c, "rate": v, "ts": when(s)} for c, v, s in rows], schema=schema))

    rate(("EUR", 100, 1), ("USD", 1, 1), ("GBP", 5, 100))
    DeltaTable(rates).update(updates={"rate": "120", "ts": "ts + INTERVAL 9 SECONDS"}, predicate="cur = 'EUR'")
    order((1, "EUR", 2), (2, "EUR", 50))
    inputs = {"orders": {"location": orders, **ORDERS, "changelog_format": "append"},
              "rates": {"location": rates, **RATES, "changelog_format": "cdf"}}
    sql = LEFT.replace("FROM orders", "FROM default.cdf_orders").replace("JOIN rates", "JOIN default.cdf_rates")
    inputs["orders"]["relation"], inputs["rates"]["relation"] = "default.cdf_orders", "default.cdf_rates"

    def run() -> list[tuple]:
        run_model(spark, name="cdf_rates", sql=sql, inputs=inputs, config={}, root=str(tmp_path / "models"),
                  relation="default.cdf_temporal")
        result = rows(spark, "default.cdf_temporal")
        assert result == rows(spark, "default.cdf_temporal__batch")
        return sorted(result.elements())

    # the first run reads EUR as 120 from 10 on: order 1 (at 2) finds no version, though the table once held one
    assert run() == [(1, "EUR", None), (2, "EUR", 120)]
    DeltaTable(rates).update(updates={"rate": "130", "ts": "ts + INTERVAL 50 SECONDS"}, predicate="cur = 'EUR'")
    DeltaTable(rates).delete("cur = 'USD'")  # deletes the USD version from 1 on
    rate(("GBP", 6, 200))
    order((3, "EUR", 70), (4, "USD", 65), (5, "EUR", 30))
    # order 5 (at 30) joins the version valid then (120, replaced at 60); order 4 finds USD deleted
    assert run() == [(1, "EUR", None), (2, "EUR", 120), (3, "EUR", 130), (4, "USD", None), (5, "EUR", 120)]


def test_two_inputs_with_the_same_columns_each_read_their_own_rows(spark):
    """Spark resolves a table once per query whatever its options: the two inputs' reads must not share one."""
    same = {"columns": [["k", "int"], ["w", "int"]]}
    case = {"name": "same-columns", "sql": "SELECT a.k, a.w, b.w AS bw FROM a JOIN b ON a.k = b.k",
            "inputs": {"a": same, "b": same},
            "runs": [{"changes": {"a": [["+I", [1, 10]], ["+I", [2, 20]]], "b": [["+I", [1, 100]], ["+I", [2, 200]]]}}]}
    [(result, batch, on_time)] = published_runs(spark, case, "default.same_columns")
    assert sorted(batch.elements()) == [(1, 10, 100), (2, 20, 200)] and result == batch == on_time


def test_a_temporal_batch_over_a_changelog_probe_side_joins_the_probes_it_holds_now(spark):
    """Orders updated and deleted after they joined: the batch joins the orders as they are now."""
    case = next(c for c in TEMPORAL_SCENARIOS if c["name"] == "an-updated-or-deleted-order-retracts-the-row-it-joined")
    views = list(published_runs(spark, {**case, "runs": [{"changes": r["changes"]} for r in case["runs"]]},
                                "default.temporal_changelog_probe"))
    assert [sorted(result) for result, _, _ in views] == [[(1, "EUR", 100)], [(1, "EUR", 120)], [(3, "EUR", 140)]]
    assert all(result == batch == on_time for result, batch, on_time in views)


def test_chained_temporal_joins_batch_the_probes_behind_the_last_watermark(spark):
    """A temporal join probing with another's rows: the batch keeps the probes its own watermark passed."""
    rng = random.Random(5)
    for i in range(2):
        case = chained_case("chained-views", CHAINED[i], rng)
        assert_views_match(spark, {**case, "runs": case["runs"][:-1]}, "default.chained_views")


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=on_time_changelogs(), left=st.booleans())
def test_temporal_join_results_equal_their_batch_views(spark, runs, left):
    sql = (LEFT if left else INNER) + " AND r.rate > 0"
    assert_views_match(spark, {"name": "temporal-views-property", "sql": sql,
                               "inputs": {"orders": ORDERS, "rates": RATES}, "runs": runs}, "default.temporal_views_p")


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=lookup_cases.changelogs(), left=st.booleans(), with_time=st.booleans())
def test_lookup_join_results_equal_their_batch_views(spark, runs, left, with_time):
    """Each probe row joins the dimension as the run that read it left it, and carries that run's time."""
    sql = (lookup_cases.LEFT if left else lookup_cases.INNER) + " AND c.name <> 'c'"
    if with_time:
        sql = sql.replace("SELECT o.id,", "SELECT o.id, o.pt,")
    assert_views_match(spark, {"name": "lookup-views-property", "sql": sql, "runs": runs,
                               "inputs": {"orders": lookup_cases.ORDERS, "customers": lookup_cases.CUSTOMERS}},
                       "default.lookup_views_p")


NOTES = {"columns": [["id", "int"], ["note", "string"]], "changelog_format": "append"}
AFTER_A_JOIN = ("SELECT o.id, s.note, c.name FROM orders o JOIN notes s ON o.id = s.id "
                "{kind} customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.id")


def test_a_lookup_after_a_join_looks_up_in_its_batch_as_of_the_run_the_join_emitted_the_row(spark):
    """Order 10 is read in run 1, its note in run 3: the join emits the row in run 3, which looks up
    customer 1 as run 3 leaves it ('b'), not as run 1 did ('a')."""
    ins = lookup_cases.ins
    case = {"name": "lookup-after-join-views", "sql": AFTER_A_JOIN.format(kind="LEFT JOIN"),
            "inputs": {"orders": lookup_cases.ORDERS, "customers": lookup_cases.CUSTOMERS, "notes": NOTES}, "runs": [
                {"changes": {"orders": [ins(10, 1), ins(11, 1)], "customers": [ins(1, "a")], "notes": [ins(11, "m")]}},
                {"changes": {"customers": [["-D", [1, "a"]], ins(1, "b")]}},
                {"changes": {"notes": [ins(10, "n")]}},
            ]}
    views = list(published_runs(spark, case, "default.lookup_after_join_views"))
    assert sorted(views[-1][0]) == [(10, "n", "b"), (11, "m", "a")]
    assert all(result == batch == on_time for result, batch, on_time in views)


@st.composite
def probes_and_notes(draw) -> list[dict]:
    """Lookup runs (`lookup_cases.changelogs`) whose orders meet notes that arrive in any run."""
    runs = draw(lookup_cases.changelogs())
    for run in runs:
        notes = [lookup_cases.ins(draw(st.integers(0, 3)), draw(st.sampled_from("mn"))) for _ in range(draw(st.integers(0, 3)))]
        if notes:
            run["changes"]["notes"] = notes
    return runs


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=probes_and_notes(), left=st.booleans())
def test_lookup_after_a_join_results_equal_their_batch_views(spark, runs, left):
    """Orders and notes join when the later of the two arrives; the dimension changes in between."""
    assert_views_match(spark, {"name": "lookup-after-join-views-property",
                               "sql": AFTER_A_JOIN.format(kind="LEFT JOIN" if left else "JOIN"), "runs": runs,
                               "inputs": {"orders": lookup_cases.ORDERS, "customers": lookup_cases.CUSTOMERS,
                                          "notes": NOTES}},
                       "default.lookup_after_join_views_p")


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=append_only_runs(late=False), kind=st.sampled_from(sorted(WINDOWS)),
       join=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL", "SEMI", "ANTI"]))
def test_window_join_results_equal_their_batch_views(spark, runs, kind, join):
    assert_views_match(spark, {"name": "window-views-property", "sql": property_sql(kind, join),
                               "inputs": {"l": L, "r": R}, "runs": runs}, "default.window_views_p")


def test_cascaded_window_join_results_equal_their_batch_views(spark):
    """The batch keeps, on all three inputs, the windows the last join fired (the first fires them sooner)."""
    rng = random.Random(7)
    for i, sql in enumerate([cascade_sql("HOP", "LEFT", "LEFT", "L"), cascade_sql("TUMBLE", "RIGHT", "FULL", "R")]):
        case, _ = random_on_time_case(f"window-cascade-views-{i}", sql, rng, {"l": L, "r": R, "s": S})
        case["inputs"]["s"] = {**S, "watermark_delay": "3 seconds"}  # the last join fires later than the first
        assert_views_match(spark, case, "default.window_cascade_views")


def test_a_temporal_join_of_interval_join_rows_equals_its_batch_views(spark):
    """The batch keeps the probes whose time (an interval join's l.ts, or r.ts) the temporal join's watermark
    passed."""
    rng = random.Random(11)
    by_l = interval_cascades.PROBING_QUERIES[0]
    by_r = by_l.replace("AS OF l.ts ON l.k", "AS OF r.ts ON r.k")
    for i, sql in enumerate([by_l, by_r]):
        inputs = interval_cascades.PROBING_INPUTS
        case = interval_cascades.random_on_time_case(f"interval-temporal-views-{i}", sql, rng, inputs)
        assert_views_match(spark, case, "default.interval_temporal_views")


def test_a_window_batch_in_spark_form_keeps_the_windows_that_fired(spark):
    left = lambda k, v, s: ["+I", [k, v, at_second(s)]]  # noqa: E731
    sql = ("SELECT L.k, L.v, R.w, L.win.start AS ws FROM (SELECT k, v, window(ts, '5 seconds') AS win FROM l) L "
           "LEFT JOIN (SELECT k, w, window(ts, '5 seconds') AS win FROM r WHERE w > 0) R ON L.k = R.k AND L.win = R.win")
    case = {"name": "window-views-spark", "sql": sql, "inputs": {"l": L, "r": R}, "runs": [
        # W = 3: no window fired, the batch is empty
        {"changes": {"l": [left(1, 1, 1), left(2, 2, 3)], "r": [left(1, 10, 3)]}},
        # W = 7: [0, 5) fired; [5, 10) is open
        {"changes": {"l": [left(1, 3, 7)], "r": [left(1, 11, 8)]}},
    ]}
    views = list(published_runs(spark, case, "default.window_views_spark"))
    assert [sum(v[0].values()) for v in views] == [0, 2]
    assert all(result == batch == on_time for result, batch, on_time in views)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=asof_cases.changelogs(), op=st.sampled_from([">=", ">", "<=", "<"]), left=st.booleans(),
       duckdb=st.booleans())
def test_asof_join_results_equal_their_batch_views(spark, runs, op, left, duckdb):
    outer = "LEFT " if left else ""
    sql = (f"SELECT t.id, t.sym, q.px FROM trades t ASOF {outer}JOIN quotes q ON t.sym = q.sym AND t.ts {op} q.ts"
           if duckdb else  # DuckDB's spelling, and Snowflake's
           f"SELECT t.id, t.sym, q.px FROM trades t {outer}ASOF JOIN quotes q MATCH_CONDITION(t.ts {op} q.ts) ON t.sym = q.sym")
    assert_views_match(spark, {"name": "asof-views-property", "sql": sql,
                               "inputs": {"trades": asof_cases.TRADES, "quotes": asof_cases.QUOTES}, "runs": runs},
                       "default.asof_views_p")


def test_an_asof_batch_filters_the_right_input_before_choosing_and_the_result_after(spark):
    quote = asof_cases.quote
    sql = ("SELECT t.id, q.px FROM trades t LEFT ASOF JOIN quotes q MATCH_CONDITION(t.ts >= q.ts) "
           "ON t.sym = q.sym AND q.px < 100 WHERE t.id < 3")
    case = {"name": "asof-views", "sql": sql, "inputs": {"trades": asof_cases.TRADES, "quotes": asof_cases.QUOTES},
            "runs": [{"changes": {"trades": [asof_cases.trade(1, "A", 5), asof_cases.trade(3, "A", 5)],
                                  "quotes": [quote("A", 10, 2), quote("A", 500, 4)]}},
                     {"changes": {"quotes": [quote("A", 20, 3)], "trades": [asof_cases.trade(2, "B", 1)]}}]}
    views = list(published_runs(spark, case, "default.asof_views"))
    # the quote at 4 fails q.px < 100, so trade 1 takes the one at 2, then the one at 3; trade 3 fails WHERE
    assert [sorted(v[0]) for v in views] == [[(1, 10)], [(1, 20), (2, None)]]
    assert all(result == batch == on_time for result, batch, on_time in views)
