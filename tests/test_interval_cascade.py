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

from scenario import assert_ok, cases_pass
from streamjoin.conformance import run_case
from streamjoin.explain import describe
from streamjoin.spec import InputSpec
from streamjoin.sql.compiler import compile_sql

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))
from client import run_in_flink  # noqa: E402

COLUMNS = [["k", "int"], ["v", "int"], ["ts", "timestamp"]]
INPUTS = {n: {"columns": COLUMNS, "event_time": "ts"} for n in "lrs"}
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


def random_on_time_case(name: str, sql: str, rng: random.Random) -> dict:
    """Three runs of rows at or after every watermark when they arrive (every delay 0: the first
    join's, of l and r, is the highest), NULL keys and duplicates, then a run far ahead in time (keys
    that match nothing) that expires every earlier row, as the end of Flink's bounded input does."""
    top = {n: 0 for n in INPUTS}
    runs, v = [], 0
    for _ in range(3):
        floor = min(top["l"], top["r"])
        changes: dict[str, list] = {}
        for n in INPUTS:
            rows = []
            for _ in range(rng.randint(0, 4)):
                v += 1
                rows.append([rng.choice([None, 1, 2, 2]), v, floor + rng.randint(0, 8)])
            rows += [list(rng.choice(rows)) for _ in range(rng.randint(0, 1)) if rows]
            changes[n] = [["+I", [k, v_, t(ts)]] for k, v_, ts in rows]
            top[n] = max([top[n]] + [ts for _, _, ts in rows])
        runs.append({"changes": changes})
    far = max(top.values()) + 3600
    runs.append({"changes": {n: [["+I", [100 + i, FLUSH, t(far)]]] for i, n in enumerate(INPUTS)}})
    return {"name": name, "sql": sql, "inputs": INPUTS, "config": {}, "runs": runs}


def without_flush(rows: list) -> Counter:
    return Counter(tuple(r) for r in rows if FLUSH not in r)


QUERIES = [
    cascade_sql("INNER", "INNER", "l", (-5, 0, -2, 3)),
    cascade_sql("INNER", "LEFT", "l", (-5, 0, -2, 3)),
    cascade_sql("LEFT", "LEFT", "l", (-3, 2, 0, 4)),
    cascade_sql("INNER", "RIGHT", "r", (0, 4, -3, 1)),
    cascade_sql("RIGHT", "FULL", "r", (-2, 2, -4, 0)),
    cascade_sql("FULL", "INNER", "l", (-4, 1, -1, 2)),
    cascade_sql("LEFT", "INNER", "r", (-3, 3, 0, 3)),  # by the side the first join pads: NULL times match nothing
]


def test_cascaded_interval_joins_agree_with_flink(spark):
    """Every run's changelog is insert-only (a regular second join padded early and retracted
    later), and the result is Flink's, where the far run has expired every earlier row: the second
    join loses no pair (without the first join's held-back watermark it would expire s rows that
    later rows of the first join match)."""
    rng = random.Random(20261202)
    cases = [random_on_time_case(f"interval-cascade-{i}-{j}", sql, rng) for i, sql in enumerate(QUERIES)
             for j in range(2)]
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
    assert "j2: a row leaves state once the watermark (on the side of j1's rows, its watermark held back by 5 seconds)" \
        in describe(plan)
    # a regular join's rows carry no time attribute, in Flink either: a bound on them stays a residual
    regular = ("SELECT l.v FROM l JOIN r ON l.k = r.k JOIN s ON l.k = s.k "
               "AND s.ts BETWEEN l.ts AND l.ts + INTERVAL '3' SECOND")
    assert not compile_sql("m", regular, specs).is_interval
