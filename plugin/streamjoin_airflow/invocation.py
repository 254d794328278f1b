"""dbt invocations in this process (dbt's programmatic runner), one per Airflow task.

The project is parsed once per process (``dbt parse``, partial parsing where dbt can) and
the parsed manifest is reused by every later invocation, so a task pays for one parse, and
an in-process ``dag.test()`` for one parse and one SparkSession in all.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

from .plan import DbtProject

Command = Literal["run", "test"]

_lock = threading.Lock()
_manifests: dict[tuple, Any] = {}


@dataclass(frozen=True)
class NodeOutcome:
    """One dbt node's result: ``success``/``error``/``skipped`` (models), ``pass``/``fail``/… (tests)."""

    status: str
    message: str | None


@dataclass(frozen=True)
class DbtOutcome:
    """What one dbt invocation did, per node name."""

    args: tuple[str, ...]
    nodes: dict[str, NodeOutcome]
    error: str | None = None

    @property
    def failures(self) -> dict[str, NodeOutcome]:
        return {n: o for n, o in self.nodes.items() if o.status not in ("success", "pass")}

    @property
    def success(self) -> bool:
        return self.error is None and not self.failures


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _common_args(project: DbtProject, *, target_path: bool = True) -> list[str]:
    args = ["--project-dir", str(project.project_dir), "--profiles-dir", str(project.profiles_dir or project.project_dir)]
    if project.target_path:
        args += ["--log-path", str(project.target_path.parent / "logs")]
        if target_path:
            args += ["--target-path", str(project.target_path)]
    if project.target:
        args += ["--target", project.target]
    return args


def _key(project: DbtProject) -> tuple:
    return (str(project.project_dir), str(project.target_path), project.target, tuple(sorted(project.env.items())))


def deps(project: DbtProject) -> None:
    """``dbt deps``, when the project declares packages (``packages.yml`` or ``dependencies.yml``)."""
    from dbt.cli.main import dbtRunner

    if not any((Path(project.project_dir) / name).is_file() for name in ("packages.yml", "dependencies.yml")):
        return
    with _lock, _environment(dict(project.env)):
        done = dbtRunner().invoke(["deps", *_common_args(project, target_path=False)])
    if not done.success:
        raise RuntimeError(f"dbt deps of {project.project_dir} failed: {done.exception}")


def parse(project: DbtProject) -> Any:
    """Parse the project (writes ``manifest.json`` to its target path); the parsed manifest."""
    from dbt.cli.main import dbtRunner

    with _lock, _environment(dict(project.env)):
        done = dbtRunner().invoke(["parse", *_common_args(project)])
    if not done.success:
        raise RuntimeError(f"dbt parse of {project.project_dir} failed: {done.exception}")
    _manifests[_key(project)] = done.result
    return done.result


def invoke(project: DbtProject, command: Command, *, select: Sequence[str], full_refresh: bool = False) -> DbtOutcome:
    """``dbt <command> --select <select>`` on `project`; tests only those whose models are all selected."""
    from dbt.cli.main import dbtRunner

    manifest = _manifests.get(_key(project)) or parse(project)
    args = [command, *_common_args(project), "--select", *select]
    if full_refresh:
        args.append("--full-refresh")
    if command == "test":
        args += ["--indirect-selection", "cautious"]
    with _lock, _environment(dict(project.env)):
        done = dbtRunner(manifest=manifest).invoke(args)
    nodes = {}
    for result in getattr(done.result, "results", None) or []:
        nodes[result.node.name] = NodeOutcome(str(getattr(result.status, "value", result.status)), result.message)
    error = None if done.exception is None else f"{type(done.exception).__name__}: {done.exception}"
    return DbtOutcome(tuple(args), nodes, error)
