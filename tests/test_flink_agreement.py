"""streamjoin and Apache Flink agree: random regular-join changelogs, the same SQL, the same final result.

The cases are drawn with a seeded generator (duplicates, NULL keys, updates, deletes, several
runs) and sent to Flink in one batch through the oracle in tests/flink_oracle (real PyFlink).
"""
from __future__ import annotations

import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "flink_oracle"))

from client import run_in_flink  # noqa: E402
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
