"""`python -m streamjoin maintain PATH`: keep a model's Delta tables small and fast to read.

Per model: optionally replace the changelog of old runs by their net change (`retention`), compact
small files (delta-rs optimize; a rewrite without data change, so readers of the changelog skip
it), then vacuum files older versions no longer reference. It holds the model while it works, and refuses to
start while a run holds it or a run is incomplete (its retry needs the versions it pinned).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from deltalake.transaction import CommitProperties

from .errors import ModelBusyError, StreamJoinError
from .retention import trim_changelog
from .runtime import lease
from .runtime.run import app_id
from .storage import delta_log, filesystem
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
        raise ModelBusyError(f"model '{tables.model}': run {last + 1} is incomplete ({filesystem.relative(ahead[0], tables.home)} "
                             "committed it, the run log did not); run the model first so it completes")


def maintain_table(path: str, tables: ModelTables, *, vacuum_hours: float, removed: int) -> TableMaintenance:
    table = delta_log.table(path)
    compacted = table.optimize.compact(commit_properties=CommitProperties(custom_metadata={delta_log.OPERATION_KEY: "compact"}))
    # delta-rs takes whole hours: rounded up, so no file a version of the last `vacuum_hours` reads is removed
    vacuumed = delta_log.table(path).vacuum(retention_hours=math.ceil(vacuum_hours), dry_run=False,
                                            enforce_retention_duration=False)
    return TableMaintenance(filesystem.relative(path, tables.home), removed, int(compacted.get("numFilesRemoved", 0)),
                            int(compacted.get("numFilesAdded", 0)), len(vacuumed))


def check_options(*, vacuum_hours: float, changelog_keep_runs: int | None) -> None:
    """StreamJoinError naming each option out of range, before any table is touched."""
    problems = []
    if not 0 <= vacuum_hours < math.inf:  # NaN included
        problems.append(f"vacuum_hours must be a finite number, 0 or more (hours of versions whose files to keep), "
                        f"not {vacuum_hours}")
    if changelog_keep_runs is not None and changelog_keep_runs < 0:
        problems.append(f"changelog_keep_runs must be 0 or more (runs whose changes to keep as they are), "
                        f"not {changelog_keep_runs}")
    if problems:
        raise StreamJoinError("maintain: " + "; ".join(problems))


def maintain(tables: ModelTables, *, vacuum_hours: float = 168, changelog_keep_runs: int | None = None) -> list[TableMaintenance]:
    """Maintain every table of a model (see the module docstring)."""
    check_options(vacuum_hours=vacuum_hours, changelog_keep_runs=changelog_keep_runs)
    with lease.holding(tables, "maintain", exclusive_of=("run", "maintain")):
        check_complete(tables)
        trimmed = trim_changelog(tables, changelog_keep_runs) if changelog_keep_runs is not None else 0
        return [maintain_table(p, tables, vacuum_hours=vacuum_hours, removed=trimmed if p == tables.changelog else 0)
                for p in tables.all_tables()]


@dataclass
class Maintained:
    """What maintaining several models did: per model its tables' maintenance, and the models skipped
    because a run held them (or left a run incomplete), with why."""

    done: dict[str, list[TableMaintenance]] = field(default_factory=dict)
    held: dict[str, ModelBusyError] = field(default_factory=dict)


def maintain_all(models: Sequence[ModelTables], *, vacuum_hours: float = 168,
                 changelog_keep_runs: int | None = None) -> Maintained:
    """Maintain every model that no run holds; a held model is skipped and recorded, not an end."""
    out = Maintained()
    for tables in models:
        try:
            out.done[tables.model] = maintain(tables, vacuum_hours=vacuum_hours, changelog_keep_runs=changelog_keep_runs)
        except ModelBusyError as exc:
            out.held[tables.model] = exc
    return out
