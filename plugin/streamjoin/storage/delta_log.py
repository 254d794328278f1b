"""The Delta I/O layer: delta-rs owns the log; data files are written and read in Spark tasks (see
`writes` and `file_reads`).

Every commit of a run carries an idempotent app transaction (`streamjoin:<model>`, version =
run id) and the run's manifest in its commit info, so a retried run can tell which tables it
already committed and with which input offsets.
"""
from __future__ import annotations

import io
import json
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Field
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, RemoveAction, Transaction, create_table_with_add_actions
from pyspark.sql.types import StructType

from deltalake.exceptions import CommitFailedError, DeltaError

from ..errors import ConcurrentRunError, InputError
from . import change_data, filesystem
from .file_stats import file_stats
from .filesystem import local_path

MANIFEST_KEY = "streamjoin.manifest"
#: Versions between checkpoints of the tables streamjoin makes (Delta's default: 100). Opening a
#: table replays the log's JSON commits since its last checkpoint, and a run opens each of its
#: tables a few times: at 100 an open took up to 22 ms (1 ms at 1 commit, measured with delta-rs
#: 1.6), at 10 it stays under 6 ms, for a checkpoint written every tenth run.
CHECKPOINT_INTERVAL = 10
#: Commit info naming a maintenance operation ("retention", "compact"); a retention commit's removes trim history.
OPERATION_KEY = "streamjoin.operation"


#: Tables read at their latest version, kept while a block reads them (see `latest_once`); None: no table.
_latest: ContextVar[dict[str, DeltaTable | None] | None] = ContextVar("latest", default=None)


@contextmanager
def latest_once() -> Iterator[None]:
    """Within the block, each table's latest version is read from its log once, and `table`,
    `exists`, `version`, `app_version` and `latest_metadata` all answer from that one read.
    For a block that only reads (a run planning itself), which so sees one version of each table."""
    token = _latest.set({})
    try:
        yield
    finally:
        _latest.reset(token)


def _latest_once(path: str) -> DeltaTable | None:
    cache = _latest.get()
    assert cache is not None
    if path not in cache:
        cache[path] = _open(path) if _is_table(path) else None
    return cache[path]


def _open(path: str, table_version: int | None = None) -> DeltaTable:
    opened = _opened.get()
    if opened is not None and table_version is not None:
        known = opened.get((path, table_version))
        if known is not None and known.version() == table_version:  # a commit moves the table it was made on
            return known
    dt = DeltaTable(path, version=table_version, storage_options=filesystem.options_for(path) or None)
    if opened is not None:
        opened[(path, dt.version())] = dt
    return dt


def _forget(path: str) -> None:
    """Drop what the block holds of a table whose log was deleted (its versions are no longer its)."""
    for held in (_opened.get(), _listings.get()):
        for key in [k for k in (held or {}) if k[0] == path]:
            del held[key]  # type: ignore[index]


def _is_table(path: str) -> bool:
    return DeltaTable.is_deltatable(path, storage_options=filesystem.options_for(path) or None)


def table(path: str, table_version: int | None = None) -> DeltaTable:
    """The Delta table at `path` (latest, or at `table_version`), with its location's storage options."""
    if table_version is None and _latest.get() is not None:
        found = _latest_once(path)
        if found is not None:
            return found
    return _open(path, table_version)


def table_schema(path: str, table_version: int | None = None) -> pa.Schema:
    """The Arrow schema of the table at `path` (latest, or at `table_version`)."""
    return pa.schema(table(path, table_version).schema().to_arrow())


def root_of(dt: DeltaTable) -> str:
    """A table's root as its data files are named under it: a plain path for a local table, else its URI."""
    return local_path(dt.table_uri).rstrip("/")


def exists(path: str) -> bool:
    if _latest.get() is not None:
        return _latest_once(path) is not None
    return _is_table(path)


def version(path: str) -> int | None:
    """The table's latest version, or None when there is no table yet."""
    return table(path).version() if exists(path) else None


def app_version(path: str, app_id: str, table_version: int | None = None) -> int | None:
    """The last run id this app committed to the table (Delta `txn` action), at its latest version
    or at `table_version`."""
    if table_version is not None:
        return table(path, table_version).transaction_version(app_id)
    return table(path).transaction_version(app_id) if exists(path) else None


def committed_after(path: str, table_version: int) -> bool:
    """Whether the table has a version after `table_version`: one look for the next version's commit
    file, where finding the latest version opens the log and replays it since its last checkpoint."""
    return filesystem.exists(change_data.commit_file(path, table_version + 1))


