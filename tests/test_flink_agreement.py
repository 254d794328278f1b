"""streamjoin and Apache Flink agree: random regular-join changelogs, the same SQL, the same final result.

The cases are drawn with a seeded generator (duplicates, NULL keys, updates, deletes, several
runs) and sent to Flink in one batch through the oracle in tests/flink_oracle (real PyFlink).
"""
from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))

from client import run_in_flink, run_reports  # noqa: E402
from compare import same_result  # noqa: E402

from streamjoin.conformance import run_case  # noqa: E402

QUERIES = [
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l JOIN r ON l.k = r.k",
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l LEFT JOIN r ON l.k = r.k AND l.v > r.w",
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l RIGHT JOIN r ON l.k = r.k",
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l FULL OUTER JOIN r ON l.k = r.k",
    "SELECT l.k, l.v FROM l WHERE EXISTS (SELECT 1 FROM r WHERE r.k = l.k AND r.w < 3)",
    "SELECT l.k, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.k = l.k)",
    "SELECT l.k, l.v FROM l WHERE l.k IN (SELECT r.k FROM r)",
    "SELECT l.k AS lk, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k WHERE l.v < 3",
]


def random_case(name: str, sql: str, rng: random.Random) -> dict:
    live: dict[str, list[list]] = {"l": [], "r": []}
    runs = []
    for _ in range(3):
        changes: dict[str, list] = {}
        for side in ("l", "r"):
            rows = live[side]
            for _ in range(rng.randint(0, 6)):
                op = rng.choice(["insert", "insert", "delete", "update"]) if rows else "insert"
                if op == "insert":
                    row = list(rng.choice(rows)) if rows and rng.random() < 0.3 else [rng.choice([None, 1, 2, 3]), rng.randint(0, 3)]
                    rows.append(row)
                    changes.setdefault(side, []).append(["+I", row])
                else:
                    old = rows.pop(rng.randrange(len(rows)))
                    if op == "delete":
                        changes.setdefault(side, []).append(["-D", old])
                    else:
                        new = [old[0], rng.randint(0, 3)]
                        rows.append(new)
                        changes.setdefault(side, []).extend([["-U", old], ["+U", new]])
        runs.append({"changes": changes})
    return {"name": name, "sql": sql, "config": {}, "runs": runs,
            "inputs": {"l": {"columns": [["k", "int"], ["v", "int"]]}, "r": {"columns": [["k", "int"], ["w", "int"]]}}}


def test_final_results_agree_with_flink(spark):
    rng = random.Random(20261122)
    cases = [random_case(f"random-{i}", QUERIES[i % len(QUERIES)], rng) for i in range(len(QUERIES))]
    flink = run_in_flink(cases)
    with ThreadPoolExecutor(max_workers=3) as pool:
        ours = list(pool.map(lambda c: run_case(spark, c), cases))
    for case, outcome in zip(cases, ours):
        assert outcome["ok"], f"{case['name']}: {outcome['error']}"
        same, why = same_result(flink[case["name"]], outcome["runs"][-1]["result"], None)
        assert same, f"{case['name']} ({case['sql']}): streamjoin differs from Flink: {why}"


# -- event-time temporal joins, run by run -----------------------------------------------------------
TEMPORAL_QUERIES = [
    "SELECT p.k, p.v, p.ts, r.w, r.ts AS rts FROM p JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k = r.k",
    "SELECT p.k, p.v, p.ts, r.w FROM p LEFT JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k = r.k AND r.w > p.v",
    "SELECT p.k, p.v, p.ts, r.w FROM p LEFT JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k = r.k WHERE p.v < 3",
    "SELECT p.k, p.v, p.ts, r.w FROM p LEFT JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k IS NOT DISTINCT FROM r.k",
]
TEMPORAL_INPUTS = {"p": {"columns": [["k", "int"], ["v", "int"], ["ts", "timestamp"]], "event_time": "ts"},
                   "r": {"columns": [["k", "int"], ["w", "int"], ["ts", "timestamp"]], "unique_key": ["k"],
                         "event_time": "ts"}}


