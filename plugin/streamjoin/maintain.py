"""`python -m streamjoin maintain PATH`: keep a model's Delta tables small and fast to read.

Per model: optionally drop changelog files of old runs (retention), compact small files (delta-rs
optimize; a rewrite without data change, so readers of the changelog skip it), then vacuum
files older versions no longer reference. It holds the model while it works, and refuses to
start while a run holds it or a run is incomplete (its retry needs the versions it pinned).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, RemoveAction

from .errors import ModelBusyError
from .runtime import lease
from .runtime.run import app_id
from .spec import RUN_ID_COLUMN
from .storage import delta_log
from .storage.tables import ModelTables

@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    files_removed_by_retention: int
    files_compacted: int
    files_added_by_compaction: int
    files_vacuumed: int


def check_complete(tables: ModelTables) -> None:
    """ModelBusyError when a table holds a commit of a run the run log does not record yet."""
    app = app_id(tables.model)
    last = delta_log.app_version(tables.runs, app) or 0
    ahead = [p for p in tables.all_tables() if (delta_log.app_version(p, app) or 0) > last]
    if ahead:
        raise ModelBusyError(f"model '{tables.model}': run {last + 1} is incomplete ({os.path.relpath(ahead[0], tables.home)} "
                             "committed it, the run log did not); run the model first so it completes")


def trim_changelog(tables: ModelTables, keep_runs: int) -> int:
    """Remove the changelog's files that hold only changes of runs older than the last `keep_runs`."""
    table = DeltaTable(tables.changelog)
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    last = delta_log.app_version(tables.runs, app_id(tables.model)) or 0
    column = f"max.{RUN_ID_COLUMN}"
    old = [a for a in actions if a.get(column) is not None and a[column] <= last - keep_runs]
    if not old:
        return 0
    now = int(time.time() * 1000)
    removes = [RemoveAction(path=a["path"], data_change=True, deletion_timestamp=now, partition_values={}) for a in old]
    table.create_write_transaction(removes, mode="append", schema=table.schema(),
                                   commit_properties=CommitProperties(custom_metadata={delta_log.OPERATION_KEY: "retention"}))
    return len(old)


def maintain_table(path: str, tables: ModelTables, *, vacuum_hours: float, removed: int) -> TableMaintenance:
    table = DeltaTable(path)
    compacted = table.optimize.compact(commit_properties=CommitProperties(custom_metadata={delta_log.OPERATION_KEY: "compact"}))
    vacuumed = DeltaTable(path).vacuum(retention_hours=int(vacuum_hours), dry_run=False, enforce_retention_duration=False)
    return TableMaintenance(os.path.relpath(path, tables.home), removed, int(compacted.get("numFilesRemoved", 0)),
                            int(compacted.get("numFilesAdded", 0)), len(vacuumed))


def maintain(tables: ModelTables, *, vacuum_hours: float = 168, changelog_keep_runs: int | None = None) -> list[TableMaintenance]:
    """Maintain every table of a model (see the module docstring)."""
    with lease.holding(tables, "maintain", exclusive_of=("run", "maintain")):
        check_complete(tables)
        trimmed = trim_changelog(tables, changelog_keep_runs) if changelog_keep_runs is not None else 0
        return [maintain_table(p, tables, vacuum_hours=vacuum_hours, removed=trimmed if p == tables.changelog else 0)
                for p in tables.all_tables()]
