"""Command line: `python -m streamjoin status PATH...` and `python -m streamjoin maintain PATH...`.

PATH is a model's folder, or any folder above models' folders (a dbt project's state root,
e.g. `.streamjoin/state`); every model found below it is reported or maintained.

Exit status: 0 done; 1 no model found; 2 an error stopped the command; 3 (maintain) some models
were skipped because a run held them or left a run incomplete (the others were maintained).
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
    status.add_argument("--project-dir", metavar="DIR",
                        help="the dbt project the models belong to: models its manifest does not list as "
                             "streaming_join models are marked orphaned")
    status.add_argument("--target-path", metavar="DIR",
                        help="where dbt wrote the project's manifest.json (default: DIR/target, as dbt's)")
    maintain = commands.add_parser("maintain", help="compact and vacuum the models' tables, trim their changelogs")
    maintain.add_argument("paths", nargs="+", metavar="PATH")
    maintain.add_argument("--vacuum-hours", type=float, default=168,
                          help="keep files that versions of the last N hours still read (default 168)")
    maintain.add_argument("--changelog-keep-runs", type=int, default=None,
                          help="drop changelog files holding only changes older than the last N runs (default: keep all)")
    args = parser.parse_args(argv)

    from . import status as status_module
    from .maintain import maintain_all

    try:
        if args.command == "status":
            if args.target_path and not args.project_dir:
                parser.error("--target-path needs --project-dir (the project whose manifest lists the models)")
            current = (status_module.project_models(status_module.manifest_path(args.project_dir, args.target_path))
                       if args.project_dir else None)
            for path in args.paths:
                print(status_module.report(path, limit=args.runs, current=current), end="")
            return 0
        models = [m for path in args.paths for m in status_module.model_tables(path)]
        if not models:
            print(f"no streamjoin model tables under {', '.join(args.paths)}", file=sys.stderr)
            return 1
        maintained = maintain_all(models, vacuum_hours=args.vacuum_hours, changelog_keep_runs=args.changelog_keep_runs)
        for model, done in maintained.done.items():
            print(f"model {model}:")
            print(status_module.render([vars(t) for t in done]))
        for exc in maintained.held.values():
            print(f"skipped: {exc}", file=sys.stderr)
        if maintained.held:
            print(f"error: {len(maintained.held)} of {len(models)} model(s) not maintained "
                  f"({', '.join(maintained.held)}): rerun maintain once they are free", file=sys.stderr)
            return 3
        return 0
    except StreamJoinError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
