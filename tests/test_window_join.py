"""Window joins run by run: Flink's WindowJoinOperator semantics (FORMAT.md, "Timing of temporal and
window joins").

Rows join only rows of the same window and key; a window's joined rows, and the null-padded rows of
outer joins, are emitted in the run where the watermark first reaches window_end - 1 ms; a row whose
window fired before it arrived is dropped. Scenarios are conformance cases run through the real
pipeline; a property test checks random runs against the rule computed in Python; and random
on-time runs agree with Flink itself, run by run. Times are seconds after 2024-01-01 00:00:00.
"""
from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario import assert_ok, cases_pass, compile_error, input_specs, state_rows_per_run
from streamjoin.conformance import run_case
from streamjoin.explain import describe
from streamjoin.spec import InputSpec
from streamjoin.storage import appended
from streamjoin.sql.compiler import compile_sql

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))
from client import run_reports  # noqa: E402
from compare import same_result  # noqa: E402

CASES = sorted((Path(__file__).parent / "cases").glob("window-*.json"))


def t(seconds: int) -> str:
    return f"2024-01-01 00:{seconds // 60:02d}:{seconds % 60:02d}"


def seconds(text: str) -> int:
    return int(text[-5:-3]) * 60 + int(text[-2:])


L = {"columns": [["k", "int"], ["v", "int"], ["ts", "timestamp"]], "event_time": "ts"}
R = {"columns": [["k", "int"], ["w", "int"], ["ts", "timestamp"]], "event_time": "ts"}
TUMBLE = "TABLE(TUMBLE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
HOP = "TABLE(HOP(TABLE {t}, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '4' SECOND))"
CUMULATE = "TABLE(CUMULATE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))"
SAME_WINDOW = "L.window_start = R.window_start AND L.window_end = R.window_end"
#: The same kinds as Flink also writes them: by parameter name, with offsets (negative, and HOP's beyond its slide).
TUMBLE_NAMED = ("TABLE(TUMBLE(DATA => TABLE {t}, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '5' SECOND, "
                "`OFFSET` => INTERVAL '-1' SECOND))")
HOP_OFFSET = "TABLE(HOP(TABLE {t}, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '4' SECOND, INTERVAL '3' SECOND))"
CUMULATE_NAMED = ("TABLE(CUMULATE(DATA => TABLE {t}, TIMECOL => DESCRIPTOR(ts), STEP => INTERVAL '2' SECOND, "
                  "SIZE => INTERVAL '6' SECOND, `OFFSET` => INTERVAL '-5' SECOND))")
WINDOWS = {"TUMBLE": TUMBLE, "HOP": HOP, "CUMULATE": CUMULATE, "TUMBLE_NAMED": TUMBLE_NAMED, "HOP_OFFSET": HOP_OFFSET,
           "CUMULATE_NAMED": CUMULATE_NAMED}


def join_sql(kind: str, windows: str = TUMBLE, extra: str = "") -> str:
    return (f"SELECT L.k, L.v, R.k AS rk, R.w, L.window_start, L.window_end, R.window_end AS r_end FROM "
            f"{windows.format(t='l')} L {kind} JOIN {windows.format(t='r')} R ON L.k = R.k AND {SAME_WINDOW}{extra}")


def left(k: int | None, v: int, s: int) -> list:
    return ["+I", [k, v, t(s)]]


right = left


def case(name: str, sql: str, runs: list[tuple[dict, list]]) -> dict:
    """Runs are (changes as {input: [changes]}, rows the run must emit)."""
    return {"name": name, "sql": sql, "inputs": {"l": L, "r": R},
            "runs": [{"changes": changes, "expect_changelog": [["+I", r] for r in emitted]} for changes, emitted in runs]}


