"""A run's change merged into the files of the buckets it retracts from, in Arrow on the executors.

A bucket of the result that a run retracts rows from is rewritten whole (delta-rs writes no deletion
vectors, Delta's one cheaper way to drop a row). Spark routes each such bucket's change rows and the names of its
files to one task (`writes.RunWriter.merge`); the task reads the files with pyarrow, drops the
stored rows the change retracts and adds the rows it inserts (`applied`: only the stored rows that
may equal a retracted row are compared, the rest are kept as stored), writes the result as one new
file of the bucket, and names the files it replaced. The stored rows never become Spark rows: no
shuffle, no aggregation or conversion of them in the JVM.

Rows are told apart as Spark's grouping tells them apart: floating-point -0.0 is 0.0 and every NaN
is one NaN (Spark's `NormalizeFloatingNumbers`), NULLs are equal. `mergeable` admits only the column
types whose Arrow grouping is exactly that; a table with others is merged in Spark instead.

A row whose weight ends negative is a retraction the bucket could not apply: the task counts the
weight and notes a few such rows (as JSON), and writes none of them.
"""
from __future__ import annotations

import json
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, ShortType, StringType, StructType, TimestampNTZType,
                               TimestampType)

from .write_specs import MERGE_BUCKET as BUCKET
from .write_specs import MERGE_URI as URI
from .write_specs import MERGE_WEIGHT as WEIGHT
from .write_specs import MergeSpec, merge_column

#: Bucket files a merge may rewrite, in bytes, from which its buckets go to tasks on every core also in a
#: run planned in one partition: a shuffle (one stage more, about 0.1 s) then halves the rewrite on two
#: cores, where one task rewrites about 64 MB/s (a 5M-change LEFT join's 83 MB result, 100 retractions:
#: its run 3.3–3.4 s in one task, 2.6–2.9 s spread).
SPREAD_BYTES = 16 * 1024 * 1024
EXAMPLES = 3  # unapplied retractions noted per task
COMPARED = 10_000  # stored rows a bucket's retractions may be compared with before it is merged whole
SLICED_DROPS = 256  # rows a merge drops from a bucket's stored rows by slicing around them (more: by a copy)
_NAN = object()  # every NaN's key in `_keys`

_GROUPED_AS_SPARK = (BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType,
                     StringType, BinaryType, DateType, TimestampType, TimestampNTZType)


def mergeable(schema: StructType) -> bool:
    """Whether Arrow groups rows of `schema` as Spark does: flat types only, strings of the binary
    collation (another collation would group 'a' with 'A')."""
    return all(isinstance(f.dataType, _GROUPED_AS_SPARK)
               and getattr(f.dataType, "collation", "UTF8_BINARY") == "UTF8_BINARY" for f in schema.fields)


def merged(held: pa.Table, change: pa.Table) -> pa.Table:
    """The rows of `held` (each of weight 1) and of `change` (its `WEIGHT` column) with their summed
    weights, one row per distinct row, the rows whose weights cancel dropped. Both are cast to `held`'s
    schema; floating-point values are normalized as Spark's grouping normalizes them.

    >>> held = pa.table({"x": pa.array([0.0, 1.0, 1.0], pa.float64())})
    >>> change = pa.table({"x": pa.array([-0.0, 2.0], pa.float64()), WEIGHT: pa.array([-1, 1], pa.int64())})
    >>> sorted(merged(held, change).to_pylist(), key=str)
    [{'x': 1.0, '__merge_weight': 2}, {'x': 2.0, '__merge_weight': 1}]
    """
    names = held.column_names
    ones = held.append_column(WEIGHT, pa.array(np.ones(held.num_rows, np.int64)))
    rows = pa.concat_tables([ones, change.select([*names, WEIGHT]).cast(ones.schema)])
    rows = pa.table([normalized(rows[n]) for n in names] + [rows[WEIGHT]], names=[*names, WEIGHT])
    summed = rows.group_by(names, use_threads=False).aggregate([(WEIGHT, "sum")])
    out = summed.select(names).append_column(WEIGHT, summed[f"{WEIGHT}_sum"])
    return out.filter(pc.not_equal(out[WEIGHT], 0))


