"""Interval joins of an interval join's rows (a cascade), as Flink plans them: two IntervalJoins.

`l JOIN r ON l.k = r.k AND <bound on l.ts - r.ts> [LEFT|RIGHT|FULL] JOIN s ON l.k = s.k AND <bound
on s.ts and l.ts (or r.ts)>`: the second join is an interval join too, whose left rows are the first
join's output. The first join forwards its watermark held back by the longest a row waits there for a
partner (Flink's `RowTimeIntervalJoin.getMaxOutputDelay`), so the second never drops a pair of on-time
rows; both emit append-only output (outer rows padded once, when they expire). Checked against Flink
on random on-time runs, and against the batch query. Times are seconds after 2024-01-01 00:00:00.
"""
from __future__ import annotations

import json
import random
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scenario import assert_ok, cases_pass, compile_error
from streamjoin.conformance import run_case
from streamjoin.explain import describe
from streamjoin.spec import InputSpec
from streamjoin.sql.compiler import compile_sql

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))
from client import run_in_flink  # noqa: E402

COLUMNS = [["k", "int"], ["v", "int"], ["ts", "timestamp"]]
INPUTS = {n: {"columns": COLUMNS, "event_time": "ts"} for n in "lrs"}
VERSIONED = {"columns": COLUMNS, "event_time": "ts", "unique_key": ["k"]}
CASES = sorted((Path(__file__).parent / "cases").glob("interval-cascade-*.json"))
FLUSH = -1  # `v` of the rows of a last run far ahead in time, which expires every earlier row


def t(seconds: int) -> str:
    return f"2024-01-01 {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def cascade_sql(first: str, second: str, by: str, bounds: tuple[int, int, int, int]) -> str:
    """l joined with r, then their rows with s by the time of `by` (l or r), bounds in seconds."""
    a, b, c, d = bounds
    return (f"SELECT l.v AS lv, r.v AS rv, s.v AS sv FROM l {first} JOIN r ON l.k = r.k "
            f"AND l.ts BETWEEN r.ts + INTERVAL '{a}' SECOND AND r.ts + INTERVAL '{b}' SECOND "
            f"{second} JOIN s ON {by}.k = s.k AND s.ts >= {by}.ts + INTERVAL '{c}' SECOND "
            f"AND s.ts <= {by}.ts + INTERVAL '{d}' SECOND")


def random_on_time_case(name: str, sql: str, rng: random.Random, inputs: dict[str, dict] = INPUTS) -> dict:
    """Four runs of rows strictly after the model's watermark when they arrive (every delay 0: the
    smallest of the inputs' largest times), NULL keys and duplicates, then a run far ahead in time
    (keys that match nothing) that expires every earlier row, as the end of Flink's bounded input does.
    An input may have no rows in a run, and in half the cases the last input sends none before the
    third run: until it does, it holds back every join's watermark, the first join's too, as the
    model's one watermark does in Flink (a join that followed only its own inputs would expire rows
    that Flink still joins). A row exactly at the watermark is left out: Flink may or may not have
    expired its partners by the time it arrives (its two-input channels interleave). A versioned
    input (with a unique_key) gets versions of keys 1 and 2 (`version_changes`), all later than any
    time the run's watermark reaches: Flink's temporal join would race a version at or before it
    against the probes the run fires (which it sees first depends on its input channels)."""
    first = list(inputs)[:2]
    versioned = [n for n, spec in inputs.items() if spec.get("unique_key")]
    top = {n: 0 for n in inputs}
    runs, v, versions = [], 0, []
    late_starter = list(inputs)[-1] if rng.random() < 0.5 else None
    for run in range(4):
        floor = min(top[n] for n in inputs if n not in versioned) + 1
        changes: dict[str, list] = {}
        for n in inputs:
            if n in versioned:
                continue
            rows = []
            spread = rng.choice([2, 12])
            silent = rng.random() < 0.3 or (n == late_starter and run < 2)
            for _ in range(0 if silent else rng.randint(1, 4)):
                v += 1
                rows.append([rng.choice([None, 1, 2, 2]), v, floor + rng.randint(0, spread)])
            rows += [list(rng.choice(rows)) for _ in range(rng.randint(0, 1)) if rows]
            changes[n] = [["+I", [k, v_, t(ts)]] for k, v_, ts in rows]
            top[n] = max([top[n]] + [ts for _, _, ts in rows])
        reach = min(top[n] for n in first if n not in versioned)  # the most this run's watermark reaches
        for n in versioned:
            changes[n] = version_changes(versions, reach + 1, rng)
            top[n] = max([top[n]] + [seconds(r[2]) for _, r in changes[n]])
        runs.append({"changes": {n: changes[n] for n in inputs}})
    far = max(top.values()) + 3600
    runs.append({"changes": {n: [["+I", [100 + i, FLUSH, t(far)]]] for i, n in enumerate(inputs)}})
    return {"name": name, "sql": sql, "inputs": inputs, "config": {}, "runs": runs}


