"""Interval joins run by run: when pairs and null-padded rows are emitted, late rows, lateness,
bounds, NULL keys, append-only inputs, the persisted clock and bounded state.

Every scenario is a conformance case (FORMAT.md) run through the real pipeline; its runs
state what each run must emit. Times are 2021-12-25 HH:MM[:SS] unless written out.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamjoin.storage import delta_log
from streamjoin.conformance import CaseRunner, run_case
from streamjoin.runtime.run import run_once



def t(hhmm: str) -> str:
    return f"2021-12-25 {hhmm}" + (":00" if hhmm.count(":") == 1 else "")


def _input(columns: list[list[str]], delay: str = "0 seconds", **extra: Any) -> dict[str, Any]:
    return {"columns": columns, "event_time": "ts", "watermark_delay": delay, **extra}


def _case(name: str, inputs: dict[str, Any], sql: str, runs: list[tuple[dict, list]], config: dict | None = None) -> dict:
    """A case whose runs are (changes as {input: [rows]} of +I rows, rows the run must emit)."""
    return {"name": name, "inputs": inputs, "sql": sql, "config": config or {},
            "runs": [{"changes": {i: [["+I", r] for r in rows] for i, rows in changes.items()},
                      "expect_changelog": [["+I", r] for r in emitted]} for changes, emitted in runs]}


def _assert_ok(outcome: dict[str, Any]) -> None:
    assert outcome["ok"], f"{outcome['case']}: {outcome['error']}\nruns: {json.dumps(outcome['runs'], indent=1)}"


ORDERS = _input([["id", "int"], ["ts", "timestamp"]])
SHIPMENTS = _input([["order_id", "int"], ["ts", "timestamp"]], "10 minutes")
WITHIN_AN_HOUR = "s.ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR"
OUTER_SQL = {
    "left": f"SELECT o.id, o.ts AS ordered, s.ts AS shipped FROM orders o LEFT JOIN shipments s "
            f"ON o.id = s.order_id AND {WITHIN_AN_HOUR}",
    "right": f"SELECT o.id, o.ts AS ordered, s.ts AS shipped FROM shipments s RIGHT JOIN orders o "
             f"ON s.order_id = o.id AND {WITHIN_AN_HOUR}",
}


@pytest.mark.parametrize("kind", ["left", "right"])
def test_an_outer_row_is_padded_when_the_watermark_closes_its_window(spark, kind: str) -> None:
    """Orders wait for shipments for an hour. W = min(orders' max, shipments' max - 10 min);
    an order is padded once W passes its window's end (o.ts + 1h < W), in that run."""
    runs = [
        ({"orders": [[1, t("10:00")], [2, t("10:30")]]}, []),
        ({"orders": [[3, t("13:00")]]}, []),  # shipments saw no row yet: W is held back
        ({"shipments": [[9, t("11:20")]]}, [[1, t("10:00"), None]]),  # W 11:10 > 10:00 + 1h
        ({"shipments": [[2, t("11:30")]]}, [[2, t("10:30"), t("11:30")]]),  # the window's end is inclusive
        ({"shipments": [[9, t("14:10")]]}, []),  # W 13:00: order 2 leaves state matched; 3 may still match
        ({"orders": [[4, t("15:00")]]}, []),  # W 14:00 = order 3's window end, still open
        ({"shipments": [[9, t("14:11")]]}, [[3, t("13:00"), None]]),  # W 14:01
        # Late orders (behind W) join what state holds: shipment 9 of 11:20 has left it, those of 14:10/14:11 not.
        ({"orders": [[9, t("11:00")], [9, t("13:20")]]},
         [[9, t("11:00"), None], [9, t("13:20"), t("14:10")], [9, t("13:20"), t("14:11")]]),
    ]
    _assert_ok(run_case(spark, _case(f"interval-{kind}-padding", {"orders": ORDERS, "shipments": SHIPMENTS},
                                     OUTER_SQL[kind], runs)))