def _ts(seconds: int) -> str:
    return f"2024-01-01 00:{seconds // 60:02d}:{seconds % 60:02d}"


def random_temporal_case(name: str, sql: str, rng: random.Random) -> tuple[dict, list[int | None]]:
    """Probe rows (NULL keys, duplicates, ties) and versions (inserts, updates as -U/+U, deletions)
    that all arrive after the watermark, with its value after each run. Every run raises the
    watermark, so Flink emits a run's due probes when that run's watermark arrives. (A late row
    is joined by Flink when the next watermark is processed, which its two input channels may
    reach before or after the late row: nothing to compare run by run; tests/cases covers it.)"""
    top = {"p": 0, "r": 0}
    versions: list[tuple[int, int, int]] = []
    runs, marks = [], []
    for _ in range(3):
        floor = min(top.values()) + 1
        changes: dict[str, list] = {"p": [], "r": []}
        for _ in range(rng.randint(1, 5)):
            live = [x for x in versions if x[2] >= floor]
            if live and rng.random() < 0.4:
                k, w, ts = rng.choice(live)
                if rng.random() < 0.5:
                    changes["r"].append(["-D", [k, w, _ts(ts)]])
                else:
                    new = (k, rng.randint(0, 3), floor + rng.randint(0, 4))
                    changes["r"] += [["-U", [k, w, _ts(ts)]], ["+U", [new[0], new[1], _ts(new[2])]]]
                    versions.append(new)
            else:
                new = (rng.randint(1, 3), rng.randint(0, 3), floor + rng.randint(0, 4))
                changes["r"].append(["+I", [new[0], new[1], _ts(new[2])]])
                versions.append(new)
        changes["r"].append(["+I", [rng.randint(1, 3), rng.randint(0, 3), _ts(floor + 5)]])
        rows = [[rng.choice([None, 1, 2, 3]), rng.randint(0, 3), _ts(floor + rng.randint(0, 4))]
                for _ in range(rng.randint(1, 5))]
        rows += [list(rng.choice(rows)) for _ in range(rng.randint(0, 1))] + [[2, 0, _ts(floor + 6)]]
        changes["p"] = [["+I", r] for r in rows]
        # probe retractions, as a changelog probe side brings them: of a row of this run, and of the row the
        # last run left waiting (each cancels before it is due; tests/test_temporal_join.py has late ones)
        changes["p"] += [["-D", list(rng.choice(rows[:-1]))] for _ in range(rng.randint(0, 1))]
        if runs and rng.random() < 0.5:
            changes["p"].append(["-U", [2, 0, _ts(floor)]])
            changes["p"].append(["+U", [2, rng.randint(0, 3), _ts(floor)]])
        for side, kinds in changes.items():
            top[side] = max([top[side]] + [int(r[2][-5:-3]) * 60 + int(r[2][-2:]) for _, r in kinds])
        marks.append(min(top.values()))
        runs.append({"changes": changes})
    return {"name": name, "sql": sql, "config": {}, "runs": runs, "inputs": TEMPORAL_INPUTS}, marks


