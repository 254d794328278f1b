"""streamjoin's lookup join and Apache Flink's agree run by run: random cases, the same SQL, the same rows.

Flink runs each case through its processing-time temporal join against a real lookup source: the
`snapshot-lookup` connector of tests/flink_oracle (run_lookup.py), which serves each run's probe rows
the dimension as that run leaves it. The cases are drawn with a seeded generator: INNER and LEFT
joins, residual conditions on either side, a WHERE filter, a derived probe with a computed key,
NULL keys, duplicate dimension rows and probe rows, dimension updates and deletes, and runs in which
either side has no change. The queries select `d.k AS dk` (never NULL for a matched row) so the
null-padded rows can be counted, and never the processing-time column (its value is a wall-clock time).
"""
from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))

from client import run_lookup_reports  # noqa: E402
from compare import same_result  # noqa: E402

from streamjoin.conformance import run_case  # noqa: E402

LOOKUP = "FOR SYSTEM_TIME AS OF p.pt AS d"
QUERIES = [
    f"SELECT p.id, p.k, d.k AS dk, d.w, d.name, d.score, d.flag, d.qty FROM p JOIN d {LOOKUP} ON p.k = d.k",
    f"SELECT p.id, p.v, d.k AS dk, d.name FROM p LEFT JOIN d {LOOKUP} ON p.k = d.k AND d.name <> 'c' AND d.flag",
    f"SELECT p.id, p.v, d.k AS dk, d.w FROM p LEFT JOIN d {LOOKUP} ON p.k = d.k AND p.v > 1",
    f"SELECT p.id, p.v, d.k AS dk, d.w FROM p LEFT JOIN d {LOOKUP} ON p.k = d.k AND d.w <= p.v WHERE p.v <> 0",
    f"SELECT p.id, p.tag, d.k AS dk, d.score FROM p JOIN d {LOOKUP} ON p.tag = d.name WHERE d.score > 0.5",
    "SELECT q.id, q.twice, d.k AS dk, d.name FROM (SELECT id, k - 1 AS k1, v * 2 AS twice, pt FROM p WHERE id > 0) q "
    "LEFT JOIN d FOR SYSTEM_TIME AS OF q.pt AS d ON q.k1 = d.k",
    f"SELECT p.id, d.k AS dk, d.name, d.score FROM p LEFT JOIN d {LOOKUP} ON p.k = d.k AND p.v = d.w",
    f"SELECT p.id, d.k AS dk, d.name, d.qty FROM p JOIN d {LOOKUP} ON p.k = d.k AND d.qty > 1",
]
PROBE = {"columns": [["id", "int"], ["k", "int"], ["v", "int"], ["tag", "string"]], "proc_time": "pt"}
DIMENSION = {"columns": [["k", "int"], ["w", "int"], ["name", "string"], ["score", "double"], ["flag", "boolean"],
                         ["qty", "bigint"]]}
UPSERT = {**DIMENSION, "changelog_format": "upsert", "unique_key": ["k"]}


def dimension_row(rng: random.Random, key: int | None) -> list[Any]:
    return [key, rng.randint(0, 3), rng.choice(["a", "b", "c", None]), rng.choice([0.25, 0.75, 1.5, None]),
            rng.choice([True, True, False, None]), rng.choice([1, 2, 3_000_000_000])]


def dimension_changes(rng: random.Random, live: list[list[Any]], upsert: bool) -> list[list[Any]]:
    """A run's dimension changes: inserts (some duplicating a live row), and, unless `upsert`
    (whose rows replace their key's row), deletes and updates as -U/+U of live rows."""
    changes: list[list[Any]] = []
    for _ in range(rng.randint(2, 8)):
        op = rng.choice(["insert", "insert", "insert", "delete", "update"]) if live and not upsert else "insert"
        if op == "insert":
            row = list(rng.choice(live)) if live and rng.random() < 0.3 else dimension_row(rng, rng.choice([None, 1, 2, 3]))
            live.append(row)
            changes.append([rng.choice(["+I", "+U"]) if upsert else "+I", row])
        else:
            old = live.pop(rng.randrange(len(live)))
            if op == "delete":
                changes.append(["-D", old])
            else:
                new = dimension_row(rng, old[0])
                live.append(new)
                changes += [["-U", old], ["+U", new]]
    return changes


def random_lookup_case(name: str, sql: str, rng: random.Random, *, upsert: bool) -> dict[str, Any]:
    """Three runs; in each, either side has no change with probability 0.2."""
    live: list[list[Any]] = []
    runs = []
    for _ in range(3):
        changes: dict[str, list] = {}
        if rng.random() >= 0.2:
            changes["d"] = dimension_changes(rng, live, upsert)
        if rng.random() >= 0.2:
            rows = [[rng.randint(0, 9), rng.choice([None, 1, 1, 2, 2, 3, 3, 4]), rng.randint(0, 3),
                     rng.choice(["a", "b", "c", None])] for _ in range(rng.randint(2, 8))]
            rows += [list(rng.choice(rows)) for _ in range(rng.randint(0, 2))]
            changes["p"] = [["+I", row] for row in rows]
        runs.append({"changes": changes})
    probe = {**PROBE, "changelog_format": rng.choice(["append", "changelog"])}
    return {"name": name, "sql": sql, "config": {}, "runs": runs,
            "inputs": {"p": probe, "d": UPSERT if upsert else DIMENSION}}


def test_lookup_joins_agree_with_flink_run_by_run(spark):
    """What each run emits equals what Flink emits for that run (Flink runs while Spark does)."""
    rng = random.Random(20261127)
    cases = [random_lookup_case(f"lookup-{i}", sql, rng, upsert=i % 4 == 3) for i, sql in enumerate(QUERIES)]
    assert {side for c in cases for run in c["runs"] for side in "pd" if side not in run["changes"]} == {"p", "d"}
    with ThreadPoolExecutor(max_workers=4) as pool:  # the Flink process, and three cases at a time on Spark
        flink_job = pool.submit(run_lookup_reports, cases)
        ours = list(pool.map(lambda c: run_case(spark, c), cases))
        reports, stderr = flink_job.result()
    matched = padded = 0
    for case, report, outcome in zip(cases, reports, ours):
        assert report["ok"], f"{case['name']}: Flink failed: {report['error']}\n{stderr[-5000:]}"
        assert outcome["ok"], f"{case['name']}: {outcome['error']}"
        assert len(report["runs"]) == len(outcome["runs"]) == len(case["runs"])
        dk = [name for name, _ in report["columns"]].index("dk")
        for i, (flink, run) in enumerate(zip(report["runs"], outcome["runs"])):
            assert all(kind == "+I" for kind, _ in run["changelog"]), run["changelog"]
            same, why = same_result(flink, [row for _, row in run["changelog"]], report["columns"])
            assert same, f"{case['name']} run {i} ({case['sql']}): streamjoin differs from Flink: {why}\n{json.dumps(case)}"
            matched += sum(row[dk] is not None for row in flink)
            padded += sum(row[dk] is None for row in flink)
    assert matched >= 30 and padded >= 10, f"the cases join too little to check anything: {matched} matched, {padded} padded"