SCENARIOS = [
    case("a-window-fires-once-the-watermark-reaches-its-end-and-late-rows-are-dropped",
         "SELECT L.k, L.v, R.w, L.window_end FROM " + TUMBLE.format(t="l") + " L LEFT JOIN " + TUMBLE.format(t="r")
         + f" R ON L.k = R.k AND {SAME_WINDOW}", [
             # W = min(3, 7) = 3: window [0, 5) is still open
             ({"l": [left(1, 1, 1), left(2, 2, 3)], "r": [right(1, 10, 2), right(1, 11, 7)]}, []),
             # W = 6: [0, 5) fires; key 2 has no match in it (null-padded); the right row at 7 waits in [5, 10)
             ({"l": [left(1, 3, 6)], "r": [right(3, 12, 9)]}, [[1, 1, 10, t(5)], [2, 2, None, t(5)]]),
             # the row at 4 is late ([0, 5) fired): dropped; W = 11 fires [5, 10)
             ({"l": [left(1, 4, 4), left(1, 5, 12)], "r": [right(1, 13, 11)]}, [[1, 3, 11, t(10)]]),
         ]),
    case("a-window-fires-at-exactly-its-end-minus-one-millisecond", join_sql("FULL"), [
        ({"l": [left(1, 1, 0), ["+I", [1, 2, "2024-01-01 00:00:04.999"]]], "r": [right(1, 10, 1)]}, []),
        # W = 4.999 s >= 5 s - 1 ms: [0, 5) fires; 4.998 s would not
        ({"r": [["+I", [9, 0, "2024-01-01 00:00:04.999"]]]},
         [[1, 1, 1, 10, t(0), t(5), t(5)], [1, 2, 1, 10, t(0), t(5), t(5)], [None, None, 9, 0, None, None, t(5)]]),
    ]),
    case("hop-windows-overlap-so-a-row-joins-in-each-of-its-windows", join_sql("INNER", HOP), [
        ({"l": [left(1, 1, 3)], "r": [right(1, 10, 2), right(1, 11, 5)]}, []),
        # W = 9: [0, 4), [2, 6) and [4, 8) fire; l@3 is in [0, 4) and [2, 6); r@2 likewise, r@5 in [2, 6) and [4, 8)
        ({"l": [left(2, 2, 9)], "r": [right(2, 20, 10)]},
         [[1, 1, 1, 10, t(0), t(4), t(4)], [1, 1, 1, 10, t(2), t(6), t(6)], [1, 1, 1, 11, t(2), t(6), t(6)]]),
    ]),
    case("cumulate-windows-grow-by-step-from-a-common-start", join_sql("LEFT", CUMULATE), [
        # l@1 is in [0, 2), [0, 4), [0, 6); l@2 and r@3 in [0, 4), [0, 6); W = 2 fires [0, 2) only
        ({"l": [left(1, 1, 1), left(3, 0, 2)], "r": [right(1, 10, 3)]}, [[1, 1, None, None, t(0), t(2), None]]),
        ({"l": [left(1, 2, 7)], "r": [right(1, 11, 7)]},
         [[1, 1, 1, 10, t(0), t(4), t(4)], [1, 1, 1, 10, t(0), t(6), t(6)],
          [3, 0, None, None, t(0), t(4), None], [3, 0, None, None, t(0), t(6), None]]),
    ]),
    case("semi-and-anti-window-joins-keep-left-rows-by-a-match-in-their-window",
         "SELECT L.k, L.v, L.window_end FROM " + TUMBLE.format(t="l") + " L WHERE L.k IN (SELECT R.k FROM "
         + TUMBLE.format(t="r") + f" R WHERE {SAME_WINDOW}) AND NOT EXISTS (SELECT 1 FROM " + TUMBLE.format(t="r")
         + f" R WHERE R.k = L.k AND R.w > 5 AND {SAME_WINDOW})", [
             ({"l": [left(1, 1, 1), left(1, 1, 1), left(2, 2, 2), left(None, 3, 3), left(1, 4, 6)],
               "r": [right(1, 0, 1), right(2, 9, 4), right(None, 0, 3), right(1, 9, 7), right(4, 0, 12)]},
              [[1, 1, t(5)], [1, 1, t(5)]]),
         ]),
    case("the-residual-decides-the-match-inside-the-window-and-null-keys-never-match",
         join_sql("RIGHT", extra=" AND L.v < R.w"), [
             ({"l": [left(1, 5, 1), left(None, 0, 2), left(1, 1, 3), left(4, 0, 6)], "r": [right(1, 3, 4), right(None, 9, 4), right(7, 0, 6)]},
              [[1, 1, 1, 3, t(0), t(5), t(5)], [None, None, None, 9, None, None, t(5)]]),
         ]),
    case("spark-window-function-in-derived-tables",
         "SELECT L.k, L.v, R.w, L.win.start AS ws FROM (SELECT k, v, window(ts, '5 seconds') AS win FROM l) L "
         "LEFT JOIN (SELECT k, w, window(ts, '5 seconds') AS win FROM r WHERE w > 0) R ON L.k = R.k AND L.win = R.win", [
             ({"l": [left(1, 1, 1), left(2, 2, 2), left(3, 0, 7)], "r": [right(1, 10, 3), right(2, 0, 4), right(1, 11, 8)]},
              [[1, 1, 10, t(0)], [2, 2, None, t(0)]]),
         ]),
    {**case("each-side-windows-by-its-own-event-time-column",
            "SELECT L.k, L.v, R.w, L.window_end FROM " + TUMBLE.format(t="l") + " L JOIN "
            + TUMBLE.replace("DESCRIPTOR(ts)", "DESCRIPTOR(at)").format(t="r") + f" R ON L.k = R.k AND {SAME_WINDOW}", [
                ({"l": [left(1, 1, 1), left(1, 2, 3)], "r": [right(1, 10, 4)]}, []),  # W = 3
                ({"l": [left(2, 3, 9)], "r": [right(2, 20, 8)]}, [[1, 1, 10, t(5)], [1, 2, 10, t(5)]]),  # W = 8
            ]), "inputs": {"l": L, "r": {**R, "columns": [["k", "int"], ["w", "int"], ["at", "timestamp"]],
                                         "event_time": "at"}}},
    {**case("an-input-that-is-not-append-only-fails-the-run", join_sql("INNER"), []), "runs": [
        {"changes": {"l": [left(1, 1, 1)], "r": [right(1, 1, 1)]}},
        {"changes": {"l": [["-D", [1, 1, t(1)]]]}, "expect_error": "a window join reads append-only inputs"}]},
]


