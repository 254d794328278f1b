"""Changelog retention: drop the changelog of old runs, keeping what they summed to.

A model's changelog is a Z-set history: replaying all of it (each `+I`/`+U` adds one copy of
its row, each `-U`/`-D` takes one away) gives the result. Retention removes the files that hold
only changes of runs up to a boundary and, in the same commit, adds one file with their net
change: each row whose weights in those files do not sum to zero, as that many `+I` rows (or
`-D` rows, for a negative sum, possible when compaction left a file mixing older and newer
runs), tagged with the newest run id they summarise. So the changelog still replays to the
result, and a first read of it (a downstream model's first run or full refresh, a snapshot)
still sees the right rows. The commit is marked as retention: incremental readers skip it.

Runs on delta-rs and pyarrow: no Spark.
"""
from __future__ import annotations

import io
import json
import time
import uuid
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from .runtime.run import app_id
from .spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from .storage import delta_log, filesystem
from .storage.tables import ModelTables
from .types import RowKind

_WEIGHT = "__weight"


def trim_changelog(tables: ModelTables, keep_runs: int) -> int:
    """Replace the changelog's files that hold only changes of runs older than the last `keep_runs`
    by their net change (see the module docstring); how many files were removed."""
    table = delta_log.table(tables.changelog)
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    last = delta_log.app_version(tables.runs, app_id(tables.model)) or 0
    column = f"max.{RUN_ID_COLUMN}"
    old = [a for a in actions if a.get(column) is not None and a[column] <= last - keep_runs]
    if not old:
        return 0
    root = delta_log.root_of(table)
    schema = pa.schema(table.schema().to_arrow())
    files = (pq.read_table(io.BytesIO(filesystem.read_bytes(filesystem.join(root, a["path"]))), schema=schema)
             for a in old)
    net = net_change(files, schema=schema, run_id=max(a[column] for a in old))
    now = int(time.time() * 1000)
    removes: list[AddAction | RemoveAction] = [
        RemoveAction(path=a["path"], data_change=True, deletion_timestamp=now, partition_values={}) for a in old]
    adds = [_write(net, root, tag=f"retained-r{max(a[column] for a in old)}")] if net.num_rows else []
    table.create_write_transaction(removes + adds, mode="append", schema=table.schema(),
                                   commit_properties=CommitProperties(custom_metadata={delta_log.OPERATION_KEY: "retention"}))
    return len(old)


def net_change(parts: Iterable[pa.Table], *, schema: pa.Schema, run_id: int) -> pa.Table:
    """Changelog rows consolidated: per row, |sum of weights| copies, `+I` for a positive sum and
    `-D` for a negative one, all tagged `run_id`; in the changelog's `schema`.

    The rows come in `parts` (one per file), summed one part at a time, so memory holds the
    distinct rows of the history rather than every change."""
    data = [n for n in schema.names if n not in (ROW_KIND_COLUMN, RUN_ID_COLUMN)]
    sums = pa.table({**{f.name: pa.array([], f.type) for f in schema if f.name in data}, _WEIGHT: pa.array([], pa.int64())})
    pending: list[pa.Table] = []
    for rows in parts:
        adds = pc.is_in(rows[ROW_KIND_COLUMN], value_set=pa.array([RowKind.INSERT.value, RowKind.UPDATE_AFTER.value]))
        pending.append(_sum_weights(rows.select(data).append_column(_WEIGHT, pc.if_else(adds, 1, -1).cast(pa.int64())), data))
        if sum(t.num_rows for t in pending) > max(sums.num_rows, 1 << 16):
            sums, pending = _sum_weights(pa.concat_tables([sums, *pending]), data), []
    sums = _sum_weights(pa.concat_tables([sums, *pending]), data)
    sums = sums.filter(pc.not_equal(sums[_WEIGHT], 0))
    weights = sums[_WEIGHT].to_numpy()
    copies = sums.select(data).take(pa.array(np.repeat(np.arange(len(weights)), np.abs(weights))))
    positive = np.repeat(weights > 0, np.abs(weights))
    kinds = pa.array(np.where(positive, RowKind.INSERT.value, RowKind.DELETE.value).tolist(), pa.string())
    out = copies.append_column(ROW_KIND_COLUMN, kinds)
    out = out.append_column(RUN_ID_COLUMN, pa.array([run_id] * out.num_rows, pa.int64()))
    return out.select(schema.names).cast(schema)


def _sum_weights(weighted: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The sum of `_WEIGHT` per distinct row of `keys` (NULLs are values, as in GROUP BY)."""
    try:
        summed = weighted.group_by(list(keys), use_threads=False).aggregate([(_WEIGHT, "sum")])
        return pa.table({**{k: summed[k] for k in keys}, _WEIGHT: summed[f"{_WEIGHT}_sum"]})
    except pa.ArrowNotImplementedError:  # nested columns (structs, lists) cannot be Arrow group keys
        totals: Counter = Counter()
        first: dict[str, int] = {}
        for i, (row, weight) in enumerate(zip(weighted.select(list(keys)).to_pylist(), weighted[_WEIGHT].to_pylist())):
            key = repr(row)
            totals[key] += weight
            first.setdefault(key, i)
        picked = weighted.select(list(keys)).take(pa.array(list(first.values()), pa.int64()))
        return picked.append_column(_WEIGHT, pa.array([totals[k] for k in first], pa.int64()))


def _write(rows: pa.Table, root: str, *, tag: str) -> AddAction:
    """Write `rows` (a net change) as one Parquet file of the table at `root`; no data change.

    Its statistics are those retention and changelog readers use, known without reading the
    file back: the row count, and the range of the row kinds and run ids (the other columns'
    statistics are left out, as Delta allows)."""
    rel = f"{tag}-{uuid.uuid4().hex[:12]}.parquet"
    data = delta_log.write_parquet(rows, filesystem.join(root, rel))
    known = (ROW_KIND_COLUMN, RUN_ID_COLUMN)
    stats = {"numRecords": rows.num_rows,
             "minValues": {c: pc.min(rows[c]).as_py() for c in known},
             "maxValues": {c: pc.max(rows[c]).as_py() for c in known},
             "nullCount": {c: rows[c].null_count for c in known}}
    return AddAction(path=rel, size=len(data), partition_values={}, modification_time=int(time.time() * 1000),
                     data_change=False, stats=json.dumps(stats))
