"""dbt's manifest of a project, parsed when it is missing or stale (a cache keyed by the project's files).

As astronomer-cosmos's dbt-ls load mode does, loading a DAG file needs no manual ``dbt parse``:
:func:`ensure_manifest` hashes the files dbt reads to build the manifest (``dbt_project.yml``,
``packages.yml``, the profile, and every file under the project's model, seed, macro, test,
snapshot and analysis paths) together with the target and the environment dbt runs with. When
``manifest.json`` is missing or was written for another hash, it runs ``dbt deps`` (when the
project declares packages) and ``dbt parse`` in a child process, then records the hash next to
the manifest. Otherwise it only reads files: a DAG file loads in milliseconds.

The DAG reads its own copy of the parsed manifest (``<target>/streamjoin_manifest.json``, replaced
atomically), not ``manifest.json``: every ``dbt run`` of a task rewrites that file in place, and under a
parallel executor another task loading the DAG file meanwhile would read it half written.

Not seen by the hash: changes inside installed packages (they add no streaming_join models)
and ``env_var`` values the project reads but ``DbtProject.env`` does not set. Delete the hash
file (``<target>/streamjoin_manifest.sha256``) to force a parse.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import yaml

from streamjoin.errors import ConfigError

from .plan import DbtProject

#: The file, next to ``manifest.json``, holding the hash the manifest was parsed for.
HASH_FILE = "streamjoin_manifest.sha256"
#: The DAG's copy of the parsed manifest, next to ``manifest.json`` (which dbt rewrites on every run).
PLAN_MANIFEST = "streamjoin_manifest.json"
#: Seconds a ``dbt deps`` + ``dbt parse`` may take before loading the DAG fails.
PARSE_TIMEOUT = 600.0
#: dbt's defaults for the folders it reads (``docs-paths`` defaults to all of them).
_DEFAULT_PATHS = {"model-paths": ["models"], "seed-paths": ["seeds"], "macro-paths": ["macros"],
                  "test-paths": ["tests"], "snapshot-paths": ["snapshots"], "analysis-paths": ["analyses"],
                  "docs-paths": []}
_PROJECT_FILES = ("dbt_project.yml", "packages.yml", "dependencies.yml", "selectors.yml")


def project_files(project: DbtProject) -> list[Path]:
    """The files dbt reads to parse `project`, in a stable order (hidden files and folders skipped)."""
    root = Path(project.project_dir)
    config = yaml.safe_load((root / "dbt_project.yml").read_text()) or {}
    files = [root / name for name in _PROJECT_FILES if (root / name).is_file()]
    profiles = Path(project.profiles_dir or root) / "profiles.yml"
    if profiles.is_file():
        files.append(profiles)
    folders = set()
    for key, default in _DEFAULT_PATHS.items():
        paths = config.get(key, default)
        folders.update(p for p in (paths if isinstance(paths, list) else default) if isinstance(p, str))
    for folder in sorted(folders):
        for dirpath, dirnames, filenames in os.walk(root / folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            files.extend(Path(dirpath, f) for f in sorted(filenames) if not f.startswith("."))
    return files


def project_hash(project: DbtProject) -> str:
    """A hash of what the manifest depends on: the project's files, its target and dbt's environment."""
    digest = hashlib.sha256()
    root = Path(project.project_dir)
    digest.update(json.dumps([project.target, sorted(project.env.items())]).encode())
    for path in project_files(project):
        name = os.path.relpath(path, root)
        digest.update(f"\0{name}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_manifest(project: DbtProject, *, timeout: float = PARSE_TIMEOUT) -> Path:
    """The DAG's copy of the project's manifest (``PLAN_MANIFEST``), parsed first when it is missing or stale.

    Processes loading the same DAG file at once parse it once (a lock file in the target folder).

    Raises:
        ConfigError: ``dbt deps`` or ``dbt parse`` failed (the message holds dbt's output).
    """
    copy = project.manifest_path.with_name(PLAN_MANIFEST)
    wanted = project_hash(project)
    if _is_fresh(copy, wanted):
        return copy
    copy.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(copy.with_name(".streamjoin_manifest.lock")):
        if not _is_fresh(copy, wanted):  # another process may have parsed it meanwhile
            _parse_in_child(project, timeout)
            staged = copy.with_name(f".{PLAN_MANIFEST}.{os.getpid()}")
            staged.write_bytes(project.manifest_path.read_bytes())
            os.replace(staged, copy)
            copy.with_name(HASH_FILE).write_text(wanted + "\n")
    return copy


def _is_fresh(path: Path, wanted: str) -> bool:
    stamp = path.with_name(HASH_FILE)
    return path.is_file() and stamp.is_file() and stamp.read_text().strip() == wanted


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _parse_in_child(project: DbtProject, timeout: float) -> None:
    """``dbt deps`` and ``dbt parse`` in a child process: dbt's logging and flags stay out of this one."""
    spec = json.dumps({k: None if v is None else (dict(v) if k == "env" else str(v))
                       for k, v in dataclasses.asdict(project).items()})
    env = {**os.environ, **project.env}
    try:
        done = subprocess.run([sys.executable, "-m", "streamjoin_airflow.manifest", spec], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(f"dbt parse of {project.project_dir} took longer than {timeout:.0f} s; pass a longer "
                          "`timeout` to ensure_manifest (and raise Airflow's core.dagbag_import_timeout)") from exc
    if done.returncode:
        output = (done.stdout + done.stderr).strip()[-4000:]
        raise ConfigError(f"dbt could not parse {project.project_dir} to write {project.manifest_path} "
                          f"(exit {done.returncode}); fix what dbt reports, then reload the DAG:\n{output}")


def _project_from_json(text: str) -> DbtProject:
    raw = json.loads(text)
    paths = {k: Path(raw[k]) if raw.get(k) else None for k in ("project_dir", "profiles_dir", "target_path")}
    return DbtProject(paths["project_dir"], state_root=raw["state_root"], profiles_dir=paths["profiles_dir"],
                      target_path=paths["target_path"], target=raw.get("target"), env=raw.get("env") or {})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m streamjoin_airflow.manifest '<DbtProject as JSON>'``: dbt deps (if declared), dbt parse."""
    from . import invocation

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(main.__doc__, file=sys.stderr)
        return 2
    project = _project_from_json(args[0])
    invocation.deps(project)
    invocation.parse(project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