def normalized(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floating-point values with -0.0 as 0.0 and one NaN, as Spark groups them; others as they are."""
    if not pa.types.is_floating(values.type):
        return values
    zero, nan = pa.scalar(0.0, values.type), pa.scalar(float("nan"), values.type)
    return pc.if_else(pc.is_nan(values), nan, pc.if_else(pc.equal(values, zero), zero, values))


def expanded(rows: pa.Table) -> pa.Table:
    """Rows of positive weight, each repeated its weight times, without the weight.

    >>> expanded(pa.table({"x": [1, 2, 3], WEIGHT: pa.array([2, -1, 1], pa.int64())}))["x"].to_pylist()
    [1, 1, 3]
    """
    weights = np.maximum(rows[WEIGHT].to_numpy(), 0)
    return rows.drop_columns([WEIGHT]).take(pa.array(np.repeat(np.arange(rows.num_rows), weights)))


def applied(held: pa.Table, change: pa.Table) -> tuple[pa.Table, pa.Table]:
    """`held` (each row of weight 1) with `change` (its `WEIGHT` column) applied: the rows whose summed
    weight is positive, each as often as its weight, as `expanded(merged(held, change))` gives them;
    and the distinct rows whose weight ends negative, with that weight.

    Only the stored rows that may equal a retracted row are compared: those whose every column value
    is one a retracted row has (each column tested on the rows the columns before it left). The others
    are kept as stored, so a bucket with a few retractions is filtered, not grouped whole. When that
    still leaves many rows to compare, the bucket is merged whole.

    >>> held = pa.table({"x": pa.array([1.0, -0.0, 1.0, 2.0], pa.float64())})
    >>> change = pa.table({"x": pa.array([0.0, 1.0, 3.0, 4.0], pa.float64()), WEIGHT: pa.array([-1, -1, 2, -1], pa.int64())})
    >>> kept, short = applied(held, change)
    >>> sorted(kept["x"].to_pylist()), short.to_pylist()
    ([1.0, 2.0, 3.0, 3.0], [{'x': 4.0, '__merge_weight': -1}])
    """
    delta = merged(held.schema.empty_table(), change)
    gone, added = delta.filter(pc.less(delta[WEIGHT], 0)), delta.filter(pc.greater(delta[WEIGHT], 0))
    names = held.column_names
    at = np.arange(held.num_rows)  # the stored rows whose every column so far holds a retracted value
    for name in names:
        values = held[name] if len(at) == held.num_rows else held[name].take(pa.array(at))
        at = at[pc.is_in(normalized(values), value_set=gone[name].combine_chunks(),
                         skip_nulls=False).to_numpy(zero_copy_only=False)]
        if not len(at):
            break
    if len(at) > COMPARED + 8 * gone.num_rows:
        sums = merged(held, change)
        return expanded(sums).cast(held.schema), sums.filter(pc.less(sums[WEIGHT], 0))
    keys = _keys(gone.select(names))
    owed = dict(zip(keys, (-w for w in gone[WEIGHT].to_pylist())))
    dropped = np.zeros(held.num_rows, bool)
    candidates = held.take(pa.array(at)).select(names)
    for position, key in zip(at, _keys(pa.table([normalized(candidates[n]) for n in names], names=names))):
        if owed.get(key, 0) > 0:
            owed[key] -= 1
            dropped[position] = True
    short = gone.select(names).append_column(WEIGHT, pa.array([-owed[k] for k in keys], pa.int64()))
    short = short.filter(pc.less(short[WEIGHT], 0))
    return pa.concat_tables([without(held, np.flatnonzero(dropped)), expanded(added).cast(held.schema)]), short


def without(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    """`rows` without the rows at the sorted `positions`: the slices between them (no copy) for up to
    `SLICED_DROPS` of them, else a filtered copy.

    >>> without(pa.table({"x": [0, 1, 2, 3, 4]}), np.array([1, 3]))["x"].to_pylist()
    [0, 2, 4]
    """
    if len(positions) > SLICED_DROPS:
        keep = np.ones(rows.num_rows, bool)
        keep[positions] = False
        return rows.filter(pa.array(keep))
    bounds = [-1, *positions.tolist(), rows.num_rows]
    return pa.concat_tables([rows.slice(a + 1, b - a - 1) for a, b in zip(bounds, bounds[1:])])


def _keys(rows: pa.Table) -> list[tuple]:
    """Each row of `rows` as a hashable tuple, every NaN as one value (Python's NaN equals nothing)."""
    return [tuple(_NAN if isinstance(v, float) and v != v else v for v in row.values()) for row in rows.to_pylist()]


def merge_task(batches: Iterator[pa.RecordBatch], spec: MergeSpec) -> Iterator[pa.RecordBatch]:
    """Merge every bucket a task's rows name; yield its answer: a row per file written, the counter and the notes."""
    from pyspark import TaskContext

    from .file_reads import read_file
    from .parquet_files import open_file, report

    context = TaskContext.get()
    task = context.partitionId() if context else 0
    received = list(batches)
    rows = pa.Table.from_batches(received) if received else None
    files, unheld, notes = [], 0, []
    options = dict(spec.target.options)
    (partition,) = spec.target.partition_by
    positions = [merge_column(i) for i in range(len(spec.schema))]
    for bucket in pc.unique(rows[BUCKET]).to_pylist() if rows is not None else []:
        mine = rows.filter(pc.equal(rows[BUCKET], bucket))
        uris = sorted({u for u in mine[URI].to_pylist() if u is not None})
        stored = [read_file(uri, spec.schema, options) for uri in uris]
        held = pa.concat_tables(stored) if stored else spec.schema.empty_table()
        change = mine.filter(pc.is_null(mine[URI])).select([*positions, WEIGHT])
        kept, short = applied(held, change.rename_columns([*spec.schema.names, WEIGHT]))
        unheld -= pc.sum(short[WEIGHT]).as_py() or 0
        examples = short.select(spec.schema.names).slice(0, EXAMPLES).to_pylist()
        notes += [(spec.examples, json.dumps(row, default=str, separators=(",", ":"))) for row in examples]
        kept = kept.cast(spec.schema)  # (with its columns' nullability, which grouping drops)
        if kept.num_rows:
            written = open_file(spec.target, {partition: str(bucket)}, spec.schema, task)
            written.writer.write_table(kept)
            files.append((spec.files, written))
        notes += [(spec.replaced, uri) for uri in uris]
    yield report(files, {spec.unheld: unheld}, notes)
