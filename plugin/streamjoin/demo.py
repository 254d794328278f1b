"""A self-contained tour of the Python API: an orders ⋈ prices LEFT JOIN over three runs.

    python -m streamjoin.demo [--root DIR]

Each run appends a batch of changes to the inputs' Delta changelogs, performs one incremental
run and prints the changes it consumed, the changelog it emitted and the result after it.
"""
from __future__ import annotations

import argparse
import tempfile

from .conformance import CaseRunner
from .runtime.run import run_once
from .session import local_session

CASE = {
    "name": "order_prices",
    "inputs": {
        "orders": {"columns": [["order_id", "int"], ["item", "string"]], "unique_key": ["order_id"]},
        "prices": {"columns": [["order_id", "int"], ["price", "int"]], "unique_key": ["order_id"]},
    },
    "sql": "SELECT o.order_id, o.item, p.price FROM orders o LEFT JOIN prices p ON o.order_id = p.order_id",
    "config": {"output_unique_key": ["order_id"]},
    "runs": [
        {"changes": {"orders": [["+I", [1, "book"]], ["+I", [2, "pen"]]], "prices": [["+I", [1, 40]]]}},
        {"changes": {"prices": [["+I", [2, 3]], ["-U", [1, 40]], ["+U", [1, 35]]]}},
        {"changes": {"orders": [["-D", [2, "pen"]], ["+I", [3, "ink"]]]}},
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m streamjoin.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="where the Delta tables go (default: a temporary folder)")
    args = parser.parse_args()
    spark = local_session(app_name="streamjoin-demo")
    root = args.root or tempfile.mkdtemp(prefix="streamjoin-demo-")
    runner = CaseRunner(spark, CASE, root)
    print(runner.plan.explain(), "\n")
    for i, run in enumerate(CASE["runs"]):
        runner.append_changes(i, run["changes"])
        report = run_once(spark, runner.plan, runner.tables)
        print(report.summary())
        for name, changes in run["changes"].items():
            for kind, row in changes:
                print(f"  in  {name:7} {kind} {tuple(row)}")
        for kind, row in runner.changelog(report.run_id):
            print(f"  out {kind} {row}")
        print("  result:", sorted(runner.result()), "\n")
    print(f"Delta tables under {root}")


if __name__ == "__main__":
    main()