def latest_metadata(path: str, key: str, table_version: int | None = None) -> str | None:
    """The value of a commit-info key in the newest commit (at or before `table_version`) that has it.

    Runs commit their metadata (manifest, watermark, counters) with their data; maintenance
    commits (compaction, retention) carry none, so the newest commit is not always a run's."""
    if table_version is None:
        table_version = version(path)
        if table_version is None:
            return None
    dt = table(path)
    for entry in newest_commits(dt, dt.version() - table_version + 1):
        if entry.get("version", -1) <= table_version and key in entry:
            return entry[key]
    return None


def newest_commits(dt: DeltaTable, first: int = 4) -> Iterator[dict[str, Any]]:
    """The table's commit infos, newest first, read from the log in growing chunks (`first` commits,
    then four times as many each time): a reader that stops early reads only the newest commits,
    however many runs the table has seen (its log keeps every commit)."""
    seen, depth = 0, max(1, first)
    while True:
        entries = dt.history(depth)
        yield from entries[seen:]
        if len(entries) < depth:
            return
        seen, depth = len(entries), depth * 4


def operator_metadata(path: str, table_version: int) -> dict[str, str]:
    """Every `streamjoin.*` commit-info key that operators keep (watermarks, counters, …) as
    `latest_metadata` reads it at `table_version`: what a copy of the table must carry on."""
    own = (MANIFEST_KEY, OPERATION_KEY, "streamjoin.run")
    found: dict[str, str] = {}
    for entry in table(path).history():  # newest first
        if entry.get("version", -1) <= table_version:
            for key, value in entry.items():
                if key.startswith("streamjoin.") and key not in own:
                    found.setdefault(key, value)
    return found


@dataclass(frozen=True)
class DataFile:
    """One data file of a table version (`version`: the commit that added or removed it, when known)."""

    uri: str
    partition: Mapping[str, str | None]
    num_records: int
    version: int | None = None
    stats: Mapping[str, Any] | None = None  # the Delta statistics of its top-level columns, when written
    size: int = 0  # bytes
    path: str = ""  # as the Delta log names it (relative to the table's root, or absolute)
    deleted: tuple[int, ...] = ()  # the positions of the rows its deletion vector deletes (read it without them)

    def stat(self, kind: str, column: str) -> Any:
        """A statistic of a column (`minValues`, `maxValues`, `nullCount`), None when unknown."""
        return (self.stats or {}).get(kind, {}).get(column)


#: Listings of pinned table versions, kept while a run holds them (see `pinned_versions`).
_listings: ContextVar[dict[tuple[str, int], tuple[DataFile, ...]] | None] = ContextVar("listings", default=None)
#: The tables opened while a run holds them, by path and version (see `pinned_versions`).
_opened: ContextVar[dict[tuple[str, int], DeltaTable] | None] = ContextVar("opened", default=None)


@contextmanager
def pinned_versions() -> Iterator[None]:
    """Within the block, a table version is read from its log once: the table opened at it (or
    opened at its latest version while that was it) serves every later use of that version, and
    so does its file listing. For a run, whose table versions are pinned at its start and which
    holds its model's lease: its plan, its reads and its commits then replay each log once."""
    listings, opened = _listings.set({}), _opened.set({})
    try:
        yield
    finally:
        _listings.reset(listings)
        _opened.reset(opened)


def data_files(path: str, table_version: int | None) -> list[DataFile]:
    """Live data files at a version (none before the table exists)."""
    if table_version is None:
        return []
    return list(_listing(path, table_version))


def _listing(path: str, table_version: int) -> tuple[DataFile, ...]:
    cache = _listings.get()
    if cache is not None and (path, table_version) in cache:
        return cache[(path, table_version)]
    dt = table(path, table_version)
    root = dt.table_uri.rstrip("/")
    deleted = _deleted_rows(dt)
    out = []
    for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        part = {k[len("partition."):]: v for k, v in a.items() if k.startswith("partition.")}
        rel = a["path"]
        uri = local_path(rel if "://" in rel or rel.startswith("/") else f"{root}/{rel}")
        out.append(DataFile(uri=uri, partition={k: None if v is None else str(v) for k, v in part.items()},
                            num_records=int(a.get("num_records") or 0), stats=_flat_stats(a),
                            size=int(a.get("size_bytes") or 0), path=rel, deleted=deleted.get(uri, ())))
    if cache is not None:
        cache[(path, table_version)] = tuple(out)
    return tuple(out)


