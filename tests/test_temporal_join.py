"""Event-time temporal joins run by run: Flink's TemporalRowTimeJoinOperator semantics.

A probe row (orders) waits until the watermark passes its time, then joins the version of its
key valid at its time — the latest entry of the key at or before it, unless that entry is a
deletion — or is null-padded under LEFT JOIN. Every scenario is a conformance case (FORMAT.md)
run through the real pipeline; its runs state what each run must emit. Times are seconds
after 2024-01-01 00:00:00.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario import assert_ok, cases_pass, compile_error, input_specs, state_rows_per_run
from streamjoin.conformance import run_case
from streamjoin.spec import InputSpec
from streamjoin.storage import appended
from streamjoin.sql.compiler import compile_sql

CASES = sorted((Path(__file__).parent / "cases").glob("temporal-*.json"))


def t(seconds: int) -> str:
    return f"2024-01-01 00:{seconds // 60:02d}:{seconds % 60:02d}"


ORDERS = {"columns": [["id", "int"], ["cur", "string"], ["ts", "timestamp"]], "event_time": "ts"}
RATES = {"columns": [["cur", "string"], ["rate", "int"], ["ts", "timestamp"]], "unique_key": ["cur"], "event_time": "ts"}
LEFT = "SELECT o.id, o.cur, r.rate FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur"
INNER = LEFT.replace("LEFT JOIN", "JOIN")


def order(i: int, cur: str | None, s: int) -> list:
    return ["+I", [i, cur, t(s)]]


def rate(cur: str, value: int, s: int, kind: str = "+I") -> list:
    return [kind, [cur, value, t(s)]]


def case(name: str, sql: str, runs: list[tuple[dict, list]], **inputs: Any) -> dict:
    """Runs are (changes as {input: [changes]}, rows the run must emit)."""
    return {"name": name, "sql": sql, "inputs": {"orders": ORDERS, "rates": RATES, **inputs},
            "runs": [{"changes": changes, "expect_changelog": [["+I", r] for r in emitted]} for changes, emitted in runs]}


SCENARIOS = [
    case("waits-for-the-watermark-then-joins-the-version-valid-at-its-time", LEFT, [
        # W = min(orders 10, rates 5) = 5: order 1 (at 4) is due; the rate at 5 arrived after it in the run and
        # still counts, but is not valid at 4; order 2 (at 10) waits
        ({"orders": [order(1, "EUR", 4), order(2, "EUR", 10)], "rates": [rate("EUR", 100, 1), rate("EUR", 150, 5)]},
         [[1, "EUR", 100]]),
        # W = 12: order 2 joins the rate valid at 10 (the one at 5, not the one at 11)
        ({"orders": [order(3, "EUR", 20)], "rates": [rate("EUR", 200, 11), rate("EUR", 220, 12)]}, [[2, "EUR", 150]]),
    ]),
    case("a-version-at-exactly-the-probe-time-is-valid-and-a-later-entry-at-that-time-replaces-it", INNER, [
        ({"orders": [order(1, "EUR", 5)], "rates": [rate("EUR", 100, 5), rate("EUR", 110, 5)]}, [[1, "EUR", 110]]),
        ({"orders": [order(2, "EUR", 8), order(3, "EUR", 9)], "rates": [rate("EUR", 120, 8, "+U")]}, [[2, "EUR", 120]]),
    ]),
    case("a-deletion-holds-from-its-time-and-update-before-is-ignored", LEFT, [
        ({"orders": [order(1, "EUR", 3), order(2, "EUR", 6)],
          "rates": [rate("EUR", 100, 1), rate("EUR", 100, 1, "-U"), rate("EUR", 130, 4, "+U"), rate("EUR", 130, 4, "-D"),
                    rate("USD", 90, 6)]},
         [[1, "EUR", 100], [2, "EUR", None]]),
    ]),
    case("the-residual-is-checked-on-the-selected-version-not-used-to-select-an-older-one",
         LEFT + " AND r.rate > 100", [
             ({"orders": [order(1, "EUR", 5), order(2, "EUR", 2)], "rates": [rate("EUR", 150, 1), rate("EUR", 90, 3),
                                                                           rate("USD", 1, 5)]},
              [[1, "EUR", None], [2, "EUR", 150]]),
         ]),
    case("duplicates-join-each-null-keys-never-match-inner-drops-unmatched", INNER, [
        ({"orders": [order(1, "EUR", 3), order(1, "EUR", 3), order(2, None, 3), order(3, "GBP", 3)],
          "rates": [rate("EUR", 100, 1), rate("GBP", 70, 4)]},
         [[1, "EUR", 100], [1, "EUR", 100]]),
    ]),
    case("a-late-order-joins-only-what-state-holds", LEFT, [
        ({"orders": [order(1, "EUR", 10)], "rates": [rate("EUR", 100, 1), rate("EUR", 150, 5), rate("EUR", 170, 10)]},
         [[1, "EUR", 170]]),
        # order 2 at 7 arrives behind W = 10: state kept only the rate at 10 (the last at or before W), not the one
        # at 5 that a batch query would pick; order 3 at 12 is valid against the rate at 10
        ({"orders": [order(2, "EUR", 7), order(3, "EUR", 12)], "rates": [rate("EUR", 190, 12)]},
         [[2, "EUR", None], [3, "EUR", 190]]),
    ]),
    {**case("allowed-lateness-keeps-the-versions-a-late-order-within-it-can-select", LEFT, [
        ({"orders": [order(1, "EUR", 10)], "rates": [rate("EUR", 100, 1), rate("EUR", 150, 5), rate("EUR", 170, 10)]},
         [[1, "EUR", 170]]),
        ({"orders": [order(2, "EUR", 7), order(3, "EUR", 12)], "rates": [rate("EUR", 190, 12)]},
         [[2, "EUR", 150], [3, "EUR", 190]]),
    ]), "config": {"allowed_lateness": "5 seconds"}},
    # the probe side is a changelog, as Flink's own tests feed it: a retracted order retracts what it
    # joined, when the watermark passes its time, against the versions state holds (those valid at it)
    {"name": "an-updated-or-deleted-order-retracts-the-row-it-joined", "sql": LEFT,
     "inputs": {"orders": ORDERS, "rates": RATES}, "runs": [
        # W = 3: order 1 (at 3) joins the rate valid at 3
        {"changes": {"orders": [order(1, "EUR", 3)], "rates": [rate("EUR", 100, 1), rate("EUR", 120, 5)]},
         "expect_changelog": [["+I", [1, "EUR", 100]]]},
        # W = 6: its update retracts that row (the -U is at 3, behind W: joined at once) and the new row, at 6,
        # joins the rate at 5; order 2, inserted and deleted before the watermark passed it, never shows
        {"changes": {"orders": [["-U", [1, "EUR", t(3)]], ["+U", [1, "EUR", t(6)]], order(2, "USD", 6),
                                ["-D", [2, "USD", t(6)]]], "rates": [rate("EUR", 130, 8)]},
         "expect_changelog": [["-U", [1, "EUR", 100]], ["+U", [1, "EUR", 120]]]},
        # W = 20: its deletion retracts the row of the update; order 3 joins the rate valid at 20
        {"changes": {"orders": [["-D", [1, "EUR", t(6)]], order(3, "EUR", 20)], "rates": [rate("EUR", 140, 20)]},
         "expect_changelog": [["-D", [1, "EUR", 120]], ["+I", [3, "EUR", 140]]], "expect_result": [[3, "EUR", 140]]},
    ]},
    # an update whose -U does not repeat the row as inserted (another time) retracts a row never emitted: the run
    # stops, naming why, and changes nothing (Flink would emit that retraction to its sink)
    {"name": "an-order-retraction-that-is-not-the-inserted-row-stops-the-run", "sql": LEFT,
     "inputs": {"orders": ORDERS, "rates": RATES}, "runs": [
        {"changes": {"orders": [order(1, "EUR", 3)], "rates": [rate("EUR", 100, 1), rate("EUR", 120, 5)]},
         "expect_changelog": [["+I", [1, "EUR", 100]]]},
        {"changes": {"orders": [["-U", [1, "EUR", t(6)]], ["+U", [1, "EUR", t(9)]]], "rates": [rate("EUR", 130, 8)]},
         "expect_error": "its -U/-D must repeat the row as inserted"},
    ]},
    # a deletion waits for the watermark as its insertion does, and the two are emitted together and cancel; a
    # deletion of an order never inserted that waits has no insertion to cancel: the run that reads it stops
    {"name": "a-deletion-of-an-order-never-inserted-stops-the-run-that-reads-it", "sql": INNER,
     "inputs": {"orders": ORDERS, "rates": RATES}, "runs": [
        {"changes": {"orders": [order(2, "EUR", 8)], "rates": [rate("EUR", 100, 1)]}, "expect_changelog": []},
        {"changes": {"orders": [["-D", [2, "EUR", t(8)]]], "rates": [rate("EUR", 120, 5)]}, "expect_changelog": []},
        {"changes": {"orders": [["-D", [1, "EUR", t(6)]]]},
         "expect_error": "input 'orders': the temporal join j1 holds the probe row "
                         '{"id":1,"cur":"EUR","ts":"2024-01-01T00:00:06.000Z"} until the watermark passes its time, '
                         "and this run retracts it 1 time(s) more than it was inserted"},
    ]},
    # under on_missing_retraction='ignore' the run that reads it drops it, and drops a second deletion of an order
    # inserted once, whose first deletion then cancels the insertion it takes; a deletion of an order never inserted
    # that the watermark passes in the run that reads it is emitted, as Flink emits it, and the result drops it
    {"name": "a-deletion-of-an-order-never-inserted-is-dropped-under-ignore", "sql": INNER,
     "inputs": {"orders": ORDERS, "rates": RATES}, "config": {"on_missing_retraction": "ignore"}, "runs": [
        {"changes": {"orders": [order(2, "EUR", 8)], "rates": [rate("EUR", 100, 1)]}, "expect_changelog": []},
        {"changes": {"orders": [["-D", [1, "EUR", t(6)]], ["-D", [2, "EUR", t(8)]], ["-D", [2, "EUR", t(8)]]],
                     "rates": [rate("EUR", 120, 5)]}, "expect_changelog": []},
        {"changes": {"orders": [order(3, "EUR", 20), ["-D", [7, "EUR", t(6)]]], "rates": [rate("EUR", 130, 20)]},
         "expect_changelog": [["+I", [3, "EUR", 130]], ["-D", [7, "EUR", 120]]], "expect_result": [[3, "EUR", 130]]},
    ]},
    # the same below a lookup join, whose output of a run with only insertions would not have held it
    {"name": "a-deletion-never-inserted-stops-the-run-that-reads-it-below-a-lookup-join-too",
     "sql": "SELECT o.id, r.rate, c.name FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur "
            "JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.id = c.id",
     "inputs": {"orders": {**ORDERS, "proc_time": "pt"}, "rates": RATES,
                "customers": {"columns": [["id", "int"], ["name", "string"]]}}, "runs": [
        {"changes": {"orders": [order(3, "EUR", 6)], "rates": [rate("EUR", 100, 1)], "customers": [["+I", [1, "a"]]]},
         "expect_changelog": []},
        # the deletion of order 3 takes its insertion, which waits too (though each carries its own run's time)
        {"changes": {"orders": [["-D", [3, "EUR", t(6)]], ["-D", [1, "EUR", t(6)]]]},
         "expect_error": 'the temporal join j1 holds the probe row {"id":1,"cur":"EUR","ts":"2024-01-01T00:00:06.000Z"} '
                         "until the watermark"},
    ]},
]


def test_scenarios(spark):
    cases_pass(spark, SCENARIOS, CASES)


def test_a_rate_that_changes_every_second_gives_each_order_the_rate_of_its_second(spark):
    """Many versions of a key in each run, and orders at the very times of versions: each order joins
    the version of its own second (a version is valid from its time on); USD's rate is deleted at
    second 50 and set again at 70, so its orders of seconds 50-69 are null-padded."""
    seconds = {0: range(0, 120), 1: range(120, 240)}
    deleted = range(50, 70)

    def changes(run: int) -> dict:
        rates = [rate(cur, s, s) for s in seconds[run] for cur in ("EUR", "USD") if not (cur == "USD" and s in deleted)]
        if run == 0:
            rates.append(rate("USD", 49, 50, "-D"))
        orders = [order(2 * s + (cur == "USD"), cur, s) for s in seconds[run] for cur in ("EUR", "USD")]
        return {"rates": rates, "orders": orders}

    def emitted(run: int) -> list:
        return [["+I", [2 * s + (cur == "USD"), cur, None if cur == "USD" and s in deleted else s]]
                for s in seconds[run] for cur in ("EUR", "USD")]

    # each run's watermark is its last second (both inputs reach it), so every order of the run is due
    outcome = run_case(spark, {"name": "ticking-rates", "sql": LEFT, "inputs": {"orders": ORDERS, "rates": RATES},
                               "runs": [{"changes": changes(r), "expect_changelog": emitted(r)} for r in seconds]})
    assert_ok(outcome)


# -- compile time ----------------------------------------------------------------------------------
def _specs(**overrides: dict) -> dict[str, InputSpec]:
    return input_specs({"orders": ORDERS, "rates": RATES, **overrides})


def test_explain_names_the_temporal_join():
    plan = compile_sql("m", LEFT + " WHERE o.id > 0", _specs())
    text = plan.explain()
    assert "left event-time temporal join j1" in text and "FOR SYSTEM_TIME AS OF o__ts (versions by r__ts)" in text
    assert "scan orders AS o WHERE `o__id` > 0" in text


def test_a_cte_passing_the_versions_through_is_the_versioned_input():
    """dbt's import CTE (and Flink's `CREATE VIEW v AS SELECT * FROM versioned`) joins as the input itself;
    a CTE that computes or filters is no versioned table (a filter there would pick another version)."""
    via = "WITH o AS (SELECT * FROM orders), rates_v AS (SELECT * FROM rates) " + LEFT.replace(
        "FROM orders o LEFT JOIN rates", "FROM o LEFT JOIN rates_v")
    assert compile_sql("m", via, _specs()).explain() == compile_sql("m", LEFT, _specs()).explain()
    filtered = "WITH rates_v AS (SELECT * FROM rates WHERE rate > 0) " + LEFT.replace("JOIN rates", "JOIN rates_v")
    assert "the common table expression 'rates_v' is not one: make it SELECT * FROM the input" in compile_error(
        "m", filtered, {"orders": ORDERS, "rates": RATES})


CHAINED = ("SELECT o.id, r.rate, x.rate AS xr FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r "
           "ON o.cur = r.cur JOIN rates FOR SYSTEM_TIME AS OF o.ts AS x ON o.cur = x.cur")


def test_a_temporal_join_may_probe_with_the_rows_of_another():
    text = compile_sql("m", CHAINED, _specs()).explain()
    assert "event-time temporal join j2 ON `o__cur` = `x__cur` FOR SYSTEM_TIME AS OF o__ts (versions by x__ts)" in text
    assert "left event-time temporal join j1 ON `o__cur` = `r__cur` FOR SYSTEM_TIME AS OF o__ts" in text


def test_conditions_on_the_versions_are_checked_on_the_selected_version():
    plan = compile_sql("m", INNER + " AND r.rate > 1 WHERE r.rate < 5", _specs())
    assert plan.root.right.filters == ()
    assert plan.root.residual == "(`r__rate` > 1) AND (`r__rate` < 5)"


@pytest.mark.parametrize("sql, inputs, config, message", [
    (LEFT.replace("LEFT JOIN", "RIGHT JOIN"), {}, {}, "a RIGHT temporal join is not supported"),
    (LEFT.replace("LEFT JOIN", "FULL JOIN"), {}, {}, "a FULL temporal join is not supported"),
    (LEFT, {"rates": {**RATES, "unique_key": []}}, {}, "the versioned input 'rates' declares no unique_key"),
    (LEFT, {"rates": {k: v for k, v in RATES.items() if k != "event_time"}}, {}, "declares no event_time"),
    (LEFT, {"orders": {**ORDERS, "changelog_format": "upsert", "unique_key": ["id"]}}, {},
     "has changelog_format 'upsert', whose updates carry no row they replace"),
    (LEFT.replace("o.cur = r.cur", "o.id = r.rate"), {}, {}, "unique_key column(s) cur are not equated"),
    (LEFT.replace("o.cur = r.cur", "o.cur <> r.cur"), {}, {}, "no equality between the two sides"),
    (LEFT.replace("o.cur = r.cur", "o.cur = r.cur AND o.id <=> r.rate"), {}, {},
     "a null-safe key (<=> / IS NOT DISTINCT FROM) on r__rate, outside the versioned input's unique_key"),
    (LEFT.replace("AS OF o.ts", "AS OF o.id"), {}, {}, "must name the probe's event time o.ts"),
    (LEFT.replace("AS OF o.ts", "AS OF o.ts + INTERVAL '1' SECOND"), {}, {},
     "must name the probe's event time o.ts, not o.ts + INTERVAL '1' SECOND"),
    # Flink: "Currently the join key in Temporal Table Join can not be empty" (it was a regular join here)
    ("SELECT o.id, r.rate FROM orders o, rates FOR SYSTEM_TIME AS OF o.ts AS r WHERE o.cur = r.cur", {}, {},
     "FOR SYSTEM_TIME AS OF on rates after a comma: a comma join has no ON condition"),
    (CHAINED.replace("AS OF o.ts AS x", "AS OF r.ts AS x"), {}, {},
     "FOR SYSTEM_TIME AS OF after the temporal join j1 must name the time its probe side joined by (o.ts)"),
    ("SELECT o.id FROM rates FOR SYSTEM_TIME AS OF o.ts AS r JOIN orders o ON o.cur = r.cur", {}, {},
     "the versioned input of a temporal join is the right side of a JOIN"),
    (LEFT.replace("FOR SYSTEM_TIME AS OF o.ts", "VERSION AS OF 3"), {}, {}, "is not supported"),
    (LEFT, {}, {"join_strategy": "multi"}, "join_strategy 'multi' cannot include an event-time temporal join"),
])
def test_unsupported_variants_fail_at_compile_time(sql, inputs, config, message):
    error = compile_error("rates_model", sql, {"orders": ORDERS, "rates": RATES, **inputs}, config)
    assert message in error and "model 'rates_model'" in error


# -- property: the batch equivalent -----------------------------------------------------------------
def batch_equivalent(runs: list[dict], residual=lambda order, version: True, left: bool = True) -> list[list[tuple]]:
    """After each run, the rule over the inputs' snapshots: every order at or behind the watermark
    joins the last entry of its key at or before its time (a later entry at the same key and time
    replacing an earlier one; -U ignored), unless that entry is a deletion. An order's copies are
    counted per run; a run that deletes more copies than there are leaves none (as under
    on_missing_retraction='ignore'; under 'fail' the runs delete only copies there are)."""
    copies: Counter[tuple] = Counter()
    entries: dict[tuple[str, int], tuple[str, list]] = {}
    top = {"orders": None, "rates": None}
    w = None
    out = []
    for run in runs:
        for kind, row in run["changes"].get("rates", []):
            top["rates"] = max(filter(None, [top["rates"], row[2]]))
            if kind != "-U" and row[0] is not None:
                entries[(row[0], row[2])] = (kind, row)
        net: Counter[tuple] = Counter()
        for kind, row in run["changes"].get("orders", []):
            top["orders"] = max(filter(None, [top["orders"], row[2]]))
            net[tuple(row)] += 1 if kind in ("+I", "+U") else -1
        for row, n in net.items():
            copies[row] = max(0, copies[row] + n)
        orders = [list(row) for row, n in copies.items() for _ in range(n)]
        if all(top.values()):
            w = max(filter(None, [w, min(top.values())]))
        result = []
        for o in orders:
            if w is None or o[2] > w:
                continue
            times = [ts for (cur, ts) in entries if cur == o[1] and ts <= o[2]]
            kind, version = entries[(o[1], max(times))] if times else (None, None)
            if version is not None and kind != "-D" and residual(o, version):
                result.append((o[0], o[1], version[1]))
            elif left:
                result.append((o[0], o[1], None))
        out.append(sorted(result, key=repr))
    return out


@st.composite
def on_time_changelogs(draw, ghosts: bool = False) -> list[dict]:
    """Runs of orders and rate entries, every row after the watermark when it arrives (a late row
    meets only what state holds, so it has no batch equivalent): duplicates, NULL keys, ties,
    updates (-U/+U) and deletions of versions, deletions of orders still waiting, random run
    boundaries; with `ghosts`, also deletions of orders never inserted or already all deleted."""
    runs, rates, next_id = [], [], 1
    waiting: Counter[tuple] = Counter()  # the orders' copies inserted and not deleted
    top: dict[str, int] = {}
    for _ in range(draw(st.integers(2, 3))):
        floor = min(top.values()) + 1 if len(top) == 2 else 1  # one past the watermark
        changes: dict[str, list] = {"orders": [], "rates": []}
        for _ in range(draw(st.integers(0, 4))):
            ts = floor + draw(st.integers(0, 4))
            movable = [r for r in rates if r[1] >= floor]
            if movable and draw(st.booleans()):
                cur, ts_old, value = draw(st.sampled_from(movable))
                if draw(st.booleans()):
                    changes["rates"].append(["-D", [cur, value, t(ts_old)]])
                else:
                    new = (cur, ts, draw(st.integers(0, 3)))
                    changes["rates"] += [["-U", [cur, value, t(ts_old)]], ["+U", [cur, new[2], t(ts)]]]
                    rates.append(new)
            else:
                new = (draw(st.sampled_from(["EUR", "USD"])), ts, draw(st.integers(0, 3)))
                changes["rates"].append(["+I", [new[0], new[2], t(ts)]])
                rates.append(new)
        for _ in range(draw(st.integers(0, 4))):
            row = [next_id, draw(st.sampled_from(["EUR", "USD", None])), t(floor + draw(st.integers(0, 4)))]
            next_id += draw(st.sampled_from([0, 1]))  # 0: a duplicate of the row before
            changes["orders"].append(["+I", row])
            waiting[tuple(row)] += 1
        # a ghost that waits finds no insertion to take; one the watermark passes in this run retracts a row the
        # result does not hold
        for _ in range(draw(st.integers(0, 2))):
            deletable = sorted((r for r, n in waiting.items() if n > 0 and seconds(r[2]) >= floor), key=repr)
            ghostly = sorted((r for r in waiting if seconds(r[2]) >= floor), key=repr)
            if deletable and draw(st.booleans()):
                row = draw(st.sampled_from(deletable))
            elif ghosts:
                row = draw(st.sampled_from([(99, "EUR", t(floor + draw(st.integers(0, 4)))), *ghostly]))
            else:
                continue
            waiting[row] = max(0, waiting[row] - 1)
            changes["orders"].append(["-D", list(row)])
        for name, rows in changes.items():
            if rows:
                top[name] = max([top.get(name, 0)] + [seconds(r[2]) for _, r in rows])
        runs.append({"changes": {k: v for k, v in changes.items() if v}})
    return runs


def seconds(text: str) -> int:
    """The inverse of `t`."""
    return int(text[-2:]) + 60 * int(text[-5:-3])


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=on_time_changelogs(), left=st.booleans())
def test_results_equal_the_batch_equivalent(spark, runs, left):
    check_batch_equivalent(spark, runs, left, {})


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=on_time_changelogs(ghosts=True), left=st.booleans())
def test_deletions_of_orders_never_inserted_are_dropped_under_ignore(spark, runs, left):
    check_batch_equivalent(spark, runs, left, {"on_missing_retraction": "ignore"})


def check_batch_equivalent(spark, runs: list[dict], left: bool, config: dict) -> None:
    sql = (LEFT if left else INNER) + " AND r.rate > 0"
    c = {"name": "temporal-property", "sql": sql, "inputs": {"orders": ORDERS, "rates": RATES}, "runs": runs,
         "config": config}
    outcome = run_case(spark, c)
    assert_ok(outcome)
    want = batch_equivalent(runs, residual=lambda o, v: v[1] > 0, left=left)
    for i, (run, expected) in enumerate(zip(outcome["runs"], want)):
        got = sorted((tuple(r) for r in run["result"]), key=repr)
        assert got == expected, f"run {i}: {got} != batch equivalent {expected}\nruns: {json.dumps(runs)}"


# -- bounded state ----------------------------------------------------------------------------------
def test_state_stays_bounded_by_the_versions_inside_the_watermark_horizon(spark, tmp_path, monkeypatch):
    """Two keys gain a version every run and the watermark passes it: each key keeps the last version
    at or before the watermark; the versions table holds that plus the runs appended since it was last
    rewritten, however many runs pass."""
    monkeypatch.setattr(appended, "COMPACT_AT", 2)
    runs = [{"changes": {"rates": [rate("EUR", i, 10 * i), rate("USD", i, 10 * i)], "orders": [order(i, "EUR", 10 * i + 5)]}}
            for i in range(1, 7)]
    sizes, runner = state_rows_per_run(spark, {"name": "bounded", "sql": LEFT, "inputs": {"orders": ORDERS, "rates": RATES},
                                               "runs": runs}, str(tmp_path), "j1_versions")
    assert min(sizes[2:]) == 2, sizes  # rewritten: one version per key
    assert max(sizes) <= 2 * 3, sizes  # never more than two runs of appends on top
    result = set(runner.result())
    assert result == {(i, "EUR", i) for i in range(1, 6)}, result
