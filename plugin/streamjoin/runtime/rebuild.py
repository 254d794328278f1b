"""A model whose plan its state no longer fits, rebuilt side by side and swapped in
(`on_plan_change='rebuild'`, the default).

1. The new plan runs as a model of its own, the *shadow*, under `<model>/_rebuild/<plan
   fingerprint>/`: ordinary runs (the run protocol: exactly once, resumable), the first reading
   every input from its beginning. The model's own tables stay as they were meanwhile, so its
   published views (`ref()`) keep showing the old result. With `rebuild_budget`, each of the
   shadow's runs reads at most that many changes of each input (`budgeted_end`), one run of the
   model each, until it has caught up (`behind`).
2. Once the shadow has caught up, one run of the model, the *swap*, commits table by table as
   every run does (`Run` with `swap_from`):
   - each of the shadow's state tables, its late rows and its result, copied over the model's
     (files copied by the filesystem, schema and operator metadata carried over); state tables
     the new plan does not keep, emptied;
   - the changelog: the net change from the old result to the new one, which downstream models
     read as any run's change;
   - the run log, last, with the new plan's fingerprints and the shadow's offsets, from which the
     next run continues.
   A swap cut short after some of its commits is completed by the next run, as any run is; until
   its run log commit the views keep showing the old result.
3. Then the emptied tables and the model's shadows are deleted.

A rebuild whose output columns differ swaps in the new result with its columns; the changelog
gains the new ones (`plan_change.changelog_columns`). A column whose type changed is refused once
the shadow's result exists: a Delta table keeps a column's type.
"""
from __future__ import annotations

import json
import posixpath
import time
import uuid
from collections import Counter
from typing import Any, Callable, Mapping

import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..sql.plan import JoinPlan
from ..storage import delta_log, filesystem
from ..storage.file_stats import file_stats
from ..storage.results import result_columns, weighted_rows, widened
from ..storage.tables import ModelTables
from ..storage.writes import FileActions, StagedWrite
from ..zset import consolidate
from .plan_change import changelog_columns, plan_fingerprint

#: The folder of a model's shadows, inside its own.
REBUILD_FOLDER = "_rebuild"


def shadow_tables(tables: ModelTables, plan: JoinPlan) -> ModelTables:
    """Where `plan` is rebuilt for the model of `tables` (one folder per plan, so a rebuild cut short
    resumes where it stopped)."""
    return ModelTables(filesystem.join(tables.home, REBUILD_FOLDER), plan_fingerprint(plan))


def budgeted_end(path: str, start: int | None, latest: int, budget: int, *, what: str) -> int:
    """The last version of an input a rebuild's run reads: the versions after `start` whose changes
    (rows of the files they add) come to at most `budget` together, and at least one. A first run
    (`start` None) of an input whose early logs log retention removed reads at least to its oldest
    checkpoint, the first version whose snapshot can still be read."""
    first = -1 if start is None else start
    if start is None:
        first = delta_log.oldest_readable(path) - 1
    rows: Counter = Counter()
    for version, kind, file, data_change in delta_log.log_actions(path, first, latest, what=what):
        if kind != "remove" and data_change:
            rows[version] += file.num_records
    end, total = first, 0
    for version in range(first + 1, latest + 1):
        total += rows[version]
        if total > budget and end > first:
            break
        end = version
    return end


def behind(plan: JoinPlan, manifest: Mapping[str, Any] | None) -> dict[str, dict[str, int | None]]:
    """The inputs that a rebuild, whose last run has `manifest`, has not read to their latest
    version yet: the version it read to and the latest."""
    offsets = (manifest or {}).get("offsets", {})
    out = {}
    for name, spec in plan.inputs.items():
        latest = delta_log.version(spec.location)
        read = offsets.get(name, {}).get("end")
        if read is None or (latest is not None and read < latest):
            out[name] = {"read_to": read, "latest": latest}
    return out


def swap_source(shadow: ModelTables) -> dict[str, Any]:
    """What the swap's manifest records of the shadow: where it is, the version of each of its
    tables that the swap copies (so a resumed swap copies the same), and its runs (id, start time,
    offsets): the runs that read the rows of the rebuilt result, whose times a lookup join's batch
    view gives those rows (`batch_views.runs_sql`) once the shadow is gone."""
    log = delta_log.table(shadow.runs).to_pyarrow_table(columns=["run_id", "manifest"]).to_pylist()
    runs = [{"run_id": r["run_id"], "started": m["started"], "offsets": m["offsets"]}
            for r in sorted(log, key=lambda r: r["run_id"]) for m in [json.loads(r["manifest"])]]
    return {"root": shadow.root, "model": shadow.model,
            "versions": {p: delta_log.version(p) for p in _copied(shadow)}, "runs": runs}


