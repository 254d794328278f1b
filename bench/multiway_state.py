"""State size and run time of the multi-way join against the chain of binary joins.

For a 3-way and a 4-way join on one key, each strategy loads the same changelogs (`--rows`
per input, keys drawn from `--keys` values) in a first run, then applies `--changes`
changes (inserts, updates, deletes spread over the inputs) in a second run. State size is
read from the Delta logs of the state tables: the sum of `num_records` and of file `size`
of their live files after both runs. Prints a Markdown table.

The binary chain's query plans grow with every join above a join (each reads its child's
output several times, and every read repeats the child's plan, state file lists included),
so its 4-way runs need more than Spark's default 1 GiB of driver heap: `--driver-memory`.

    .venv/bin/python bench/multiway_state.py [--rows 20000] [--keys 10000] [--changes 2000] [--driver-memory 4g]
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: `python bench/multiway_state.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import tempfile
import time

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streamjoin.sql.compiler import compile_sql
from streamjoin.runtime.run import run_once
from streamjoin.session import local_session
from streamjoin.spec import InputSpec, ModelConfig
from streamjoin.storage.tables import ModelTables

QUERIES = {
    3: "SELECT a.id, a.v, b.id AS b_id, b.v AS b_v, c.id AS c_id, c.v AS c_v "
       "FROM t0 a JOIN t1 b ON a.k = b.k LEFT JOIN t2 c ON b.k = c.k",
    4: "SELECT a.id, a.v, b.id AS b_id, b.v AS b_v, c.id AS c_id, c.v AS c_v, d.id AS d_id, d.v AS d_v "
       "FROM t0 a JOIN t1 b ON a.k = b.k LEFT JOIN t2 c ON b.k = c.k LEFT JOIN t3 d ON a.k = d.k",
}
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64()), ("_row_kind", pa.string())])


def initial(rng: np.random.Generator, rows: int, keys: int) -> pa.Table:
    return pa.table({"id": np.arange(rows, dtype=np.int64), "k": rng.integers(0, keys, rows),
                     "v": rng.integers(0, 1000, rows), "_row_kind": ["+I"] * rows}, schema=SCHEMA)


def changes(rng: np.random.Generator, first: pa.Table, count: int, keys: int) -> pa.Table:
    """`count` changes of rows of `first`: a quarter inserts, a quarter deletes, half update pairs."""
    n = count // 4
    picked = rng.choice(first.num_rows, size=2 * n, replace=False)
    deleted, updated = first.take(picked[:n]), first.take(picked[n:])
    start = first.num_rows
    inserted = {"id": np.arange(start, start + n, dtype=np.int64), "k": rng.integers(0, keys, n),
                "v": rng.integers(0, 1000, n)}
    cols = {c: np.concatenate([inserted[c], deleted[c].to_numpy(), updated[c].to_numpy(), updated[c].to_numpy()])
            for c in ("id", "k")}
    cols["v"] = np.concatenate([inserted["v"], deleted["v"].to_numpy(), updated["v"].to_numpy(),
                                updated["v"].to_numpy() + 1])
    kinds = ["+I"] * n + ["-D"] * n + ["-U"] * n + ["+U"] * n
    return pa.table({**cols, "_row_kind": kinds}, schema=SCHEMA)


def state_size(tables: ModelTables) -> tuple[int, int, int]:
    """(tables, rows, bytes) of the live files of every state table, from the Delta logs."""
    rows = size = 0
    paths = tables.state_tables()
    for path in paths:
        actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pydict()
        rows += sum(int(x or 0) for x in actions["num_records"])
        size += sum(int(x) for x in actions["size_bytes"])
    return len(paths), rows, size


def measure(spark, root: str, n: int, strategy: str, args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(7)
    specs, first = {}, {}
    for i in range(n):
        name = f"t{i}"
        location = f"{root}/inputs/{n}-way-{strategy}/{name}"
        first[name] = initial(rng, args.rows, args.keys)
        write_deltalake(location, first[name], mode="append")
        specs[name] = InputSpec.from_dict(name, {"columns": [["id", "bigint"], ["k", "bigint"], ["v", "bigint"]],
                                                 "unique_key": ["id"], "location": location})
    plan = compile_sql(f"bench{n}", QUERIES[n], specs, ModelConfig(join_strategy=strategy))
    tables = ModelTables(f"{root}/models/{strategy}", plan.model)
    started = time.time()
    run_once(spark, plan, tables)
    load = time.time() - started
    for i in range(n):
        write_deltalake(specs[f"t{i}"].location, changes(rng, first[f"t{i}"], args.changes // n, args.keys), mode="append")
    started = time.time()
    report = run_once(spark, plan, tables)
    change = time.time() - started
    count, rows, size = state_size(tables)
    return {"n": n, "strategy": strategy, "load_s": load, "change_s": change, "state_tables": count,
            "state_rows": rows, "state_bytes": size, "out": report.rows_out}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows per input in the first run")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct join key values")
    parser.add_argument("--changes", type=int, default=2_000, help="changes in the second run, over all inputs")
    parser.add_argument("--driver-memory", default="4g", help="Spark driver heap (the binary 4-way plans are large)")
    args = parser.parse_args(argv)
    spark = local_session(app_name="bench-multiway", conf={"spark.driver.memory": args.driver_memory})
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-multiway-") as root:
        for n in (3, 4):
            for strategy in ("multi", "binary"):  # multi first: the JVM's first, cold run counts against it
                results.append(measure(spark, root, n, strategy, args))
                print(results[-1], file=sys.stderr, flush=True)
    print(f"{args.rows} rows per input over {args.keys} keys, then {args.changes} changes\n")
    print("| join | strategy | state tables | state rows | state MiB | load run s | change run s | change run out (+/-) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['n']}-way | {r['strategy']} | {r['state_tables']} | {r['state_rows']:,} | "
              f"{r['state_bytes'] / 2**20:.2f} | {r['load_s']:.1f} | {r['change_s']:.1f} | "
              f"{r['out'].get('+')}/{r['out'].get('-')} |")
    for n in (3, 4):
        b, m = (next(r for r in results if r["n"] == n and r["strategy"] == s) for s in ("binary", "multi"))
        print(f"\n{n}-way: binary holds {b['state_rows'] / m['state_rows']:.1f}x the rows and "
              f"{b['state_bytes'] / m['state_bytes']:.1f}x the bytes of multi; its load run takes "
              f"{b['load_s'] / m['load_s']:.1f}x and its change run {b['change_s'] / m['change_s']:.1f}x the time")


if __name__ == "__main__":
    main()