def test_scenarios(spark):
    cases_pass(spark, SCENARIOS, CASES)


# -- compile time ----------------------------------------------------------------------------------
def _specs(**overrides: dict) -> dict[str, InputSpec]:
    return input_specs({"l": L, "r": R, **overrides})


def test_explain_names_the_window_join_and_its_windows():
    text = compile_sql("m", join_sql("LEFT", HOP), _specs()).explain()
    assert "left window join j1" in text and "per window HOP(ts, size 4s, slide 2s), fired at its end" in text
    assert "scan TABLE(HOP(ts, size 4s, slide 2s)) OF l AS L" in text


@pytest.mark.parametrize("sql, inputs, config, message", [
    (join_sql("INNER").replace(" AND L.window_end = R.window_end", ""), {}, {}, "must equate both window bounds"),
    (join_sql("INNER").replace("JOIN " + TUMBLE.format(t="r"), "JOIN " + HOP.format(t="r")), {}, {},
     "the two sides use different windows"),
    (join_sql("INNER"), {"r": {**R, "changelog_format": "upsert", "unique_key": ["k"]}}, {}, "reads append-only inputs"),
    (join_sql("INNER").replace("DESCRIPTOR(ts)", "DESCRIPTOR(v)", 1), {}, {}, "must window by the input's event time (ts)"),
    (join_sql("INNER"), {"l": {k: v for k, v in L.items() if k != "event_time"}}, {}, "none declared: declare event_time"),
    (join_sql("INNER", CUMULATE.replace("'6'", "'5'")), {}, {}, "the size a whole multiple of the step"),
    (join_sql("INNER", TUMBLE.replace("INTERVAL '5' SECOND", "INTERVAL '1' MONTH")), {}, {},
     "must be a fixed, non-negative INTERVAL"),
    (join_sql("INNER", "TABLE(TUMBLE(TABLE {t}, DESCRIPTOR(ts)))"), {}, {}, "TUMBLE takes its arguments in order"),
    (join_sql("INNER", "TABLE(TUMBLE(TIMECOL => DESCRIPTOR(ts), DATA => TABLE {t}, SIZE => INTERVAL '5' SECOND))"), {}, {},
     "TUMBLE takes its arguments in order: TUMBLE(TABLE <input>, DESCRIPTOR(<event time>), <size>[, <offset>]), or "
     "with Flink's names in that order: TUMBLE(DATA => TABLE <input>, TIMECOL => "),
    (join_sql("INNER", HOP.replace("INTERVAL '2'", "SIZE => INTERVAL '2'")), {}, {}, "HOP takes its arguments in order"),
    (join_sql("INNER", TUMBLE.replace("SECOND))", "SECOND, INTERVAL '-5' SECOND))")), {}, {},
     "TUMBLE's offset must be smaller than its size in absolute value, as in Flink (|-5s| >= 5s)"),
    (join_sql("INNER", HOP.replace("INTERVAL '4' SECOND", "INTERVAL '-4' SECOND")), {}, {},
     "the size of a window must be a fixed, non-negative INTERVAL"),
    (join_sql("INNER"), {}, {"join_strategy": "multi"}, "join_strategy 'multi' cannot include a window join"),
])
def test_unsupported_variants_fail_at_compile_time(sql, inputs, config, message):
    error = compile_error("windows_model", sql, {"l": L, "r": R, **inputs}, config)
    assert message in error and "model 'windows_model'" in error


