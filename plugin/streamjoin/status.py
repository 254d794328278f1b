"""`python -m streamjoin status PATH`: recent runs and table sizes of the models under PATH.

Everything is read from the models' Delta logs and run logs with delta-rs: no Spark session,
so it answers in a second even while a run is going on.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
from deltalake import DeltaTable

from .storage.tables import ModelTables

MAX_DEPTH = 4  # how deep below PATH to look for models (project/.streamjoin/state/<schema>/<model>)


def model_tables(path: str) -> list[ModelTables]:
    """The models whose tables live at or below `path` (a model folder has a `runs` Delta table)."""
    path = os.path.abspath(path)
    found = []
    base_depth = path.rstrip(os.sep).count(os.sep)
    for folder, subfolders, _ in os.walk(path):
        if os.path.isdir(os.path.join(folder, "runs", "_delta_log")):
            found.append(ModelTables(os.path.dirname(folder), os.path.basename(folder)))
            subfolders.clear()
        elif folder.count(os.sep) - base_depth >= MAX_DEPTH or os.path.basename(folder).startswith(("_", ".git")):
            subfolders.clear()
        else:
            subfolders.sort()
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
    table = DeltaTable(path)
    actions = pa.table(table.get_add_actions(flatten=True))
    rows = sum(n or 0 for n in actions.column("num_records").to_pylist()) if actions.num_rows else 0
    size = sum(actions.column("size_bytes").to_pylist()) if actions.num_rows else 0
    return TableSize(os.path.relpath(path, tables.home), table.version(), actions.num_rows, rows, size)


def recent_runs(tables: ModelTables, limit: int) -> list[dict[str, Any]]:
    """The last `limit` complete runs from the run log, newest first, as flat figures."""
    log = DeltaTable(tables.runs).to_pyarrow_table().to_pylist()
    out = []
    for row in sorted(log, key=lambda r: r["run_id"], reverse=True)[:limit]:
        manifest, metrics = json.loads(row["manifest"]), json.loads(row["metrics"] or "{}")
        nodes = [m for k, m in metrics.items() if isinstance(m, dict) and k not in ("phases_s", "state_rows")]
        watermarks = [m["watermark"] for m in nodes if m.get("watermark")]
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


def report(path: str, *, limit: int = 10) -> str:
    """The status of every model under `path`, ready to print."""
    models = model_tables(path)
    if not models:
        return f"no streamjoin model tables under {path}"
    parts: list[str] = []
    for tables in models:
        sizes = [table_size(tables, p) for p in tables.all_tables()]
        parts += [f"model {tables.model} ({tables.home})", "", "recent runs:", render(recent_runs(tables, limit)), "",
                  "tables:", render([{"table": s.name, "version": s.version, "files": s.files, "rows": s.rows,
                                      "MiB": f"{s.bytes / 2**20:.2f}"} for s in sizes]), ""]
    return "\n".join(parts).rstrip() + "\n"

