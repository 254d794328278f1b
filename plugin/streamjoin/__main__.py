"""streamjoin's command line: the state, upkeep and plan of streaming_join models.

`python -m streamjoin status PATH...`, `python -m streamjoin maintain PATH...`,
`python -m streamjoin explain PROJECT_DIR --select MODEL` and `python -m streamjoin class-archive`.

PATH is a model's folder, or any folder above models' folders (a dbt project's state root,
e.g. `.streamjoin/state`); every model found below it is reported or maintained. `explain` asks
dbt (in this process: `dbt run-operation streamjoin_explain`) to compile MODEL of the project
and prints what it computes and keeps (`streamjoin.explain`). `class-archive` builds the Spark
driver's class archive (`streamjoin.class_archive`) if it is missing (later drivers start faster)
and removes those of Spark installations that are gone.

Exit status: 0 done; 1 no model found; 2 an error stopped the command; 3 (maintain) some models
were skipped because a run held them or left a run incomplete (the others were maintained).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from .errors import StreamJoinError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamjoin", description=__doc__.splitlines()[0],
                                     epilog=__doc__[__doc__.index("Exit status"):].rstrip())
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
    explain = commands.add_parser("explain", help="what a streaming_join model of a dbt project computes and keeps")
    explain.add_argument("project_dir", metavar="PROJECT_DIR")
    explain.add_argument("--select", "-s", required=True, metavar="MODEL", help="the model's name")
    explain.add_argument("--profiles-dir", metavar="DIR",
                         help="where profiles.yml is (default: $DBT_PROFILES_DIR, else PROJECT_DIR if it has one, "
                              "else dbt's default)")
    explain.add_argument("--target", "-t", help="the profile's target (default: the profile's default target)")
    explain.add_argument("--target-path", metavar="DIR", help="dbt's target folder (default: PROJECT_DIR/target)")
    archive = commands.add_parser("class-archive", help="build the Spark driver's class archive (faster start-up)")
    archive.add_argument("--force", action="store_true", help="build it again even if it exists")
    args = parser.parse_args(argv)
    if args.command == "class-archive":
        return build_class_archive(force=args.force)
    if args.command == "explain":
        return explain_model(args.project_dir, args.select, profiles_dir=args.profiles_dir, target=args.target,
                             target_path=args.target_path)

    from . import status as status_module
    from .maintain import maintain_all

    try:
        if args.command == "status":
            if args.runs < 1:
                status.error(f"--runs must be 1 or more, not {args.runs}")
            if args.target_path and not args.project_dir:
                status.error("--target-path needs --project-dir (the project whose manifest lists the models)")
        found = {path: status_module.model_tables(path) for path in args.paths}
        empty = [path for path, models in found.items() if not models]
        if empty:
            print(f"no streamjoin model tables under {', '.join(empty)}", file=sys.stderr)
        if len(empty) == len(found):
            return 1
        if args.command == "status":
            current = (status_module.project_models(status_module.manifest_path(args.project_dir, args.target_path))
                       if args.project_dir else None)
            for path in args.paths:
                if found[path]:
                    print(status_module.report(found[path], limit=args.runs, current=current), end="")
            return 0
        models = [m for path in args.paths for m in found[path]]
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


def build_class_archive(*, force: bool) -> int:
    """Build the archive unless it exists (and not `force`); say so when one was built."""
    import time

    from . import class_archive

    if class_archive.path().is_file() and not force:
        return 0
    started = time.monotonic()
    try:
        built = class_archive.build()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    removed = class_archive.prune(keep=built)
    stale = (f"; removed {len(removed)} older archive{'s' if len(removed) > 1 else ''} (Spark installations "
             f"gone or installed again)") if removed else ""
    print(f"Built the Spark driver's class archive in {time.monotonic() - started:.0f} s: {built}{stale}")
    return 0


def explain_model(project_dir: str, model: str, *, profiles_dir: str | None = None, target: str | None = None,
                  target_path: str | None = None) -> int:
    """Print what `model` of the dbt project computes and keeps. dbt prints the errors of its run;
    those that stop it before it starts (no project, no profile) are printed here."""
    from dbt.cli.exceptions import DbtUsageException
    from dbt.cli.main import dbtRunner

    if not os.path.isfile(os.path.join(project_dir, "dbt_project.yml")):
        print(f"error: {project_dir} is not a dbt project (it has no dbt_project.yml): pass the folder of the "
              "project whose model to explain", file=sys.stderr)
        return 2
    if profiles_dir is None and not os.environ.get("DBT_PROFILES_DIR") and \
            os.path.isfile(os.path.join(project_dir, "profiles.yml")):
        profiles_dir = project_dir
    options = {"--project-dir": project_dir, "--profiles-dir": profiles_dir, "--target": target,
               "--target-path": target_path}
    dbt_args = ["run-operation", "streamjoin_explain", "--args", json.dumps({"model": model}), "--quiet"]
    dbt_args += [part for option, value in options.items() if value for part in (option, value)]
    done = dbtRunner().invoke(dbt_args)
    if isinstance(done.exception, DbtUsageException):  # refused before dbt's logging started: dbt printed nothing
        print(f"error: {done.exception}", file=sys.stderr)
    return 0 if done.success else 2


if __name__ == "__main__":
    sys.exit(main())
