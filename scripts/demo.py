"""Run the example project through dbt for three batches and show what every run did.

    python scripts/demo.py [--batches 3] [--local-dir .streamjoin/demo]

Starts from empty state (the folder is wiped), then per batch: append the batch to every
input (scripts/load_batch.py), `dbt build`, and print per streaming_join model the changes
it consumed and the changelog it emitted. Tables are read back with delta-rs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load_batch  # noqa: E402

PROJECT = load_batch.PROJECT


def dbt_build(local_dir: Path, command: str = "build") -> tuple[int, dict]:
    """`dbt <command>` (default build) in its own process; its exit code and run results."""
    env = {**os.environ, "STREAMJOIN_LOCAL_DIR": str(local_dir), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
           "JAVA_TOOL_OPTIONS": os.environ.get("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC")}
    args = [str(Path(sys.executable).with_name("dbt")), command, "--project-dir", str(PROJECT),
            "--profiles-dir", str(PROJECT), "--log-path", str(local_dir / "logs")]
    if command != "deps":  # deps takes no --target-path
        args += ["--target-path", str(local_dir / "target")]
    done = subprocess.run(args, cwd=PROJECT, env=env, capture_output=True, text=True)
    results_file = local_dir / "target" / "run_results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {"results": []}
    if done.returncode:
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    return done.returncode, results


def last_run(model_home: Path) -> dict | None:
    """The run log row of the model's last complete run."""
    runs = model_home / "runs"
    if not DeltaTable.is_deltatable(str(runs)):
        return None
    rows = DeltaTable(str(runs)).to_pyarrow_table().to_pylist()
    return max(rows, key=lambda r: r["run_id"]) if rows else None


def changelog_of(model_home: Path, run_id: int) -> list[dict]:
    table = DeltaTable(str(model_home / "changelog")).to_pyarrow_table()
    return [r for r in table.to_pylist() if r["_run_id"] == run_id]


def _row(record: dict) -> str:
    values = [v.strftime("%H:%M") if hasattr(v, "strftime") else v for k, v in record.items()
              if k not in ("_row_kind", "_run_id")]
    return f"{record['_row_kind']} ({', '.join('NULL' if v is None else str(v) for v in values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--local-dir", type=Path, default=PROJECT / ".streamjoin" / "demo")
    args = parser.parse_args()
    local_dir = args.local_dir.resolve()
    shutil.rmtree(local_dir, ignore_errors=True)
    local_dir.mkdir(parents=True)
    models_root = local_dir / "state" / "models"
    seen: dict[str, int] = {}
    failed = dbt_build(local_dir, "deps")[0] != 0  # installs the streamjoin package (example/packages.yml)
    for batch in range(1, args.batches + 1):
        appended = load_batch.load(batch, local_dir / "state")
        print(f"\n=== batch {batch}: appended " + ", ".join(f"{n} +{k}" for n, k in appended.items() if k))
        started = time.time()
        code, results = dbt_build(local_dir)
        statuses = [r["status"] for r in results["results"]]
        print(f"dbt build: exit {code} in {time.time() - started:.0f}s; "
              + ", ".join(f"{s}={statuses.count(s)}" for s in sorted(set(statuses))))
        failed |= code != 0
        for home in sorted(models_root.iterdir()) if models_root.is_dir() else []:
            run = last_run(home)
            if run is None or seen.get(home.name) == run["run_id"]:
                print(f"\n{home.name}: no new run")
                continue
            seen[home.name] = run["run_id"]
            consumed = ", ".join(f"{k}={v}" for k, v in json.loads(run["changes_in"]).items())
            emitted = changelog_of(home, run["run_id"])
            print(f"\n{home.name} run {run['run_id']}: consumed {consumed}; emitted {len(emitted)} changelog rows")
            for record in sorted(emitted, key=lambda r: (r["_row_kind"][0] == "+", repr(r))):
                print(f"    {_row(record)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