def _deleted_rows(dt: DeltaTable) -> dict[str, tuple[int, ...]]:
    """The rows deleted by the deletion vectors of a table version's files (written by engines that
    delete, update and merge without rewriting files: Databricks, Delta Lake 3 with them enabled), by
    file URI: delta-rs reads the vectors, inline or in their files, as keep masks."""
    if "deletionVectors" not in (dt.protocol().reader_features or []):
        return {}
    import numpy as np

    masks = pa.table(pa.RecordBatchReader.from_stream(dt.deletion_vectors()))
    return {local_path(uri): tuple(np.flatnonzero(~np.asarray(mask, dtype=bool)).tolist())
            for uri, mask in zip(masks["filepath"].to_pylist(), masks["selection_vector"].to_pylist())}


def files_with_deletions(path: str, table_version: int | None) -> list[str]:
    """The URIs of a table version's data files that have deletion vectors."""
    return [] if table_version is None else sorted(_deleted_rows(table(path, table_version)))


def _deletions(path: str, table_version: int) -> dict[str, tuple[int, ...]]:
    """The rows each live file's deletion vector deletes at a table version, by its path in the log."""
    return {f.path: f.deleted for f in _listing(path, table_version) if f.deleted}


def _flat_stats(action: Mapping[str, Any]) -> dict[str, Any] | None:
    """Statistics from a flattened add action (`num_records`, `min.<c>`, `max.<c>`, `null_count.<c>`)."""
    if action.get("num_records") is None:
        return None
    stats: dict[str, Any] = {"numRecords": int(action["num_records"]), "minValues": {}, "maxValues": {}, "nullCount": {}}
    for key, value in action.items():
        for prefix, kind in (("min.", "minValues"), ("max.", "maxValues"), ("null_count.", "nullCount")):
            if key.startswith(prefix) and value is not None:
                stats[kind][key[len(prefix):]] = value
    return stats


def oldest_readable(path: str) -> int:
    """The oldest version of a table whose snapshot can be read: 0, or, once log retention removed
    the log's first versions, its oldest checkpoint."""
    names = filesystem.list_names(filesystem.join(root_of(table(path)), "_delta_log"))
    if f"{0:020d}.json" in names:
        return 0
    return min(int(n.split(".")[0]) for n in names if ".checkpoint." in n and n.endswith(".parquet"))


def log_actions(path: str, start_exclusive: int, end: int, *, what: str) -> Iterator[tuple[int, str, DataFile, bool]]:
    """(version, kind, file, data_change) of the add/remove/cdc actions of versions (start, end], read from the JSON log.

    The removes of a retention commit (`python -m streamjoin maintain`) trim history: no data change."""
    root = root_of(table(path, end))
    deletions: dict[int, dict[str, tuple[int, ...]]] = {}  # each version listed once, for its deletion vectors

    def deleted_by(kind: str, v: int, rel: str) -> tuple[int, ...]:
        """The rows a file's deletion vector deletes: an added file is live at v, a removed one was before."""
        live = v if kind == "add" else v - 1
        if live not in deletions:
            deletions[live] = _deletions(path, live)
        return deletions[live].get(rel, ())

    for v in range(start_exclusive + 1, end + 1):
        try:
            text = filesystem.read_bytes(change_data.commit_file(root, v)).decode("utf-8")
        except FileNotFoundError:
            raise InputError(f"the Delta log of version {v} of {path} is gone (log retention?); run with --full-refresh",
                             input_name=what) from None
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        retention = any(a.get("commitInfo", {}).get(OPERATION_KEY) == "retention" for a in actions)
        for action in actions:
            for kind in ("add", "remove", "cdc"):
                if kind in action:
                    a = action[kind]
                    rel = unquote(a["path"])
                    stats = json.loads(a["stats"]) if a.get("stats") else None
                    deleted = deleted_by(kind, v, rel) if a.get("deletionVector") else ()
                    yield v, kind, DataFile(uri=rel if rel.startswith("/") or "://" in rel else f"{root}/{rel}",
                                            partition=a.get("partitionValues") or {},
                                            num_records=int((stats or {}).get("numRecords") or 0), version=v,
                                            stats=stats, size=int(a.get("size") or 0), path=rel,
                                            deleted=deleted), bool(a.get("dataChange", True)) and not retention