def test_full_join_pads_both_sides_and_null_keys_at_once(spark) -> None:
    inputs = {"a": _input([["k", "string"], ["ts", "timestamp"]]), "b": _input([["k", "string"], ["ts", "timestamp"]])}
    sql = ("SELECT a.k AS ak, a.ts AS ats, b.k AS bk, b.ts AS bts FROM a FULL JOIN b "
           "ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '5' MINUTE AND b.ts + INTERVAL '5' MINUTE")
    runs = [
        ({"a": [["x", t("10:00")], ["c", t("10:20")], [None, t("10:05")]],
          "b": [["x", t("10:03")], ["y", t("10:00")], [None, t("10:05")]]},
         [["x", t("10:00"), "x", t("10:03")], [None, t("10:05"), None, None], [None, None, None, t("10:05")]]),
        ({"b": [["z", t("10:30")]]}, [[None, None, "y", t("10:00")]]),  # W 10:20: rows before 10:15 leave
        ({"a": [["z", t("10:40")]]}, [["c", t("10:20"), None, None]]),  # W 10:30
        ({"b": [["w", t("10:50")]]}, [[None, None, "z", t("10:30")]]),  # W 10:40
    ]
    _assert_ok(run_case(spark, _case("interval-full", inputs, sql, runs)))


@pytest.mark.parametrize("strict", [False, True])
def test_strict_bounds_exclude_the_boundary_and_close_windows_a_microsecond_earlier(spark, strict: bool) -> None:
    inputs = {"a": _input([["k", "string"], ["ts", "timestamp"]]), "b": _input([["k", "string"], ["ts", "timestamp"]])}
    ge, le = (">", "<") if strict else (">=", "<=")
    sql = (f"SELECT a.k, a.ts AS ats, b.ts AS bts FROM a LEFT JOIN b "
           f"ON a.k = b.k AND a.ts {ge} b.ts AND a.ts {le} b.ts + INTERVAL '10' SECOND")
    first = {"a": [["p", t("10:00:00")], ["q", t("10:00:10")]], "b": [["p", t("10:00:00")], ["q", t("10:00:00")]]}
    if strict:  # W 10:00:00: p needed a b row before 10:00:00, none can come
        runs = [(first, [["p", t("10:00:00"), None]]), ({"b": [["z", t("10:00:05")]]}, []),
                ({"b": [["z", t("10:00:10")]]}, [["q", t("10:00:10"), None]]), ({"b": [["z", t("10:00:11")]]}, [])]
    else:
        runs = [(first, [["p", t("10:00:00"), t("10:00:00")], ["q", t("10:00:10"), t("10:00:00")]]),
                ({"b": [["z", t("10:00:05")]]}, []), ({"b": [["z", t("10:00:10")]]}, []), ({"b": [["z", t("10:00:11")]]}, [])]
    _assert_ok(run_case(spark, _case(f"interval-strict-{strict}", inputs, sql, runs)))


@pytest.mark.parametrize("lateness", [None, "30 minutes"])
def test_allowed_lateness_keeps_rows_for_late_partners(spark, lateness: str | None) -> None:
    inputs = {"orders": ORDERS, "shipments": _input([["order_id", "int"], ["ts", "timestamp"]])}
    first = ({"orders": [[1, t("10:00")], [9, t("11:15")]], "shipments": [[9, t("11:15")]]},
             [[9, t("11:15"), t("11:15")]] + ([] if lateness else [[1, t("10:00"), None]]))  # W 11:15
    late = ({"shipments": [[1, t("10:50")]]}, [[1, t("10:00"), t("10:50")]] if lateness else [])
    last = ({"orders": [[9, t("11:50")]], "shipments": [[9, t("11:50")]]},
            [[9, t("11:50"), t("11:50")], [9, t("11:15"), t("11:50")]])
    config = {"allowed_lateness": lateness} if lateness else {}
    _assert_ok(run_case(spark, _case(f"interval-lateness-{lateness}", inputs, OUTER_SQL["left"], [first, late, last],
                                     config)))


@pytest.mark.parametrize("op", ["=", "<=>"])
def test_null_keys_never_match_unless_null_safe(spark, op: str) -> None:
    inputs = {"a": _input([["k", "string"], ["ts", "timestamp"]]), "b": _input([["k", "string"], ["ts", "timestamp"]])}
    sql = (f"SELECT a.k AS ak, a.ts AS ats, b.k AS bk, b.ts AS bts FROM a LEFT JOIN b "
           f"ON a.k {op} b.k AND a.ts BETWEEN b.ts AND b.ts + INTERVAL '1' MINUTE")
    first = {"a": [[None, t("10:00:30")], ["x", t("10:00:30")], ["y", t("10:00:30")]],
             "b": [[None, t("10:00:00")], ["x", t("10:05:00")]]}
    null_row = [None, t("10:00:30"), None, t("10:00:00")] if op == "<=>" else [None, t("10:00:30"), None, None]
    runs = [(first, [null_row]),  # a NULL key that can never match is padded at once
            ({"a": [["w", t("10:02:00")]]}, [["x", t("10:00:30"), None, None], ["y", t("10:00:30"), None, None]])]
    _assert_ok(run_case(spark, _case(f"interval-null-keys-{op}", inputs, sql, runs)))


