"""What the demos print: a line per model run, a line per batch, then a summary and where to look next.

Everything is read back from the models' run logs and changelogs with delta-rs (scripts/demo.py).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import demo


@dataclass(frozen=True)
class ModelRun:
    """One model's run: the changes it consumed per input and the changelog rows it emitted."""

    model: str
    run_id: int
    changes_in: dict[str, int]
    changelog: list[dict]

    def line(self) -> str:
        ins = ", ".join(f"{name} {n}" for name, n in self.changes_in.items()) or "-"
        kinds = Counter(r["_row_kind"] for r in self.changelog)
        outs = ", ".join(f"{k} {kinds[k]}" for k in ("+I", "-U", "+U", "-D") if kinds[k]) or "nothing"
        return f"  {self.model} run {self.run_id}: changes in: {ins}; changelog out: {outs}"

    def rows(self) -> list[str]:
        """The emitted changelog rows, retractions first."""
        ordered = sorted(self.changelog, key=lambda r: (r["_row_kind"][0] == "+", repr(r)))
        return [f"      {demo._row(r)}" for r in ordered]


@dataclass
class Batch:
    """What one batch did: the DAG run's state, each model's new run, the dbt tests' outcomes."""

    number: int
    state: str
    runs: list[ModelRun] = field(default_factory=list)
    tests: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def changes_in(self) -> int:
        return sum(sum(r.changes_in.values()) for r in self.runs)

    @property
    def changes_out(self) -> int:
        return sum(len(r.changelog) for r in self.runs)

    @property
    def tests_passed(self) -> int:
        return sum(1 for status in self.tests.values() if status == "pass")


def new_runs(models_root: Path, seen: dict[str, int]) -> list[ModelRun]:
    """Each model's last complete run when it is newer than the one in `seen` (updated)."""
    runs = []
    for home in sorted(models_root.iterdir()) if models_root.is_dir() else []:
        run = demo.last_run(home)
        if run is None or seen.get(home.name) == run["run_id"]:
            continue
        seen[home.name] = run["run_id"]
        runs.append(ModelRun(home.name, run["run_id"], json.loads(run["changes_in"]),
                             demo.changelog_of(home, run["run_id"])))
    return runs


def summary(batches: list[Batch], *, local_dir: Path, models: int) -> list[str]:
    """The closing lines: per batch models run, changes in and out, tests passed; then where to look."""
    lines = [f"\nSummary ({len(batches)} batch{'es' if len(batches) != 1 else ''}, {models} streaming_join models)",
             f"  {'batch':>5}  {'DAG run':<8} {'models run':>10} {'changes in':>10} {'changes out':>11} "
             f"{'tests passed':>12} {'seconds':>7}"]
    for b in batches:
        lines.append(f"  {b.number:>5}  {b.state:<8} {len(b.runs):>10} {b.changes_in:>10} {b.changes_out:>11} "
                     f"{f'{b.tests_passed}/{len(b.tests)}':>12} {b.seconds:>7.0f}")
    state_root = local_dir / "state"
    lines += ["\nWhere to look next:",
              f"  each model's Delta tables: {state_root / 'models'}/<model>/{{result,changelog,runs}}",
              f"  python -m streamjoin status {state_root}   # recent runs and table sizes",
              f"  Spark's log: {local_dir / 'logs' / 'spark.log'}; STREAMJOIN_LOG_LEVEL=INFO make demo prints it,"
              " with dbt's and Airflow's logs"]
    return lines