def added_between(path: str, start_exclusive: int | None, end: int, *, what: str) -> list[DataFile]:
    """Data files that versions (start, end] added to an append-only table.

    Files rewritten without changing data (compaction, `dataChange=false`) are skipped; a
    version that removed data is an error, because a changelog table only grows.
    """
    if start_exclusive is None:
        return data_files(path, end)
    out: list[DataFile] = []
    for v, kind, f, data_change in log_actions(path, start_exclusive, end, what=what):
        if kind == "remove" and data_change:
            raise InputError(f"version {v} of {path} removed data; a changelog input must be append-only "
                             "(run with --full-refresh to replay it)", input_name=what)
        if kind == "add" and data_change:
            out.append(f)
    return out


CHANGE_TYPE = "_change_type"  # a change data feed's column of change types


def changed_between(path: str, start_exclusive: int, end: int, *, what: str) -> list[tuple[str, DataFile]]:
    """The change data feed of versions (start, end]: per version its `cdc` files if it wrote any,
    else its added files (inserts) and removed files (deletes), as Delta's protocol defines."""
    per_version: dict[int, list[tuple[str, DataFile]]] = {}
    for v, kind, f, data_change in log_actions(path, start_exclusive, end, what=what):
        if data_change or kind == "cdc":
            per_version.setdefault(v, []).append((kind, f))
    out: list[tuple[str, DataFile]] = []
    for v, entries in sorted(per_version.items()):
        cdc = [e for e in entries if e[0] == "cdc"]
        out.extend(cdc or entries)
    for kind, f in out:
        if kind == "remove" and not filesystem.exists(f.uri):
            raise InputError(f"{f.uri}, deleted from {path} in version {f.version}, was vacuumed before this model "
                             "read it; run with --full-refresh", input_name=what)
    return out


def change_feed(path: str, start_exclusive: int | None, end: int, *, what: str) -> list[tuple[str | None, DataFile]]:
    """A table's change data feed of versions (start, end] in log order (start None: the table at
    `end`, every row an insert): each file with the change type of its rows (`insert`, `delete`),
    or None for a `cdc` file, whose rows carry theirs in `CHANGE_TYPE`."""
    if start_exclusive is None:
        return [("insert", f) for f in data_files(path, end)]
    types = {"add": "insert", "remove": "delete", "cdc": None}
    return [(types[kind], f) for kind, f in changed_between(path, start_exclusive, end, what=what)]


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema, timestamps as UTC microseconds (what Spark writes)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def write_small(rows: pa.Table, path: str, *, tag: str, folder: str = "data") -> list[AddAction]:
    """Write a few rows of bookkeeping (never user data) as one Parquet file; commit nothing."""
    import pyarrow.parquet as pq

    rel = f"{folder}/{tag}-{uuid.uuid4().hex[:12]}.parquet"
    data = write_parquet(rows, filesystem.join(path, rel))
    return [AddAction(path=rel, size=len(data), partition_values={}, modification_time=int(time.time() * 1000),
                      data_change=True, stats=json.dumps(file_stats(pq.read_metadata(io.BytesIO(data)))))]


def write_parquet(rows: pa.Table, uri: str) -> bytes:
    """Write `rows` as one Parquet file at `uri`; the file's bytes (its size and footer, without reading it back)."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    filesystem.write_bytes(uri, buffer.getvalue())
    return buffer.getvalue()


def table_bytes(path: str, table_version: int | None) -> int:
    """The bytes of a table version's live data files (0 before the table exists)."""
    return sum(f.size for f in data_files(path, table_version))


def rows_after(path: str, table_version: int | None, actions: Sequence[AddAction | RemoveAction]) -> int:
    """How many rows the table's live files hold once `actions` are committed on `table_version`."""
    live = {f.path: f.num_records for f in data_files(path, table_version)}
    removed = sum(live.get(a.path, 0) for a in actions if isinstance(a, RemoveAction))
    return sum(live.values()) - removed + added_rows(actions)


def added_rows(actions: Sequence[AddAction | RemoveAction]) -> int:
    """How many rows the files that `actions` add hold (from their statistics)."""
    return sum(json.loads(a.stats)["numRecords"] for a in actions if isinstance(a, AddAction) and a.stats)


def remove_actions(files: Sequence[DataFile]) -> list[RemoveAction]:
    """RemoveActions for live files (used when a table's rows are rewritten)."""
    now = int(time.time() * 1000)
    return [RemoveAction(path=f.path, data_change=True, deletion_timestamp=now,
                         partition_values=dict(f.partition)) for f in files]


