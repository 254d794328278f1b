"""Delta file statistics (numRecords, min/max, nullCount) read from a Parquet file's footer.

Only the footer is read; min/max are given for types whose Parquet statistics are exact
(integers, floating point, strings, dates), so readers can skip files safely.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _has_exact_stats(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_string(arrow_type) or pa.types.is_date(arrow_type))


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def file_stats(meta: pq.FileMetaData) -> dict[str, Any]:
    """Statistics of one Parquet file, from its footer, in the Delta `add.stats` JSON layout."""
    schema = meta.schema.to_arrow_schema()
    stats: dict[str, Any] = {"numRecords": meta.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for i, field in enumerate(schema):
        nulls = 0
        lo = hi = None
        exact = True
        with_min_max = _has_exact_stats(field.type)
        for g in range(meta.num_row_groups):
            s = meta.row_group(g).column(i).statistics
            if s is None:
                exact = False
                break
            nulls += s.null_count or 0
            if with_min_max and s.has_min_max:
                lo = s.min if lo is None or s.min < lo else lo
                hi = s.max if hi is None or s.max > hi else hi
        if not exact:
            continue
        stats["nullCount"][field.name] = nulls
        lo, hi = _json_value(lo), _json_value(hi)
        if lo is not None and hi is not None:
            if isinstance(lo, float) and (lo != lo or hi != hi):
                continue
            stats["minValues"][field.name] = lo
            stats["maxValues"][field.name] = hi
    return stats
