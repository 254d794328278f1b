"""Run dbt in its own process on the example project (or another), and read what it built.

Every dbt process starts its own local SparkSession, so the tests keep invocations few.
Tables are read back with delta-rs, without Spark.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from deltalake import DeltaTable

from jvm_options import SHORT_LIVED

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "example"  # the example project; it installs the repository root as the streamjoin package


@dataclass(frozen=True)
class Invocation:
    """One dbt process: exit code, console output and run_results by node name."""

    returncode: int
    output: str
    results: Dict[str, Dict[str, Any]]

    def statuses(self) -> Dict[str, str]:
        return {name: r["status"] for name, r in self.results.items()}


def dbt_command(args: Sequence[str], *, project: Path, local_dir: Path, profiles_dir: Optional[Path] = None,
                name: Optional[str] = None) -> Tuple[List[str], Dict[str, str]]:
    """The command line and environment of `dbt <args>` on `project` with its catalog and state in
    `local_dir`; a `name` gives the process target and log folders of its own (for processes at once)."""
    executable = Path(sys.executable).with_name("dbt")
    suffix = f"-{name}" if name else ""
    command = [str(executable), *args, "--project-dir", str(project),
               "--profiles-dir", str(profiles_dir or project), "--log-path", str(local_dir / f"logs{suffix}")]
    if args[0] != "deps":  # the one command that writes no target folder (and takes no --target-path)
        command += ["--target-path", str(local_dir / f"target{suffix}")]
    env = {
        **os.environ,
        "STREAMJOIN_LOCAL_DIR": str(local_dir),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
        "JAVA_TOOL_OPTIONS": SHORT_LIVED,
    }
    return command, env


def dbt(args: Sequence[str], *, project: Path, local_dir: Path, profiles_dir: Optional[Path] = None) -> Invocation:
    """Run `dbt <args>` on `project` with its catalog and state in `local_dir`."""
    command, env = dbt_command(args, project=project, local_dir=local_dir, profiles_dir=profiles_dir)
    target = local_dir / "target"
    done = subprocess.run(command, cwd=local_dir, env=env, capture_output=True, text=True, timeout=1800)
    results_file = target / "run_results.json"
    results = {}
    if results_file.exists():
        for r in json.loads(results_file.read_text())["results"]:
            results[r["unique_id"].split(".", 2)[2]] = r
    return Invocation(done.returncode, done.stdout + done.stderr, results)


def versions(paths: Sequence[Path]) -> Dict[str, Optional[int]]:
    """Each Delta table's latest version (None where there is no table)."""
    return {str(p): DeltaTable(str(p)).version() if DeltaTable.is_deltatable(str(p)) else None for p in paths}


_SESSION_SCRIPT = """
import json, sys
from dbt.cli.main import dbtRunner
commands, common = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = []
for args in commands:
    done = dbtRunner().invoke([*args, *common])
    rows = {r.node.name: [list(row) for row in r.agate_table.rows]
            for r in getattr(done.result, "results", None) or [] if getattr(r, "agate_table", None) is not None}
    out.append({"success": done.success, "error": None if done.exception is None else str(done.exception), "rows": rows})
print("DBT_SESSION " + json.dumps(out, default=str))
"""


def dbt_session(commands: Sequence[Sequence[str]], *, project: Path, local_dir: Path,
                profiles_dir: Optional[Path] = None) -> List[Dict[str, Any]]:
    """Several dbt commands in one process (one SparkSession): per command its success, error and,
    for `dbt show`, the rows per node name."""
    common = ["--project-dir", str(project), "--profiles-dir", str(profiles_dir or project),
              "--log-path", str(local_dir / "logs"),
              "--target-path", str(local_dir / "target")]
    env = {**os.environ, "STREAMJOIN_LOCAL_DIR": str(local_dir), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
           "JAVA_TOOL_OPTIONS": SHORT_LIVED}
    done = subprocess.run([sys.executable, "-c", _SESSION_SCRIPT, json.dumps([list(c) for c in commands]),
                           json.dumps(common)], cwd=local_dir, env=env, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("DBT_SESSION ")]
    assert lines, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("DBT_SESSION "))