def _add_columns(path: str, schema: DeltaSchema, read: DeltaTable) -> bool:
    """Give the table the columns of `schema` that its version `read` lacks (as nullable columns, in
    a commit of their own, unless an earlier attempt of the run added them): an append alone cannot
    change a Delta table's schema. True if the table now has columns that `read` had not."""
    known = {f.name for f in read.schema().fields}
    new = [f for f in schema.fields if f.name not in known]
    if not new:
        return False
    latest = table(path)
    there = {f.name for f in latest.schema().fields}
    missing = [Field(f.name, f.type, nullable=True) for f in new if f.name not in there]
    if missing:
        latest.alter.add_columns(missing)
    return True


def commit(path: str, actions: Sequence[AddAction | RemoveAction], schema: StructType, *,
           partition_by: Sequence[str] = (), app_id: str, run_id: int, metadata: Mapping[str, Any],
           read_version: int | None | str = "latest", overwrite: bool = False,
           changes: Sequence[AddAction] | None = None) -> None:
    """Commit file actions in one Delta transaction tagged with (app_id, run_id); with `overwrite`,
    the added files replace every live file of the table, and `schema` its schema. Delta cannot
    change a table's partition columns, so an overwrite that does makes the table anew: its log is
    deleted first (its old files stay, unreferenced, for vacuum).

    `changes` (None: the table has no change data feed) are the commit's change data files: the
    table is made with its change data feed on, and a version that changes data names them
    (`change_data.commit`).

    An append whose schema has columns the table lacks adds them first (`_add_columns`).

    With a `read_version` (None: the table did not exist), the commit is made against that
    version: if another writer committed the same app transaction since (or created the table),
    Delta's conflict check fails it with `ConcurrentRunError`. "latest" commits on top of whatever is there.
    """
    props = CommitProperties(custom_metadata=dict(metadata), app_transactions=[Transaction(app_id, run_id)])
    hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
    delta_schema = DeltaSchema.from_arrow(arrow_schema(schema))
    if overwrite and exists(path) and table(path).metadata().partition_columns != list(partition_by):
        filesystem.delete_dir(filesystem.join(path, "_delta_log"))
        _forget(path)
        read_version = None
    try:
        if read_version is None or (read_version == "latest" and not exists(path)):
            if filesystem.is_local(path):
                filesystem.make_dirs(path)
            adds = [a for a in actions if isinstance(a, AddAction)]
            create_table_with_add_actions(local_path(path), delta_schema, adds, mode="error",
                                          partition_by=list(partition_by) or None,
                                          configuration={change_data.CHECKPOINT_INTERVAL_PROPERTY: str(CHECKPOINT_INTERVAL),
                                                         **({} if changes is None else {change_data.FEED_PROPERTY: "true"})},
                                          storage_options=filesystem.options_for(path) or None,
                                          commit_properties=props, post_commithook_properties=hooks)
            return
        target = table(path) if read_version == "latest" else table(path, int(read_version))
        if not overwrite and _add_columns(path, delta_schema, target):
            target = table(path)  # the columns changed since the version the run read: by this run's own hand
        if changes is not None and (actions or overwrite):
            if overwrite:
                actions = [*actions, *remove_actions(data_files(path, target.version()))]
            if not changes:  # a version that changes data names its change data, none included (see change_data)
                stored = [f for f in arrow_schema(schema) if f.name not in partition_by]
                empty = pa.schema([*stored, pa.field(change_data.CHANGE_TYPE, pa.string())]).empty_table()
                changes = write_small(empty, path, tag=f"r{run_id}", folder=change_data.FOLDER)
            change_data.commit(target, path, actions, changes, delta_schema, overwrite=overwrite, app_id=app_id,
                               run_id=run_id, metadata={k: str(v) for k, v in metadata.items()})
            return
        target.create_write_transaction(list(actions), mode="overwrite" if overwrite else "append",
                                       schema=delta_schema, partition_by=list(partition_by) or None,
                                       commit_properties=props, post_commithook_properties=hooks)
    except (CommitFailedError, DeltaError, change_data.VersionTaken) as exc:
        if ("Concurrent" in str(exc) or "already exists" in str(exc)
                or isinstance(exc, (CommitFailedError, change_data.VersionTaken))):
            raise ConcurrentRunError(
                f"another run of the same model committed {path} first ({exc}); this run wrote nothing "
                "there and stops: rerun it to pick up where the other left off") from exc
        raise
