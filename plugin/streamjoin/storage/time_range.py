"""The range of an input's event times in a run's files, read from their Parquet footers.

A time-based join advances its watermark by the largest event time each input brought this run,
and reads the state its rows can match. Asking Spark for those figures is a job of its own, before
the run's write pass; a file's footer holds them exactly: the minimum and maximum of each row
group's column, as stored. So where every file of the run stores the event time as Spark reads
it (a timestamp adjusted to UTC, in milliseconds or microseconds, as Spark, delta-rs and pyarrow
write it) and every row group has statistics, the range comes from the footers, and the run keeps
its one job. Only footers are read, on the driver: no row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .delta_log import DataFile
from .filesystem import filesystem, options_for

_SCALE = {"ms": 1000, "us": 1}  # to microseconds


@dataclass(frozen=True)
class TimeRange:
    """The smallest and largest event time (microseconds since the epoch), None when every value is NULL."""

    lo: int | None
    hi: int | None


def time_range(files: Sequence[DataFile], column: str) -> TimeRange | None:
    """The range of the timestamp `column` over the rows of `files`, as Spark reads them; None
    when a footer cannot tell it exactly (no statistics, a type whose stored values Spark converts, or
    a file with a deletion vector).

    Names match as Spark matches them, ignoring case. A file without the column holds NULLs there
    (the table gained it later), as Delta reads it.
    """
    if any(f.deleted for f in files):
        return None  # a footer's figures count the rows a deletion vector deletes
    lo: int | None = None
    hi: int | None = None
    for f in files:
        fs, path = filesystem(f.uri, options_for(f.uri))
        meta = pq.read_metadata(path, filesystem=fs)
        leaves = [meta.schema.column(i).path.lower() for i in range(meta.num_columns)]
        if leaves.count(column.lower()) != 1:
            if column.lower() in leaves:
                return None
            continue
        index = leaves.index(column.lower())
        kind = meta.schema.to_arrow_schema().field(meta.schema.column(index).path).type
        if not pa.types.is_timestamp(kind) or kind.tz is None or kind.unit not in _SCALE:
            return None
        scale = _SCALE[kind.unit]
        for group in range(meta.num_row_groups):
            chunk = meta.row_group(group).column(index)
            stats = chunk.statistics
            if chunk.num_values == 0:
                continue  # an empty row group (an empty file has one)
            if stats is None:
                return None
            if not stats.has_min_max:
                if stats.has_null_count and stats.null_count == chunk.num_values:
                    continue  # every value NULL
                return None
            low, high = stats.min_raw * scale, stats.max_raw * scale
            lo = low if lo is None else min(lo, low)
            hi = high if hi is None else max(hi, high)
    return TimeRange(lo, hi)
