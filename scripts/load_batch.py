"""Append batch N of every example input's changelog to its Delta source table.

    python scripts/load_batch.py 1 [--state-root PATH]

The changelogs are `example/seeds/changelogs/<table>.csv`: a `batch` column, the row kind in
`_row_kind` (for `changelog` inputs) and the data columns. Each input's Delta table lives
where the adapter looks for it: `<state_root>/sources/<source>/<table>`, with the state root
`$STREAMJOIN_LOCAL_DIR/state` (default `.streamjoin/state` in the project). Column types come
from `example/models/sources.yml`; inputs declared without columns get bigint/string by their values.
An input with no rows in a batch gets no new table version (an empty table on first load).
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import yaml
from deltalake import write_deltalake

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "example"  # the example dbt project
CHANGELOGS = PROJECT / "seeds" / "changelogs"
ROW_KIND = "_row_kind"


def default_state_root() -> Path:
    local = Path(os.environ.get("STREAMJOIN_LOCAL_DIR", ".streamjoin"))
    return (local if local.is_absolute() else PROJECT / local) / "state"


def _arrow_type(sql_type: str) -> tuple[pa.DataType, Callable[[str], Any]]:
    """The Arrow type of a Spark SQL type name, and how to read a CSV value as it."""
    t = sql_type.strip().lower()
    decimal = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
    if decimal:
        return pa.decimal128(int(decimal[1]), int(decimal[2])), Decimal
    simple: dict[str, tuple[pa.DataType, Callable[[str], Any]]] = {
        "bigint": (pa.int64(), int), "int": (pa.int32(), int), "integer": (pa.int32(), int),
        "string": (pa.string(), str), "double": (pa.float64(), float), "boolean": (pa.bool_(), lambda v: v == "true"),
        "date": (pa.date32(), dt.date.fromisoformat),
        "timestamp": (pa.timestamp("us", tz="UTC"),
                      lambda v: dt.datetime.fromisoformat(v).replace(tzinfo=dt.timezone.utc)),
    }
    if t not in simple:
        raise SystemExit(f"load_batch: no Arrow type for data_type '{sql_type}'")
    return simple[t]


def inputs() -> dict[str, dict[str, Any]]:
    """Per table: its source, changelog format, declared column types and streamjoin declaration."""
    doc = yaml.safe_load((PROJECT / "models" / "sources.yml").read_text())
    out = {}
    for source in doc["sources"]:
        for table in source["tables"]:
            decl = (table.get("meta") or {}).get("streamjoin") or {}
            out[table["name"]] = {
                "source": source["name"],
                "format": decl.get("changelog_format", "changelog"),
                "types": {c["name"]: c["data_type"] for c in table.get("columns") or []},
                "declaration": {**decl, **({"event_time": table["config"]["event_time"]}
                                           if (table.get("config") or {}).get("event_time") else {})},
            }
    return out


def _inferred_type(values: list[str]) -> str:
    return "bigint" if values and all(re.fullmatch(r"-?\d+", v) for v in values) else "string"


def batch_table(name: str, spec: dict[str, Any], batch: int) -> pa.Table:
    """Rows of `batch` from the input's CSV, typed."""
    with open(CHANGELOGS / f"{name}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    columns = [c for c in rows[0] if c not in ("batch", ROW_KIND)] if rows else list(spec["types"])
    selected = [r for r in rows if int(r["batch"]) == batch]
    arrays, fields = [], []
    for column in columns:
        sql_type = spec["types"].get(column) or _inferred_type([r[column] for r in rows])
        arrow_type, parse = _arrow_type(sql_type)
        arrays.append(pa.array([None if r[column] == "" else parse(r[column]) for r in selected], arrow_type))
        fields.append(pa.field(column, arrow_type))
    if spec["format"] == "changelog":
        arrays.append(pa.array([r[ROW_KIND] for r in selected], pa.string()))
        fields.append(pa.field(ROW_KIND, pa.string()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def load(batch: int, state_root: Path) -> dict[str, int]:
    """Append `batch` to every input's table; returns the rows appended per input."""
    appended = {}
    for name, spec in inputs().items():
        path = state_root / "sources" / spec["source"] / name
        table = batch_table(name, spec, batch)
        if table.num_rows or not (path / "_delta_log").is_dir():
            path.mkdir(parents=True, exist_ok=True)
            write_deltalake(str(path), table, mode="append")
        appended[name] = table.num_rows
    return appended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batch", type=int, help="batch number (the `batch` column of the CSVs)")
    parser.add_argument("--state-root", type=Path, default=None, help="default: $STREAMJOIN_LOCAL_DIR/state")
    args = parser.parse_args()
    appended = load(args.batch, args.state_root or default_state_root())
    print(f"batch {args.batch}: " + ", ".join(f"{name} +{n}" for name, n in appended.items()))


if __name__ == "__main__":
    main()