def test_temporal_joins_agree_with_flink_run_by_run(spark):
    """What each run emits equals what Flink emits when that run's watermark arrives: Flink's rows carry
    CURRENT_WATERMARK as the join emitted them (the watermark before the one that fired them); rows
    Flink emits only at the end of its bounded input (watermark +inf) wait in streamjoin's state."""
    rng = random.Random(20261124)
    cases, marks = [], {}
    for i in range(2 * len(TEMPORAL_QUERIES)):
        case, m = random_temporal_case(f"temporal-{i}", TEMPORAL_QUERIES[i % len(TEMPORAL_QUERIES)], rng)
        cases.append(case)
        marks[case["name"]] = m
    tagged = [{**c, "sql": c["sql"].replace(" FROM p", ", CURRENT_WATERMARK(p.ts) AS emitted_after FROM p", 1)}
              for c in cases]
    reports, stderr = run_reports(tagged)
    with ThreadPoolExecutor(max_workers=3) as pool:
        ours = list(pool.map(lambda c: run_case(spark, c), cases))
    for case, report, outcome in zip(cases, reports, ours):
        assert report["ok"], f"{case['name']}: Flink failed: {report['error']}\n{stderr[-5000:]}"
        assert outcome["ok"], f"{case['name']}: {outcome['error']}"
        w = marks[case["name"]]
        fired_after = {None if i == 0 else _ts(w[i - 1]): i for i in range(len(w))}  # each run raises W
        per_run: list[list] = [[] for _ in w]
        for row in report["result"]:
            tag = row[-1] and row[-1].split(".")[0]
            if tag != _ts(w[-1]):  # not emitted only at the end of Flink's input
                per_run[fired_after[tag]].append(row[:-1])
        columns = report["columns"][:-1]
        for i, run in enumerate(outcome["runs"]):
            assert all(kind == "+I" for kind, _ in run["changelog"]), run["changelog"]
            same, why = same_result(per_run[i], [r for _, r in run["changelog"]], columns)
            assert same, f"{case['name']} run {i} ({case['sql']}): streamjoin differs from Flink: {why}\n{json.dumps(case)}"


# -- temporal joins in a chain (Flink's multi temporal join) ------------------------------------------
CHAINED = ["SELECT p.k, p.v, p.ts, r.w, s.w AS sw FROM p LEFT JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k = r.k "
           "LEFT JOIN s FOR SYSTEM_TIME AS OF p.ts AS s ON p.k = s.k",
           "SELECT p.k, p.v, r.w, s.w AS sw FROM p JOIN r FOR SYSTEM_TIME AS OF p.ts AS r ON p.k = r.k "
           "JOIN s FOR SYSTEM_TIME AS OF p.ts AS s ON p.k = s.k AND s.w >= p.v"]


def chained_case(name: str, sql: str, rng: random.Random) -> dict:
    """Probes, and versions of two versioned inputs (`random_temporal_case`'s; the second's watermark 3 s behind,
    so the second join's lags the first's), then a run that raises every input's time past them, so Flink's end
    of input fires nothing streamjoin holds back."""
    a, _ = random_temporal_case("a", "", rng)
    b, _ = random_temporal_case("b", "", rng)
    runs = [{"changes": {**ra["changes"], "s": rb["changes"]["r"]}} for ra, rb in zip(a["runs"], b["runs"])]
    runs.append({"changes": {side: [["+I", [9, 0, _ts(3000 if side == "p" else 3010)]]] for side in ("p", "r", "s")}})
    return {"name": name, "sql": sql, "config": {}, "runs": runs,
            "inputs": {**TEMPORAL_INPUTS, "s": {**TEMPORAL_INPUTS["r"], "watermark_delay": "3 seconds"}}}


def test_chained_temporal_joins_agree_with_flink(spark):
    """A temporal join probing with another's rows (by the same time, as Flink's multi temporal join does),
    probes updating and deleting rows: the same result as Flink's."""
    rng = random.Random(20261201)
    cases = [chained_case(f"chained-{i}", CHAINED[i % len(CHAINED)], rng) for i in range(4)]
    flink = run_in_flink(cases)
    with ThreadPoolExecutor(max_workers=2) as pool:
        ours = list(pool.map(lambda c: run_case(spark, c), cases))
    for case, outcome in zip(cases, ours):
        assert outcome["ok"], f"{case['name']}: {outcome['error']}"
        assert len(flink[case["name"]]) > 1, flink[case["name"]]
        same, why = same_result(flink[case["name"]], outcome["runs"][-1]["result"], None)
        assert same, f"{case['name']} ({case['sql']}): streamjoin differs from Flink: {why}\n{json.dumps(case)}"