def test_flinks_named_arguments_mean_what_their_positions_mean():
    named = compile_sql("m", join_sql("LEFT", CUMULATE_NAMED), _specs())
    positional = compile_sql("m", join_sql("LEFT", "TABLE(CUMULATE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '2' SECOND, "
                                                   "INTERVAL '6' SECOND, INTERVAL '-5' SECOND))"), _specs())
    assert named.explain() == positional.explain()
    assert str(named.root.window) == "per window CUMULATE(ts, size 6s, step 2s, offset -5s), fired at its end"


def test_a_window_function_over_a_cte_passing_an_input_through_windows_that_input():
    sql = join_sql("LEFT", TUMBLE_NAMED)
    via = "WITH l_in AS (SELECT * FROM l) " + sql.replace("TABLE l,", "TABLE l_in,")
    assert "l_in" in via and compile_sql("m", via, _specs()).explain() == compile_sql("m", sql, _specs()).explain()
    computed = "WITH l_in AS (SELECT k, v, ts FROM l WHERE v > 0) " + sql.replace("TABLE l,", "TABLE l_in,")
    assert "the common table expression 'l_in' is not one: make it SELECT * FROM the input" in compile_error(
        "m", computed, {"l": L, "r": R})


def test_a_window_join_in_a_joined_cte_read_by_a_final_cte_plans_as_written_out():
    """dbt's style over window joins: the final CTE reads the joined CTE's columns and the fields of its windows."""
    spark_form = ("SELECT L.k, L.win.start AS ws, R.w FROM (SELECT k, v, window(ts, '5 seconds') AS win FROM l) L "
                  "JOIN (SELECT k, w, window(ts, '5 seconds') AS win FROM r) R ON L.k = R.k AND L.win = R.win")
    joined = ("WITH joined AS (SELECT L.k, L.win, R.w FROM (SELECT k, v, window(ts, '5 seconds') AS win FROM l) L "
              "JOIN (SELECT k, w, window(ts, '5 seconds') AS win FROM r) R ON L.k = R.k AND L.win = R.win) ")
    for final in ("SELECT k, win.start AS ws, w FROM joined", "SELECT joined.k, joined.win.start AS ws, joined.w FROM joined"):
        assert compile_sql("m", joined + final, _specs()).explain() == compile_sql("m", spark_form, _specs()).explain()
    tvf = join_sql("LEFT", TUMBLE)
    final = "WITH j AS (" + tvf + ") SELECT * FROM j WHERE j.w IS NULL OR j.w > j.v"
    assert compile_sql("m", final, _specs()).explain() == compile_sql("m", tvf + " WHERE R.w IS NULL OR R.w > L.v", _specs()).explain()