def test_a_retraction_reaching_an_interval_join_fails_the_run_and_changes_nothing(spark) -> None:
    case = _case("interval-retraction", {"orders": ORDERS, "shipments": SHIPMENTS}, OUTER_SQL["left"],
                 [({"orders": [[1, t("10:00")]], "shipments": [[1, t("10:30")]]}, [[1, t("10:00"), t("10:30")]])])
    case["runs"].append({"changes": {"shipments": [["-D", [1, t("10:30")]]]},
                         "expect_error": "interval joins need append-only inputs, as in Flink"})
    outcome = run_case(spark, case)
    _assert_ok(outcome)  # the runner also checks that the failed run left every table as it was
    message = outcome["runs"][1]["error"]
    assert "model 'interval-retraction'" in message and "input 'shipments'" in message
    assert '-D {"order_id":1,"ts":"2021-12-25T10:30:00.000Z"}' in message


@pytest.mark.parametrize("kind", ["left", "right", "full"])
def test_an_empty_window_pads_outer_rows_on_arrival_and_keeps_none(spark, tmp_path, kind: str) -> None:
    """`s.ts BETWEEN o.ts + 5 min AND o.ts + 1 min` can match nothing: as Flink's planner does for a
    negative window size, every outer row is padded in the run it arrives (watermark or not), inner
    rows are dropped, and no state is kept."""
    sql = (f"SELECT o.id, s.order_id FROM orders o {kind.upper()} JOIN shipments s ON o.id = s.order_id "
           "AND s.ts BETWEEN o.ts + INTERVAL '5' MINUTE AND o.ts + INTERVAL '1' MINUTE")
    orders_out = kind in ("left", "full")
    shipments_out = kind in ("right", "full")
    runs = [
        ({"orders": [[1, t("10:00")]]}, [[1, None]] if orders_out else []),
        ({"orders": [[2, t("10:00")]], "shipments": [[1, t("10:03")], [2, t("10:03")]]},
         ([[2, None]] if orders_out else []) + ([[None, 1], [None, 2]] if shipments_out else [])),
    ]
    case = _case(f"interval-empty-{kind}", {"orders": ORDERS, "shipments": SHIPMENTS}, sql, runs)
    runner = CaseRunner(spark, case, str(tmp_path))
    _assert_ok(runner.run())
    assert set(_state_rows(runner).values()) <= {0}


def test_an_interval_join_without_an_equality_joins_on_time_alone(spark) -> None:
    """Flink runs an interval join with no equi-condition (its testRowTimeInnerJoinWithoutEqualCondition):
    any pair of rows within the bound matches; a regular join without one stays a compile error."""
    sql = "SELECT o.id, s.order_id FROM orders o JOIN shipments s ON s.ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR"
    runs = [
        ({"orders": [[1, t("10:00")], [2, t("11:30")]], "shipments": [[7, t("10:30")]]}, [[1, 7]]),
        ({"shipments": [[8, t("11:45")], [9, t("13:00")]]}, [[2, 8]]),
    ]
    _assert_ok(run_case(spark, _case("interval-no-key", {"orders": ORDERS, "shipments": SHIPMENTS}, sql, runs)))


def _state_rows(runner: CaseRunner) -> dict[str, int]:
    """Rows each state table holds at its latest version (from the Delta log's file statistics)."""
    return {Path(p).name: sum(f.num_records for f in delta_log.data_files(p, delta_log.version(p)))
            for p in runner.tables.state_tables()}