def version_changes(versions: list[list], floor: int, rng: random.Random) -> list:
    """One run's changes of v, from `floor` on: new versions, and updates (-U/+U) and deletions of
    versions not yet behind the watermark (`versions`: every version so far)."""
    changes: list = []
    for _ in range(rng.randint(1, 3)):
        live = [x for x in versions if seconds(x[2]) >= floor]
        new = [rng.choice([1, 2]), 50 + rng.randint(0, 9), t(floor + rng.randint(0, 8))]
        if live and rng.random() < 0.4:
            old = rng.choice(live)
            versions.remove(old)
            if rng.random() < 0.5:
                changes.append(["-D", old])
                continue
            new[0] = old[0]
            changes += [["-U", old], ["+U", new]]
        else:
            changes.append(["+I", new])
        versions.append(new)
    return changes


def seconds(text: str) -> int:
    return int(text[-8:-6]) * 3600 + int(text[-5:-3]) * 60 + int(text[-2:])


def without_flush(rows: list) -> Counter:
    return Counter(tuple(r) for r in rows if FLUSH not in r)


def temporal_sql(first: str, second: str, bounds: tuple[int, int]) -> str:
    """l enriched with the version of v valid at l.ts, then joined with s around l.ts."""
    c, d = bounds
    return (f"SELECT l.v AS lv, v.v AS vv, s.v AS sv FROM l {first} JOIN v FOR SYSTEM_TIME AS OF l.ts ON l.k = v.k "
            f"{second} JOIN s ON l.k = s.k "
            f"AND s.ts BETWEEN l.ts + INTERVAL '{c}' SECOND AND l.ts + INTERVAL '{d}' SECOND")


QUERIES = [
    cascade_sql("INNER", "INNER", "l", (-5, 0, -2, 3)),
    cascade_sql("INNER", "LEFT", "l", (-5, 0, -2, 3)),
    cascade_sql("LEFT", "LEFT", "l", (-3, 2, 0, 4)),
    cascade_sql("INNER", "RIGHT", "r", (0, 4, -3, 1)),
    cascade_sql("RIGHT", "FULL", "r", (-2, 2, -4, 0)),
    cascade_sql("FULL", "INNER", "l", (-4, 1, -1, 2)),
    cascade_sql("LEFT", "INNER", "r", (-3, 3, 0, 3)),  # by the side the first join pads: NULL times match nothing
]
#: an interval join of a temporal join's rows, by the probe's time (the temporal join forwards its watermark as is)
TEMPORAL_QUERIES = [temporal_sql("INNER", "INNER", (-2, 3)), temporal_sql("LEFT", "LEFT", (0, 4)),
                    temporal_sql("INNER", "FULL", (-3, 0)), temporal_sql("LEFT", "RIGHT", (-1, 2))]
TEMPORAL_INPUTS = {"l": INPUTS["l"], "v": VERSIONED, "s": INPUTS["s"]}
#: a temporal join probing with an interval join's rows, by a time they keep
PROBING_QUERIES = [
    "SELECT l.v AS lv, r.v AS rv, s.v AS sv FROM l JOIN r ON l.k = r.k AND l.ts BETWEEN r.ts - INTERVAL '4' SECOND "
    "AND r.ts + INTERVAL '1' SECOND LEFT JOIN s FOR SYSTEM_TIME AS OF l.ts ON l.k = s.k",
    "SELECT l.v AS lv, r.v AS rv, s.v AS sv FROM l RIGHT JOIN r ON l.k = r.k "
    "AND l.ts BETWEEN r.ts - INTERVAL '2' SECOND AND r.ts + INTERVAL '3' SECOND JOIN s FOR SYSTEM_TIME AS OF r.ts "
    "ON r.k = s.k",
    "SELECT l.v AS lv, r.v AS rv, s.v AS sv FROM l LEFT JOIN r ON l.k = r.k AND l.ts BETWEEN r.ts AND "
    "r.ts + INTERVAL '5' SECOND LEFT JOIN s FOR SYSTEM_TIME AS OF l.ts ON l.k = s.k AND s.v > l.v",
]
PROBING_INPUTS = {"l": INPUTS["l"], "r": INPUTS["r"], "s": VERSIONED}