# -- property: the rule, computed in Python ---------------------------------------------------------
def windows_of(kind: str, ts: float) -> list[tuple[int, int]]:
    """The windows (start, end) in seconds of a row at `ts` (TUMBLE 5; HOP slide 2 size 4; CUMULATE step 2 size 6)."""
    if kind == "TUMBLE":
        start = int(ts // 5) * 5
        return [(start, start + 5)]
    if kind == "HOP":
        last = int(ts // 2) * 2
        return [(s, s + 4) for s in (last, last - 2)]
    start = int(ts // 6) * 6
    return [(start, e) for e in range(start + 2, start + 7, 2) if e > ts]


def expected_emissions(runs: list[dict], kind: str, join: str,
                       residual: Callable[[list, list], bool] = lambda a, b: True) -> list[list[tuple]]:
    """What each run emits: per run, the watermark W (min over both inputs of the largest time seen);
    a (row, window) pair is late when W before its run already reached the window's end - 1 ms; each
    window fires in the first run where W reaches end - 1 ms and joins its on-time rows."""
    held: dict[str, list[tuple[list, tuple[int, int]]]] = {"l": [], "r": []}
    top: dict[str, float] = {}
    w: float | None = None
    out = []
    for run in runs:
        for side in ("l", "r"):
            for _, row in run["changes"].get(side, []):
                ts = seconds(row[2])
                top[side] = max(top.get(side, ts), ts)
                held[side] += [(row, win) for win in windows_of(kind, ts) if w is None or win[1] - 0.001 > w]
        before = w
        if len(top) == 2:
            w = max(filter(lambda x: x is not None, [w, min(top.values())]))
        fired = {win for side in held.values() for _, win in side
                 if w is not None and win[1] - 0.001 <= w and (before is None or win[1] - 0.001 > before)}
        emitted = []
        for win in fired:
            ls = [r for r, x in held["l"] if x == win]
            rs = [r for r, x in held["r"] if x == win]
            matched_r: set[int] = set()
            for a in ls:
                hits = [j for j, b in enumerate(rs) if a[0] is not None and a[0] == b[0] and residual(a, b)]
                matched_r |= set(hits)
                if join in ("SEMI", "ANTI"):
                    if bool(hits) == (join == "SEMI"):
                        emitted.append((a[0], a[1], t(win[1])))
                    continue
                emitted += [(a[0], a[1], rs[j][0], rs[j][1], t(win[1])) for j in hits]
                if not hits and join in ("LEFT", "FULL"):
                    emitted.append((a[0], a[1], None, None, t(win[1])))
            if join in ("RIGHT", "FULL"):
                emitted += [(None, None, b[0], b[1], t(win[1])) for j, b in enumerate(rs) if j not in matched_r]
        out.append(sorted(emitted, key=repr))
    return out


def property_sql(kind: str, join: str) -> str:
    windows = WINDOWS[kind]
    if join in ("SEMI", "ANTI"):
        neg = "NOT " if join == "ANTI" else ""
        return (f"SELECT L.k, L.v, L.window_end FROM {windows.format(t='l')} L WHERE {neg}EXISTS (SELECT 1 FROM "
                f"{windows.format(t='r')} R WHERE R.k = L.k AND R.w >= L.v AND {SAME_WINDOW})")
    return (f"SELECT L.k, L.v, R.k AS rk, R.w, coalesce(L.window_end, R.window_end) AS we FROM {windows.format(t='l')} L "
            f"{join} JOIN {windows.format(t='r')} R ON L.k = R.k AND R.w >= L.v AND {SAME_WINDOW}")


@st.composite
def append_only_runs(draw, late: bool = True) -> list[dict]:
    """Runs of rows on both inputs at whole seconds, some behind the watermark (late; none unless
    `late`), with duplicates and NULL keys, at random run boundaries."""
    runs, clock, top = [], 0, {"l": 0, "r": 0}
    for _ in range(draw(st.integers(2, 4))):
        changes: dict[str, list] = {}
        for side in ("l", "r"):
            times = [max(0, clock + draw(st.integers(-4, 6))) if late else min(top.values()) + 1 + draw(st.integers(0, 6))
                     for _ in range(draw(st.integers(0, 4)))]
            rows = [[draw(st.sampled_from([1, 2, None])), draw(st.integers(0, 2)), t(ts)] for ts in times]
            rows += [list(r) for r in rows[:draw(st.integers(0, 1))]]
            if rows:
                changes[side] = [["+I", r] for r in rows]
            top[side] = max([top[side], *times])
        clock += draw(st.integers(0, 6))
        runs.append({"changes": changes})
    return runs


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=append_only_runs(), kind=st.sampled_from(["TUMBLE", "HOP", "CUMULATE"]),
       join=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL", "SEMI", "ANTI"]))
def test_each_run_emits_what_the_rule_says(spark, runs, kind, join):
    outcome = run_case(spark, {"name": "window-property", "sql": property_sql(kind, join), "inputs": {"l": L, "r": R},
                               "runs": runs})
    assert_ok(outcome)
    want = expected_emissions(runs, kind, join, residual=lambda a, b: b[1] >= a[1])
    for i, (run, expected) in enumerate(zip(outcome["runs"], want)):
        assert all(k == "+I" for k, _ in run["changelog"]), run["changelog"]
        got = sorted((tuple(r) for _, r in run["changelog"]), key=repr)
        assert got == expected, f"run {i}: {got} != {expected}\nsql: {property_sql(kind, join)}\nruns: {json.dumps(runs)}"


# -- Flink itself ------------------------------------------------------------------------------------
def random_on_time_case(name: str, sql: str, rng: random.Random,
                        inputs: dict[str, dict] | None = None) -> tuple[dict, list[int]]:
    """Rows at or after the watermark when they arrive (a late row's fate depends on how Flink's
    input channels interleave, see tests/flink_oracle/README.md), NULL keys and duplicates; and the
    watermark after each run. An input may send nothing in a run (after the first) and hold the
    watermark back: FORMAT.md's one watermark of the model, at every join of a cascade, so rows of the
    others behind the watermark they alone would make are still on time (in half the cases of three
    inputs the last starts two runs late to make that likely). `inputs`: l and r by default."""
    inputs = inputs or {"l": L, "r": R}
    top = {side: 0 for side in inputs}
    late_starter = list(inputs)[-1] if len(inputs) > 2 and rng.random() < 0.5 else None
    runs, marks = [], []
    for run in range(3):
        floor = min(top.values())
        changes: dict[str, list] = {}
        for side in inputs:
            if (run and rng.random() < 0.25) or (side == late_starter and run < 2):
                continue
            rows = [[rng.choice([None, 1, 2, 3]), rng.randint(0, 3), t(floor + rng.randint(0, 7))]
                    for _ in range(rng.randint(1, 5))]
            rows += [list(rng.choice(rows)) for _ in range(rng.randint(0, 1))] + [[2, 0, t(floor + 8)]]
            changes[side] = [["+I", r] for r in rows]
            top[side] = max([top[side]] + [seconds(r[2]) for r in rows])
        marks.append(min(top.values()))
        runs.append({"changes": changes})
    return {"name": name, "sql": sql, "config": {}, "runs": runs, "inputs": inputs}, marks


def test_window_joins_agree_with_flink_run_by_run(spark):
    """Each run emits exactly the rows Flink emits for the windows that run's watermark fires (a row's
    window end says which run fires it); Flink's other rows are of windows it fires only at the end of
    its bounded input (watermark +inf), which streamjoin still holds open."""
    rng = random.Random(20261124)
    queries = [property_sql(kind, join) for kind, join in
               [("TUMBLE", "FULL"), ("HOP", "LEFT"), ("CUMULATE", "INNER"), ("TUMBLE", "SEMI"), ("HOP", "ANTI"),
                ("CUMULATE", "RIGHT"), ("TUMBLE_NAMED", "LEFT"), ("HOP_OFFSET", "FULL"), ("CUMULATE_NAMED", "ANTI")]]
    cases = [random_on_time_case(f"window-{i}", sql, rng) for i, sql in enumerate(queries)]
    assert_agree_with_flink(spark, cases)


S = {"columns": [["k", "int"], ["x", "int"], ["ts", "timestamp"]], "event_time": "ts"}


def same_window(a: str, b: str) -> str:
    return f"{a}.window_start = {b}.window_start AND {a}.window_end = {b}.window_end"


def cascade_sql(kind: str, first: str, second: str, by: str) -> str:
    """l joined with r, then their rows with s by the windows of `by` (L or R: a side the first join keeps)."""
    w = WINDOWS[kind]
    return (f"SELECT L.k, L.v, R.w, S.x, coalesce({by}.window_end, S.window_end) AS we FROM {w.format(t='l')} L "
            f"{first} JOIN {w.format(t='r')} R ON L.k = R.k AND R.w >= L.v AND {same_window('L', 'R')} "
            f"{second} JOIN {w.format(t='s')} S ON {by}.k = S.k AND {same_window(by, 'S')}")


def test_cascaded_window_joins_agree_with_flink_run_by_run(spark):
    """A window join of a window join's rows, by the windows they carry, is a window join in Flink too
    (two WindowJoin operators): its rows wait for their window to fire, and the first join's watermark
    counts as the time of its side (it was a regular join, emitting at once and padding early)."""
    rng = random.Random(20261201)
    queries = [cascade_sql("TUMBLE", "INNER", "LEFT", "L"), cascade_sql("HOP", "LEFT", "INNER", "L"),
               cascade_sql("CUMULATE", "RIGHT", "FULL", "R"), cascade_sql("TUMBLE_NAMED", "INNER", "RIGHT", "R")]
    cases = [random_on_time_case(f"window-cascade-{i}", sql, rng, {"l": L, "r": R, "s": S})
             for i, sql in enumerate(queries)]
    assert_agree_with_flink(spark, cases)


def test_a_join_of_a_window_joins_rows_by_the_windows_they_carry_is_a_window_join():
    plan = compile_sql("m", cascade_sql("TUMBLE", "LEFT", "INNER", "L"), _specs(s=S))
    assert plan.root.window is not None and plan.root.left.window is not None
    assert "inner window join j2" in plan.explain()
    assert "not a window join" not in describe(plan)
    # by the windows of the side the first join pads with NULLs: a regular join of its rows, and explain says why
    # (Flink plans a window join, which drops the padded rows as late: checked with PyFlink 2.3, see stop 55's note)
    for first, by in [("LEFT", "R"), ("RIGHT", "L"), ("FULL", "L"), ("FULL", "R")]:
        padded = compile_sql("m", cascade_sql("TUMBLE", first, "INNER", by), _specs(s=S))
        assert padded.root.window is None and padded.root.left.window is not None
        assert (f"j2 (inner join): binary operator (Flink's StreamingJoinOperator); not a window join: it joins j1's "
                f"rows by the windows of {by}, which j1 may pad with NULL") in describe(padded)


def assert_agree_with_flink(spark, cases: list[tuple[dict, list[int]]]) -> None:
    """Each case's runs emit what Flink emits for the windows each run's watermark fires (the case's
    last column is the window end)."""
    marks = {c["name"]: m for c, m in cases}
    cases = [c for c, _ in cases]
    reports, stderr = run_reports(cases)
    with ThreadPoolExecutor(max_workers=3) as pool:
        ours = list(pool.map(lambda c: run_case(spark, c), cases))
    for c, report, outcome in zip(cases, reports, ours):
        assert report["ok"], f"{c['name']}: Flink failed: {report['error']}\n{stderr[-5000:]}"
        assert_ok(outcome)
        w = marks[c["name"]]
        fires_in = lambda end: next((i for i, m in enumerate(w) if seconds(end) - 0.001 <= m), None)  # noqa: E731
        per_run: list[list] = [[] for _ in w]
        for row in report["result"]:
            i = fires_in(row[-1])
            if i is not None:
                per_run[i].append(row)
        for i, run in enumerate(outcome["runs"]):
            assert all(kind == "+I" for kind, _ in run["changelog"]), f"{c['name']} run {i}: {run['changelog']}"
            same, why = same_result(per_run[i], [r for _, r in run["changelog"]], report["columns"])
            assert same, f"{c['name']} run {i} ({c['sql']}): streamjoin differs from Flink: {why}\n{json.dumps(c)}"


# -- bounded state ----------------------------------------------------------------------------------
def test_state_holds_the_rows_of_open_windows_only(spark, tmp_path, monkeypatch):
    """A row every second on each side for seven runs, 2 s windows, the watermark a second behind: a
    side's table holds the rows of windows open when it was last rewritten, plus the runs appended since."""
    monkeypatch.setattr(appended, "COMPACT_AT", 2)
    inputs = {"l": {**L, "watermark_delay": "1 second"}, "r": {**R, "watermark_delay": "1 second"}}
    runs = [{"changes": {"l": [left(1, i, i)], "r": [right(1, i, i)]}} for i in range(7)]
    sql = join_sql("INNER", TUMBLE.replace("'5'", "'2'"))
    sizes, runner = state_rows_per_run(spark, {"name": "bounded", "sql": sql, "inputs": inputs, "runs": runs},
                                       str(tmp_path), "j1_left")

    def open_rows(i: int) -> int:  # rows of windows open after run i (W = i - 1)
        return sum(1 for j in range(i + 1) if (j // 2 + 1) * 2 - 0.001 > i - 1)

    # rewritten every other run: what was open a run ago, plus a run of appends; never every row
    assert all(sizes[i] <= open_rows(i - 1) + 1 for i in range(1, len(sizes))), sizes
    assert sizes[-1] < len(runs), sizes
    result = sorted(tuple(r[:4]) for r in runner.result())  # W = 5 s: [0, 2) and [2, 4) fired
    assert result == sorted((1, i, 1, j) for w in (0, 2) for i in (w, w + 1) for j in (w, w + 1)), result