def test_state_stays_bounded_over_many_runs(spark, tmp_path) -> None:
    """Orders every 10 s, shipments for two of every three orders 90 s later; each run brings one
    minute of events. A row stays in state for about window (2 min) + watermark delay (30 s) after its
    event time, plus up to one time slice (2.5 min) of rows that have expired but share a file slice
    with live ones, plus the run's own minute: at most ~8 minutes of rows per side, whatever the history."""
    runs_n, per_minute = 18, 6
    events: list[tuple[int, str, list]] = []
    for i in range(runs_n * per_minute):
        sec = i * 10
        events.append((sec, "orders", [i, _at(sec)]))
        if i % 3:
            events.append((sec + 90, "shipments", [i, _at(sec + 90)]))
    inputs = {"orders": _input([["id", "int"], ["ts", "timestamp"]], changelog_format="append"),
              "shipments": _input([["order_id", "int"], ["ts", "timestamp"]], "30 seconds", changelog_format="append")}
    sql = ("SELECT o.id, s.order_id FROM orders o LEFT JOIN shipments s "
           "ON o.id = s.order_id AND s.ts BETWEEN o.ts AND o.ts + INTERVAL '2' MINUTE")
    runner = CaseRunner(spark, {"name": "interval-bounded", "inputs": inputs, "sql": sql, "runs": []}, str(tmp_path))
    reports, sizes = [], []
    for run in range(runs_n):
        changes: dict[str, list] = {}
        for sec, name, row in events:
            if sec // 60 == run:
                changes.setdefault(name, []).append(["+I", row])
        runner.append_changes(run, changes)
        reports.append(run_once(spark, runner.plan, runner.tables))
        sizes.append(_state_rows(runner))
    bound = 8 * per_minute
    assert all(n <= bound for size in sizes for n in size.values()), sizes
    assert sizes[-1]["j1_left"] < runs_n * per_minute / 2, sizes

    metrics = [r.metrics["j1"] for r in reports]
    last_order = (runs_n * per_minute - 1) * 10
    last_shipment = max(sec for sec, name, _ in events if name == "shipments" and sec // 60 < runs_n)
    watermark = min(last_order, last_shipment - 30)
    assert metrics[-1]["watermark"] == _at(watermark) + ".000000"
    names = [f.name for f in runner.result_fields()]
    result = [dict(zip(names, row)) for row in runner.result()]
    padded = [r for r in result if r["order_id"] is None]
    assert sum(m["rows_padded"] for m in metrics) == len(padded) > 0
    assert {r["id"] % 3 for r in padded} == {0}
    shipped = [sec for sec, name, _ in events if name == "shipments" and sec // 60 < runs_n]
    assert sum(r["order_id"] is not None for r in result) == len(shipped)  # every shipment finds its order
    assert sum(m["rows_expired"] for m in metrics) > runs_n * per_minute / 2

    state = runner.tables.state("j1_left")
    clock = json.loads(delta_log.latest_metadata(state, "streamjoin.interval"))
    assert clock["watermark_utc"] == metrics[-1]["watermark"]
    assert clock["max_time"] == {"input:orders": _micros(last_order), "input:shipments": _micros(last_shipment)}


def _at(sec: int) -> str:
    return f"2021-12-25 {10 + sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"


def _micros(sec: int) -> int:
    import datetime as dt

    return int((dt.datetime.fromisoformat(_at(sec)).replace(tzinfo=dt.timezone.utc).timestamp())) * 1_000_000


def _as_kept_per_side(state: str) -> None:
    """Rewrite the clock of an interval join's newest commit as streamjoin kept it before it followed
    every input of the model: the largest time per side (`left`, `right`), not per input."""
    log = Path(state) / "_delta_log" / f"{delta_log.version(state):020d}.json"
    lines = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if "commitInfo" in entry and "streamjoin.interval" in entry["commitInfo"]:
            clock = json.loads(entry["commitInfo"]["streamjoin.interval"])
            clock["max_time"] = {"left": clock["max_time"].pop("input:orders"),
                                 "right": clock["max_time"].pop("input:shipments"), **clock["max_time"]}
            entry["commitInfo"]["streamjoin.interval"] = json.dumps(clock)
        lines.append(json.dumps(entry))
    log.write_text("\n".join(lines) + "\n")


def test_a_clock_that_does_not_follow_an_input_yet_counts_its_earlier_runs(spark, tmp_path) -> None:
    """A clock kept before the join followed every input by name (per side, as earlier releases kept it)
    takes each input's largest time from the runs before: an input idle since goes on holding the
    watermark where it was, as FORMAT.md's largest time seen so far does, so run 2 pads order 1 as a
    model that kept its clock all along does, instead of waiting until shipments sends a row again."""
    sql = OUTER_SQL["left"]
    runs = [{"orders": [["+I", [1, t("10:00")]]], "shipments": [["+I", [7, t("12:00")]]]},
            {"orders": [["+I", [2, t("11:30")]]]}]
    kept, upgraded = (CaseRunner(spark, {"name": f"upgrade-{n}", "inputs": {"orders": ORDERS, "shipments": SHIPMENTS},
                                         "sql": sql, "runs": []}, str(tmp_path / n)) for n in ("kept", "upgraded"))
    emitted: dict[str, list] = {"kept": [], "upgraded": []}
    for i, changes in enumerate(runs):
        for name, runner in (("kept", kept), ("upgraded", upgraded)):
            runner.append_changes(i, changes)
            report = run_once(spark, runner.plan, runner.tables)
            emitted[name].append(sorted((kind, row[0], row[2]) for kind, row in runner.changelog(report.run_id)))
            if i == 0 and name == "upgraded":
                _as_kept_per_side(runner.tables.state("j1_left"))
    assert emitted["kept"] == [[], [("+I", 1, None)]], emitted  # (kind, order, shipped)
    assert emitted["upgraded"] == emitted["kept"]
    clock = json.loads(delta_log.latest_metadata(upgraded.tables.state("j1_left"), "streamjoin.interval"))
    assert set(clock["max_time"]) == {"input:orders", "input:shipments"} and clock["watermark_utc"].startswith(
        "2021-12-25 11:30:00")


def test_an_upgraded_model_reads_each_input_s_earlier_runs_once_however_many_joins_ask(spark, tmp_path,
                                                                                    monkeypatch) -> None:
    """Two interval joins whose clocks both predate following every input: the run after the upgrade reads
    each input's earlier changes once (a Spark job each where footers cannot tell), not once per join, and
    emits what a model that kept its clocks emits (order 1 padded by both joins once j1's forwarded
    watermark, an hour behind the model's, passes 12:00)."""
    from streamjoin.runtime import executor

    sql = ("SELECT o.id, s.ts AS shipped, r.ts AS reshipped FROM orders o "
           f"LEFT JOIN shipments s ON o.id = s.order_id AND {WITHIN_AN_HOUR} "
           "LEFT JOIN shipments r ON o.id = r.order_id AND r.ts BETWEEN o.ts AND o.ts + INTERVAL '2' HOUR")
    runs = [{"orders": [["+I", [1, t("10:00")]]], "shipments": [["+I", [7, t("13:00")]]]},
            {"orders": [["+I", [2, t("12:30")]]]},
            {"orders": [["+I", [3, t("15:00")]]], "shipments": [["+I", [8, t("16:00")]]]}]
    kept, upgraded = (CaseRunner(spark, {"name": f"upgrade-{n}", "inputs": {"orders": ORDERS, "shipments": SHIPMENTS},
                                         "sql": sql, "runs": []}, str(tmp_path / n)) for n in ("kept", "upgraded"))
    reads: list[str] = []
    read_changes = executor.formats.read_changes

    def counted(spark, spec, start, end, keyed=None):  # noqa: ANN001, ANN202
        if start is None:  # every version up to `end`: what earlier_max_times reads
            reads.append(spec.name)
        return read_changes(spark, spec, start, end, keyed)

    monkeypatch.setattr(executor.formats, "read_changes", counted)
    emitted: dict[str, list] = {"kept": [], "upgraded": []}
    for i, changes in enumerate(runs):
        for name, runner in (("kept", kept), ("upgraded", upgraded)):
            runner.append_changes(i, changes)
            reads.clear()
            report = run_once(spark, runner.plan, runner.tables)
            emitted[name].append(sorted((kind, row[0]) for kind, row in runner.changelog(report.run_id)))
            if i == 0 and name == "upgraded":
                joins = [p for p in Path(runner.tables.state("j1_left")).parent.iterdir() if p.name.endswith("_left")]
                assert len(joins) == 2, joins
                for state in joins:
                    _as_kept_per_side(str(state))
            if i == 1 and name == "upgraded":
                assert sorted(reads) == ["orders", "shipments"]
    assert emitted["upgraded"] == emitted["kept"] and ("+I", 1) in emitted["kept"][2], emitted