def test_cascaded_interval_joins_agree_with_flink(spark):
    """Every run's changelog is insert-only (a regular second join padded early and retracted
    later), and the result is Flink's, where the far run has expired every earlier row: the second
    join loses no pair (without the first join's held-back watermark it would expire s rows that
    later rows of the first join match). The first join is an interval join or a temporal join, and a
    temporal join probes with an interval join's rows (its watermark held back as above)."""
    rng = random.Random(20261202)
    cases = [random_on_time_case(f"interval-cascade-{i}", sql, rng) for i, sql in enumerate(QUERIES)]
    cases += [random_on_time_case(f"temporal-then-interval-{i}", sql, rng, TEMPORAL_INPUTS)
              for i, sql in enumerate(TEMPORAL_QUERIES)]
    cases += [random_on_time_case(f"interval-then-temporal-{i}-{j}", sql, rng, PROBING_INPUTS)
              for i, sql in enumerate(PROBING_QUERIES) for j in range(2)]
    flink = run_in_flink(cases)
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(lambda c: run_case(spark, c), cases))
    for c, outcome in zip(cases, outcomes):
        assert_ok(outcome)
        for i, run in enumerate(outcome["runs"]):
            assert all(kind == "+I" for kind, _ in run["changelog"]), f"{c['name']} run {i}: {run['changelog']}"
        got, want = without_flush(outcome["runs"][-1]["result"]), without_flush(flink[c["name"]])
        assert got == want, (f"{c['sql']}\nstreamjoin only {got - want}\nFlink only {want - got}\n{json.dumps(c)}")


def test_scenarios(spark):
    """The held-back watermark, run by run (the case's description tells the story)."""
    assert CASES
    cases_pass(spark, [], CASES)


def test_a_bounded_join_of_an_interval_joins_rows_is_an_interval_join():
    specs = {n: InputSpec.from_dict(n, spec) for n, spec in INPUTS.items()}
    plan = compile_sql("m", cascade_sql("INNER", "LEFT", "r", (-5, 0, -2, 3)), specs)
    assert plan.root.time_bound is not None and plan.root.left.time_bound is not None
    assert "left join j2 ON `r__k` = `s__k` interval `r__ts` - `s__ts` in [-3 seconds, 2 seconds]" in plan.explain()
    held_back = "(on the side of j1's rows, its watermark held back by 5 seconds)"
    assert f"j2: a row leaves state once the watermark {held_back}" in describe(plan)
    # a regular join's rows carry no time attribute, in Flink either: a bound on them stays a residual
    regular = ("SELECT l.v FROM l JOIN r ON l.k = r.k JOIN s ON l.k = s.k "
               "AND s.ts BETWEEN l.ts AND l.ts + INTERVAL '3' SECOND")
    assert not compile_sql("m", regular, specs).is_interval
    # a temporal join's rows carry the probe's time: a bound on it makes an interval join
    upsert = InputSpec.from_dict("v", {**VERSIONED, "changelog_format": "upsert"})
    plan = compile_sql("m", temporal_sql("LEFT", "LEFT", (0, 4)), {**specs, "v": upsert})
    assert plan.root.time_bound is not None and plan.root.left.temporal is not None
    inputs = describe(plan).split("\ninputs:\n", 1)[1].split("\n\n", 1)[0]  # only the probes must be insertions
    assert "l: changelog_format changelog; event time ts; must be append-only: the interval join j2 reads it" in inputs
    assert "v: changelog_format upsert; event time ts; inserts, updates and deletes" in inputs


def test_a_temporal_join_probes_with_an_interval_joins_rows_by_a_time_they_never_pad():
    specs = {n: InputSpec.from_dict(n, spec) for n, spec in PROBING_INPUTS.items()}
    plan = compile_sql("m", PROBING_QUERIES[0], specs)
    assert plan.root.temporal is not None and plan.root.left.time_bound is not None
    padded = PROBING_QUERIES[2].replace("AS OF l.ts", "AS OF r.ts")
    assert ("FOR SYSTEM_TIME AS OF after the interval join j1 must name an event time its rows keep and never pad "
            "with NULL (l.ts), not r.ts") in compile_error("m", padded, PROBING_INPUTS)


def test_retractions_that_reach_an_interval_join_from_a_temporal_join_fail_the_run(spark):
    """A changelog probe input may retract a probe the temporal join emitted; the interval join of its
    rows needs them append-only, as in Flink (whose planner refuses an updating input there)."""
    case = {"name": "probe-retracted", "sql": temporal_sql("INNER", "LEFT", (-2, 0)),
            "inputs": {**TEMPORAL_INPUTS, "l": {**INPUTS["l"], "changelog_format": "changelog"}},
            "runs": [{"changes": {"l": [["+I", [1, 1, t(5)]]], "v": [["+I", [1, 50, t(1)]]],
                                  "s": [["+I", [1, 2, t(4)]]]}},
                     {"changes": {"l": [["+I", [2, 3, t(10)]]], "v": [["+I", [3, 51, t(10)]]],
                                  "s": [["+I", [9, 4, t(10)]]]}},
                     {"changes": {"l": [["-D", [1, 1, t(5)]]]},
                      "expect_error": "input 'l': interval joins need append-only inputs, as in Flink: 1 change(s) "
                                      "of kind -U/+U/-D reached the interval join j2 from the rows of j1"}]}
    outcome = run_case(spark, case)
    assert_ok(outcome)
    assert outcome["runs"][1]["changelog"] == [["+I", [1, 50, 2]]]