def shadow_of(manifest: Mapping[str, Any]) -> ModelTables:
    return ModelTables(manifest["swap"]["root"], manifest["swap"]["model"])


def _copied(shadow: ModelTables) -> list[str]:
    """The shadow's tables a swap copies: its state, its late rows (once it has any), its result."""
    return [p for p in shadow.all_tables() if p not in (shadow.changelog, shadow.runs)]


def _counterpart(path: str, source: ModelTables, target: ModelTables) -> str:
    return filesystem.join(target.home, filesystem.relative(path, source.home))


def net_change(spark: SparkSession, plan: JoinPlan, tables: ModelTables, versions: Mapping[str, int | None],
               shadow: ModelTables, pinned: Mapping[str, int | None]) -> DataFrame:
    """The change from the model's result (at `versions`) to the shadow's (at `pinned`), as a run's
    output change: rows with weights, in the changelog's columns when the output's columns changed
    (`plan_change.changelog_columns`)."""
    old_schema = result_columns(tables.result, versions[tables.result])
    new_schema = result_columns(shadow.result, pinned[shadow.result])
    columns = changelog_columns(plan, tables, new_schema, old_schema, change="its state was rebuilt side by side")
    new = weighted_rows(spark, shadow.result, pinned[shadow.result], new_schema, 1)
    old = weighted_rows(spark, tables.result, versions[tables.result], old_schema, -1)
    if columns is None:
        return consolidate(new.unionByName(old), new_schema.names)
    return consolidate(widened(new, columns).unionByName(widened(old, columns)), columns.names)


def replacements(tables: ModelTables, shadow: ModelTables, pinned: Mapping[str, int], *, tag: str,
                 committed: Callable[[str], bool]) -> list[StagedWrite]:
    """The swap's writes of the model's state, late rows and result: copies of the shadow's tables,
    replacing every live file, schema and operator metadata; empty for the model's state tables
    (and late rows) the shadow has none of. Tables `committed` already (a resumed swap) are left out."""
    writes = []
    for source in pinned:
        target = _counterpart(source, shadow, tables)
        if not committed(target):
            writes.append(_copy(source, pinned[source], target, tag))
    for target in retired(tables, shadow):
        if not committed(target):
            writes.append(StagedWrite(target, FileActions(), _schema(target), _partitions(target), overwrite=True))
    return writes


def retired(tables: ModelTables, shadow: ModelTables) -> list[str]:
    """The model's state tables and late rows that the shadow has no counterpart of."""
    kept = {_counterpart(p, shadow, tables) for p in _copied(shadow)}
    late = [tables.late_rows] if tables.late_rows in tables.all_tables() else []
    return [p for p in tables.state_tables() + late if p not in kept]


def _copy(source: str, version: int, target: str, tag: str) -> StagedWrite:
    now = int(time.time() * 1000)
    adds = []
    for f in delta_log.data_files(source, version):
        folder, name = posixpath.split(f.path)
        path = posixpath.join(folder, f"{tag}-{uuid.uuid4().hex[:8]}-{name}")
        uri = filesystem.join(target, path)
        filesystem.copy(f.uri, uri)
        fs, local = filesystem.filesystem(uri)
        with fs.open_input_file(local) as handle:  # the footer only
            stats = file_stats(pq.ParquetFile(handle).metadata)
        adds.append(AddAction(path=path, size=f.size, partition_values=dict(f.partition), modification_time=now,
                              data_change=True, stats=json.dumps(stats)))
    return StagedWrite(target, FileActions(known=adds), _schema(source, version), _partitions(source),
                       metadata=delta_log.operator_metadata(source, version), overwrite=True)


def _schema(path: str, version: int | None = None) -> StructType:
    return from_arrow_schema(delta_log.table_schema(path, version))


def _partitions(path: str) -> tuple[str, ...]:
    return tuple(delta_log.table(path).metadata().partition_columns)


def clean_up(tables: ModelTables, shadow: ModelTables) -> None:
    """After the swap: delete the emptied tables, then the shadow and any other left from a
    rebuild of another plan that never swapped in."""
    for path in retired(tables, shadow):
        filesystem.delete_dir(path)
    filesystem.delete_dir(shadow.root)

