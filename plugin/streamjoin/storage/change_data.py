"""Delta versions that carry a change data feed's `cdc` files, committed by streamjoin.

A table with `delta.enableChangeDataFeed` tells a CDF reader each version's row changes: the rows
of the version's `cdc` files (each with `_change_type`: insert, update_preimage, update_postimage,
delete), or, in a version with none, every row of the files it adds (inserts) and removes
(deletes). A run that rewrites a result bucket to retract one row would thus read as the whole
bucket deleted and inserted again. delta-rs's Python API commits add and remove actions only, so
such versions are written here: the actions delta-rs would write plus the `cdc` ones, as one JSON
commit created only if absent (`filesystem.create_new`: the filesystem's atomic create, as Delta's
writers commit on a filesystem; on an object store only under a single writer, stated as delta-rs
takes it). The table stays a standard Delta table, which delta-rs also checkpoints.
"""
from __future__ import annotations

import json
import time
from typing import Any, Mapping, Sequence

from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction

from . import filesystem

#: The table property that turns a Delta table's change data feed on.
FEED_PROPERTY = "delta.enableChangeDataFeed"
#: Where a table's change data files live (under its root), as Delta names it.
FOLDER = "_change_data"
#: The column of a change data file that says what a row is, and its values per changelog row kind.
CHANGE_TYPE = "_change_type"
CHANGE_TYPES = {"+I": "insert", "-U": "update_preimage", "+U": "update_postimage", "-D": "delete"}
#: The table property that sets how many versions apart Delta writers checkpoint the log.
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"


class VersionTaken(Exception):
    """Another writer committed the version this commit was made for."""


def commit_file(root: str, version: int) -> str:
    """The JSON commit of a table's `version` in its Delta log (every version has one, checkpointed or not)."""
    return filesystem.join(root, "_delta_log", f"{version:020d}.json")


def commit(table: DeltaTable, path: str, actions: Sequence[AddAction | RemoveAction], changes: Sequence[AddAction],
           schema: DeltaSchema, *, overwrite: bool, app_id: str, run_id: int, metadata: Mapping[str, str]) -> None:
    """Commit `actions` and the change data files `changes` (written under `FOLDER`) as the version
    after `table`'s, with the app transaction (app_id, run_id) and `metadata` in its commit info, as
    `delta_log.commit` does. With `overwrite` (`actions` then remove every live file), `schema`
    becomes the table's. Turns the table's change data feed on if it was off. Raises `VersionTaken`
    if that version exists."""
    now = int(time.time() * 1000)
    lines: list[dict[str, Any]] = [{"commitInfo": {
        "timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Overwrite" if overwrite else "Append"},
        "readVersion": table.version(), "isBlindAppend": False, "engineInfo": "streamjoin", **metadata}}]
    protocol = _protocol_with_feed(table)
    if protocol:
        lines.append({"protocol": protocol})
    meta = table.metadata()
    if overwrite or meta.configuration.get(FEED_PROPERTY) != "true":
        lines.append({"metaData": {
            "id": meta.id, "name": meta.name, "description": meta.description,
            "format": {"provider": "parquet", "options": {}}, "schemaString": (schema if overwrite else table.schema()).to_json(),
            "partitionColumns": list(meta.partition_columns), "createdTime": meta.created_time,
            "configuration": {**meta.configuration, FEED_PROPERTY: "true"}}})
    lines.append({"txn": {"appId": app_id, "version": run_id, "lastUpdated": now}})
    lines += [_action(a, now) for a in actions]
    lines += [{"cdc": {"path": c.path, "size": c.size, "dataChange": False,
                       "partitionValues": {k: (c.partition_values or {}).get(k) for k in meta.partition_columns}}}
              for c in changes]
    version = table.version() + 1
    log_file = commit_file(path, version)
    if not filesystem.create_new(log_file, "\n".join(json.dumps(line) for line in lines).encode() + b"\n"):
        raise VersionTaken(f"{path}: version {version} was committed by another writer")
    interval = int(meta.configuration.get(CHECKPOINT_INTERVAL_PROPERTY) or 100)
    if version % interval == 0:
        DeltaTable(table.table_uri, storage_options=filesystem.options_for(path) or None).create_checkpoint()


def _action(action: AddAction | RemoveAction, now: int) -> dict[str, Any]:
    if isinstance(action, AddAction):
        return {"add": {"path": action.path, "partitionValues": dict(action.partition_values or {}),
                        "size": action.size, "modificationTime": action.modification_time or now,
                        "dataChange": action.data_change, "stats": action.stats}}
    return {"remove": {"path": action.path, "dataChange": action.data_change,
                       "deletionTimestamp": action.deletion_timestamp, "extendedFileMetadata": action.size is not None,
                       "partitionValues": dict(action.partition_values or {}),
                       **({"size": action.size} if action.size is not None else {})}}


def _protocol_with_feed(table: DeltaTable) -> dict[str, Any] | None:
    """The protocol action a table needs to have a change data feed (None: its protocol has it)."""
    p = table.protocol()
    if p.min_writer_version < 4:
        return {"minReaderVersion": p.min_reader_version, "minWriterVersion": 4}
    if p.min_writer_version < 7 or "changeDataFeed" in (p.writer_features or []):
        return None
    return {"minReaderVersion": p.min_reader_version, "minWriterVersion": p.min_writer_version,
            **({"readerFeatures": list(p.reader_features)} if p.reader_features is not None else {}),
            "writerFeatures": [*(p.writer_features or []), "changeDataFeed"]}
