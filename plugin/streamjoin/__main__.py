"""Command line: `python -m streamjoin status PATH...` and `python -m streamjoin maintain PATH...`.

PATH is a model's folder, or any folder above models' folders (a dbt project's state root,
e.g. `.streamjoin/state`); every model found below it is reported or maintained.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .errors import StreamJoinError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamjoin", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status", help="recent runs and table sizes of the models under PATH")
    status.add_argument("paths", nargs="+", metavar="PATH")
    status.add_argument("--runs", type=int, default=10, help="how many recent runs to show (default 10)")
    maintain = commands.add_parser("maintain", help="compact and vacuum the models' tables, trim their changelogs")
    maintain.add_argument("paths", nargs="+", metavar="PATH")
    maintain.add_argument("--vacuum-hours", type=float, default=168,
                          help="keep files that versions of the last N hours still read (default 168)")
    maintain.add_argument("--changelog-keep-runs", type=int, default=None,
                          help="drop changelog files holding only changes older than the last N runs (default: keep all)")
    args = parser.parse_args(argv)

    from . import status as status_module
    from .maintain import maintain as maintain_model

    try:
        if args.command == "status":
            for path in args.paths:
                print(status_module.report(path, limit=args.runs), end="")
            return 0
        models = [m for path in args.paths for m in status_module.model_tables(path)]
        if not models:
            print(f"no streamjoin model tables under {', '.join(args.paths)}", file=sys.stderr)
            return 1
        for tables in models:
            done = maintain_model(tables, vacuum_hours=args.vacuum_hours, changelog_keep_runs=args.changelog_keep_runs)
            print(f"model {tables.model}:")
            print(status_module.render([vars(t) for t in done]))
        return 0
    except StreamJoinError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
