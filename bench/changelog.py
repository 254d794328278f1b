"""Changelogs for benchmarks: build them from inserts, replay them, cut and write them.

A *changelog* is a table of data columns followed by ``_row_kind`` (``+I -U +U -D``).
Read as a Z-set in order, ``+I``/``+U`` rows carry weight +1 and ``-U``/``-D`` rows
weight -1; the *snapshot* after a prefix is every row whose summed weight is positive,
repeated that many times.

Everything here is vectorised: no Python loop runs per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

ROW_KIND = "_row_kind"
RowKind = Literal["+I", "-U", "+U", "-D"]
ROW_KINDS: tuple[RowKind, ...] = ("+I", "-U", "+U", "-D")
_WEIGHTS = np.array([1, -1, 1, -1], dtype=np.int64)  # indexed like ROW_KINDS
_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = range(4)

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

Columns = dict[str, np.ndarray]
"""Rows as numpy columns (strings as pool indexes), cheap to take and revise."""

Revise = Callable[[Columns, Ints], Columns]
"""``revise(rows, version)`` returns version ``version[i]`` of row ``i``.

Version 0 must be the row itself, consecutive versions must differ, and the columns
that identify a row (its key) must stay unchanged.
"""


class ChangelogError(ValueError):
    """Raised when a changelog retracts a row that is not live or has an unknown row kind."""


@dataclass(frozen=True, kw_only=True)
class ChangePlan:
    """How many updates and deletes to mix into a stream of inserts, and how late.

    Fractions are per inserted row: ``update_fraction=0.05`` on 1,000 inserts adds 50
    updates (a ``-U``/``+U`` pair each). A change to a row lands an exponentially
    distributed number of positions (mean ``mean_delay``) after the row's insert.
    """

    update_fraction: float = 0.0
    delete_fraction: float = 0.0
    mean_delay: float = 10_000.0

    def __post_init__(self) -> None:
        problems = []
        if not self.update_fraction >= 0:
            problems.append(f"update_fraction must be >= 0, got {self.update_fraction}")
        if not 0 <= self.delete_fraction <= 1:
            problems.append(f"delete_fraction must be in [0, 1], got {self.delete_fraction}")
        if not self.mean_delay > 0:
            problems.append(f"mean_delay must be > 0, got {self.mean_delay}")
        if problems:
            raise ValueError("invalid ChangePlan: " + "; ".join(problems))

    @property
    def append_only(self) -> bool:
        """True when the plan adds no updates and no deletes."""
        return self.update_fraction == 0 and self.delete_fraction == 0


@dataclass(frozen=True)
class _Changes:
    """Change rows in changelog order: which insert each revises, to which version, how."""

    row: Ints
    version: Ints
    kind: Ints
    after_inserts: Ints  # the change follows this many inserts


def build(
    inserts: Columns,
    positions: Ints,
    revise: Revise,
    plan: ChangePlan,
    rng: np.random.Generator,
) -> tuple[Columns, Ints]:
    """Turn insert-only rows (at increasing ``positions``) into a consistent changelog.

    Each update retracts the row's current version (``-U``) and is immediately followed
    by the next version (``+U``); each delete retracts the current version (``-D``) of a
    row deleted at most once, after all of its updates. Returns the changelog's rows
    and their row kinds as indexes into ``ROW_KINDS``.
    """
    n = len(positions)
    if plan.append_only or n == 0:
        return inserts, np.zeros(n, dtype=np.int64)
    changes = _plan_changes(np.asarray(positions, dtype=np.float64), plan, rng)
    order = _merge_order(n, changes.after_inserts)
    row = np.concatenate([np.arange(n), changes.row])[order]
    version = np.concatenate([np.zeros(n, dtype=np.int64), changes.version])[order]
    kind = np.concatenate([np.zeros(n, dtype=np.int64), changes.kind])[order]
    return _revised(inserts, row, version, revise), kind


def _revised(inserts: Columns, row: Ints, version: Ints, revise: Revise) -> Columns:
    """Version ``version[i]`` of insert ``row[i]``; only rows with a nonzero version are revised."""
    rows = {name: column[row] for name, column in inserts.items()}
    changed = np.flatnonzero(version)
    revised = revise({name: column[changed] for name, column in rows.items()}, version[changed])
    for name, column in rows.items():
        column[changed] = revised[name]
    return rows


def with_row_kind(data: pa.Table, kinds: Ints) -> pa.Table:
    """Append the ``_row_kind`` column, given as indexes into ``ROW_KINDS``."""
    names = pa.array(ROW_KINDS, type=pa.string())
    return data.append_column(ROW_KIND, names.take(pa.array(kinds, type=pa.int64())))


def _plan_changes(positions: Floats, plan: ChangePlan, rng: np.random.Generator) -> _Changes:
    """Draw deletes, then updates before them, and order all change rows by time."""
    n = len(positions)
    deleted = rng.choice(n, size=round(plan.delete_fraction * n), replace=False)
    deleted_at = np.full(n, np.inf)
    deleted_at[deleted] = positions[deleted] + rng.exponential(plan.mean_delay, len(deleted))
    updated = rng.integers(0, n, size=round(plan.update_fraction * n))
    updated_at = _update_times(positions[updated], deleted_at[updated], plan, rng)
    version = _versions(updated, updated_at)
    final_version = np.bincount(updated, minlength=n)[deleted]
    row = np.concatenate([updated, deleted])
    time = np.concatenate([updated_at, deleted_at[deleted]])
    is_delete = np.repeat([0, 1], [len(updated), len(deleted)])
    event_version = np.concatenate([version, final_version])
    order = np.lexsort((row, event_version, is_delete, time))
    return _expand(row[order], event_version[order], is_delete[order], time[order], positions)


def _update_times(
    inserted_at: Floats, deleted_at: Floats, plan: ChangePlan, rng: np.random.Generator
) -> Floats:
    """Time of each update: exponentially after the insert, or between insert and delete."""
    times = inserted_at + rng.exponential(plan.mean_delay, len(inserted_at))
    doomed = np.isfinite(deleted_at)
    span = deleted_at[doomed] - inserted_at[doomed]
    times[doomed] = inserted_at[doomed] + span * rng.random(int(doomed.sum()))
    return times


def _versions(rows: Ints, times: Floats) -> Ints:
    """Number each update 1, 2, ... in time order among the updates of the same row."""
    order = np.lexsort((times, rows))
    ranks = np.arange(len(rows))
    sorted_rows = rows[order]
    first = np.r_[True, sorted_rows[1:] != sorted_rows[:-1]] if len(rows) else np.zeros(0, bool)
    group_start = np.maximum.accumulate(np.where(first, ranks, 0))
    versions = np.empty(len(rows), dtype=np.int64)
    versions[order] = ranks - group_start + 1
    return versions


def _expand(
    row: Ints, version: Ints, is_delete: Ints, time: Floats, positions: Floats
) -> _Changes:
    """Expand time-ordered change events into rows: ``-U``+``+U`` per update, ``-D`` per delete."""
    sizes = 2 - is_delete
    event = np.repeat(np.arange(len(row)), sizes)
    second = np.arange(len(event)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    deletes = is_delete[event] == 1
    kind = np.where(deletes, _DELETE, np.where(second == 0, _UPDATE_BEFORE, _UPDATE_AFTER))
    emitted = np.where(deletes, version[event], version[event] - 1 + second)
    after = np.searchsorted(positions, time, side="right")[event]
    return _Changes(row=row[event], version=emitted, kind=kind, after_inserts=after)


def _merge_order(inserts: int, after_inserts: Ints) -> Ints:
    """Interleave inserts (in order) with change rows that follow ``after_inserts`` inserts."""
    changes = len(after_inserts)
    before = np.cumsum(np.bincount(after_inserts, minlength=inserts + 1)[:inserts])
    insert_at = np.arange(inserts) + before
    change_at = np.arange(changes) + after_inserts
    order = np.empty(inserts + changes, dtype=np.int64)
    order[insert_at] = np.arange(inserts)
    order[change_at] = inserts + np.arange(changes)
    return order


def weights(changelog: pa.Table) -> Ints:
    """Weight of each change: +1 for ``+I``/``+U``, -1 for ``-U``/``-D``."""
    codes = pc.index_in(changelog[ROW_KIND], value_set=pa.array(ROW_KINDS))
    if codes.null_count:
        bad = pc.unique(pc.filter(changelog[ROW_KIND], pc.is_null(codes))).to_pylist()
        raise ChangelogError(f"unknown row kinds {bad}; expected one of {list(ROW_KINDS)}")
    return _WEIGHTS[codes.to_numpy()]


def consolidate(changelog: pa.Table) -> pa.Table:
    """The Z-set of a changelog: each distinct data row with its summed ``_weight``.

    Rows with weight 0 are dropped; the others keep the order of their first appearance.
    """
    data = changelog.drop_columns([ROW_KIND])
    weighted = data.append_column("_weight", pa.array(weights(changelog))).append_column(
        "_first", pa.array(np.arange(changelog.num_rows, dtype=np.int64))
    )
    summed = weighted.group_by(data.column_names, use_threads=False).aggregate(
        [("_weight", "sum"), ("_first", "min")]
    )
    summed = summed.filter(pc.not_equal(summed["_weight_sum"], 0))
    order = pc.sort_indices(summed["_first_min"])
    zset = summed.select([*data.column_names, "_weight_sum"]).take(order)
    schema = data.schema.append(pa.field("_weight", pa.int64()))
    return zset.rename_columns(schema.names).cast(schema)


def snapshot(changelog: pa.Table, upto: int | None = None) -> pa.Table:
    """Live rows after applying the first ``upto`` changes (all by default), as a multiset.

    Raises:
        ChangelogError: if some row ends with a negative weight (retracted more than inserted).
    """
    prefix = changelog if upto is None else changelog.slice(0, upto)
    zset = consolidate(prefix)
    counts = zset["_weight"].to_numpy()
    if (counts < 0).any():
        first = zset.filter(pc.less(zset["_weight"], 0)).slice(0, 1).to_pylist()
        raise ChangelogError(f"changelog retracts rows that are not live, e.g. {first}")
    return zset.drop_columns(["_weight"]).take(np.repeat(np.arange(len(counts)), counts))


def batches(changelog: pa.Table, size: int) -> Iterator[pa.Table]:
    """Cut a changelog into consecutive batches of ``size`` changes (the last may be short).

    A ``-U``/``+U`` pair may straddle two batches, as it may between two Flink checkpoints.
    """
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    for start in range(0, changelog.num_rows, size):
        yield changelog.slice(start, size)


def write_batch(path: str | Path, batch: pa.Table) -> None:
    """Append one changelog batch to the Delta table at ``path`` (created if missing)."""
    write_deltalake(str(path), batch, mode="append")


def write_changelog(path: str | Path, changelog: pa.Table, *, batch_size: int | None = None) -> int:
    """Append a changelog to a Delta table, one commit per batch; return the commit count."""
    parts = list(batches(changelog, batch_size or max(changelog.num_rows, 1))) or [changelog]
    for batch in parts:
        write_batch(path, batch)
    return len(parts)
