"""`python -m streamjoin status PATH`: recent runs and table sizes of the models under PATH.

Everything is read from the models' Delta logs and run logs with delta-rs: no Spark session,
so it answers in a second even while a run is going on.

Given the dbt project (`--project-dir`, its `manifest.json` in the target folder, as `dbt parse`
or any dbt command writes it), a model whose tables are here but which the manifest does not
list as a `streaming_join` model (renamed, deleted, or materialized otherwise) is marked
orphaned: nothing runs it any more, and its folder can be deleted.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
from dataclasses import dataclass
from typing import AbstractSet, Any, Sequence

import pyarrow as pa

from .errors import ConfigError
from .storage import delta_log, filesystem
from .storage.tables import ModelTables

MAX_DEPTH = 4  # how deep below PATH to look for models (project/.streamjoin/state/<schema>/<model>)


def model_tables(path: str) -> list[ModelTables]:
    """The models whose tables live at or below `path`, a folder or URI (a model folder has a `runs`
    Delta table); folders named `_…` or `.git…` are not searched."""
    found: list[ModelTables] = []

    def visit(folder: str, depth: int) -> None:
        if filesystem.is_dir(filesystem.join(folder, "runs", "_delta_log")):
            found.append(ModelTables(posixpath.dirname(folder), posixpath.basename(folder)))
            return
        if depth >= MAX_DEPTH or posixpath.basename(folder).startswith(("_", ".git")):
            return
        for name in filesystem.list_names(folder):
            if filesystem.is_dir(filesystem.join(folder, name)):
                visit(filesystem.join(folder, name), depth + 1)

    visit(os.path.abspath(path) if "://" not in path else path.rstrip("/"), 0)
    return found


@dataclass(frozen=True)
class TableSize:
    """One Delta table's current version and what its live files hold."""

    name: str
    version: int
    files: int
    rows: int
    bytes: int


def table_size(tables: ModelTables, path: str) -> TableSize:
    table = delta_log.table(path)
    actions = pa.table(table.get_add_actions(flatten=True))
    rows = sum(n or 0 for n in actions.column("num_records").to_pylist()) if actions.num_rows else 0
    size = sum(actions.column("size_bytes").to_pylist()) if actions.num_rows else 0
    return TableSize(filesystem.relative(path, tables.home), table.version(), actions.num_rows, rows, size)


def recent_runs(tables: ModelTables, limit: int) -> list[dict[str, Any]]:
    """The last `limit` complete runs from the run log, newest first, as flat figures."""
    log = delta_log.table(tables.runs).to_pyarrow_table().to_pylist()
    out = []
    for row in sorted(log, key=lambda r: r["run_id"], reverse=True)[:limit]:
        manifest, metrics = json.loads(row["manifest"]), json.loads(row["metrics"] or "{}")
        nodes = [m for k, m in metrics.items() if isinstance(m, dict) and k not in ("phases_s", "state_rows")]
        watermarks = [m["watermark"] for m in nodes if m.get("watermark")]
        late: dict[str, int] = {}
        for m in nodes:
            for name, n in (m.get("rows_late") or {}).items():
                late[name] = late.get(name, 0) + n
        out.append({
            "run": row["run_id"],
            "started (UTC)": dt.datetime.fromtimestamp(manifest["started"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "offsets": ", ".join(f"{n}:{o['start'] if o['start'] is not None else '-'}..{o['end']}"
                                 for n, o in manifest["offsets"].items()),
            "changes in": ", ".join(f"{k}={v}" for k, v in json.loads(row["changes_in"]).items()),
            "rows out": ", ".join(f"{k}{v}" for k, v in json.loads(row["rows_out"]).items()),
            "keys touched": sum(m.get("touched_keys", 0) for m in nodes),
            "state rows": sum(metrics.get("state_rows", {}).values()),
            "watermark": min(watermarks) if watermarks else "",
            "late rows": ", ".join(f"{k}={v}" for k, v in late.items() if v) or ("0" if late else ""),
            "seconds": round(sum(metrics.get("phases_s", {}).values()), 1),
        })
    return out


def render(rows: Sequence[dict[str, Any]]) -> str:
    """Rows of equal keys as an aligned text table."""
    if not rows:
        return "(none)"
    headers = list(rows[0])
    cells = [[str(r[h]) for h in headers] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(c) for c in cells)])


def manifest_path(project_dir: str, target_path: str | None = None) -> str:
    """Where dbt wrote the project's manifest: `target_path` (relative to the project, as dbt
    reads it; default `$DBT_TARGET_PATH`, else `target`); ConfigError when there is none."""
    folder = os.path.join(project_dir, target_path or os.environ.get("DBT_TARGET_PATH") or "target")
    path = os.path.join(folder, "manifest.json")
    if not os.path.isfile(path):
        raise ConfigError(f"no dbt manifest at {path}: run `dbt parse` in {project_dir} first, or pass --target-path "
                          "with the folder your dbt commands write to (their --target-path)")
    return path


def project_models(manifest: str) -> frozenset[str]:
    """The names of the enabled `streaming_join` models a dbt manifest lists (its own and its packages')."""
    with open(manifest, encoding="utf-8") as fh:
        nodes = json.load(fh).get("nodes", {})
    return frozenset(n["name"] for n in nodes.values()
                     if n.get("resource_type") == "model" and (n.get("config") or {}).get("materialized") == "streaming_join"
                     and (n.get("config") or {}).get("enabled", True))


def orphan_note(tables: ModelTables) -> str:
    """What an orphaned model is and how to remove it."""
    return (f"ORPHANED: the project has no streaming_join model '{tables.model}' (renamed or removed?), so nothing "
            f"runs it. If its results are no longer needed, delete its tables with `rm -r {tables.home}` and drop "
            f"its views ({tables.model}, {tables.model}__changelog, {tables.model}__batch, "
            f"{tables.model}__batch_on_time in its schema) if your "
            "catalog still lists them")


def report(models: Sequence[ModelTables], *, limit: int = 10, current: AbstractSet[str] | None = None) -> str:
    """The status of `models` (see `model_tables`), ready to print; with `current` (the models the
    project has, see `project_models`), the others are marked orphaned."""
    parts: list[str] = []
    orphans = [t for t in models if current is not None and t.model not in current]
    for tables in models:
        sizes = [table_size(tables, p) for p in tables.all_tables()]
        parts += [f"model {tables.model} ({tables.home})", *([orphan_note(tables)] if tables in orphans else []), "",
                  "recent runs:", render(recent_runs(tables, limit)), "",
                  "tables:", render([{"table": s.name, "version": s.version, "files": s.files, "rows": s.rows,
                                      "MiB": f"{s.bytes / 2**20:.2f}"} for s in sizes]), ""]
    if orphans:
        parts.append(f"{len(orphans)} orphaned model(s), not in the project: {', '.join(t.model for t in orphans)}")
    return "\n".join(parts).rstrip() + "\n"
