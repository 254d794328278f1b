"""A run's change merged into the files of the buckets it retracts from, in Arrow on the executors.

A bucket of the result that a run retracts rows from is rewritten whole (a Delta table has no
cheaper way to drop a row). Spark only routes each such bucket's change rows and the names of its
files to one task (`writes.RunWriter.merge`); the task reads the files with pyarrow, sums every
distinct row's weight (each stored row counts 1), writes the rows that keep a positive weight (a
row of weight n as n rows) as one new file of the bucket, and names the files it replaced. The
stored rows never become Spark rows: no shuffle, no aggregation or conversion of them in the JVM.

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

from .writes import MERGE_BUCKET as BUCKET
from .writes import MERGE_URI as URI
from .writes import MERGE_WEIGHT as WEIGHT
from .writes import MergeSpec, merge_column

EXAMPLES = 3  # unapplied retractions noted per task

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
    rows = pa.table([_normalized(rows[n]) for n in names] + [rows[WEIGHT]], names=[*names, WEIGHT])
    summed = rows.group_by(names, use_threads=False).aggregate([(WEIGHT, "sum")])
    out = summed.select(names).append_column(WEIGHT, summed[f"{WEIGHT}_sum"])
    return out.filter(pc.not_equal(out[WEIGHT], 0))


def _normalized(values: pa.ChunkedArray) -> pa.ChunkedArray:
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
        sums = merged(held, change.rename_columns([*spec.schema.names, WEIGHT]))
        short = sums.filter(pc.less(sums[WEIGHT], 0))
        unheld -= pc.sum(short[WEIGHT]).as_py() or 0
        examples = short.select(spec.schema.names).slice(0, EXAMPLES).to_pylist()
        notes += [(spec.examples, json.dumps(row, default=str, separators=(",", ":"))) for row in examples]
        kept = expanded(sums).cast(spec.schema)  # (with its columns' nullability, which grouping drops)
        if kept.num_rows:
            written = open_file(spec.target, {partition: str(bucket)}, spec.schema, task)
            written.writer.write_table(kept)
            files.append((spec.files, written))
        notes += [(spec.replaced, uri) for uri in uris]
    yield report(files, {spec.unheld: unheld}, notes)
