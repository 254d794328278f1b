"""The batch oracle: the model's own SQL evaluated by Spark over each input's current snapshot.

A changelog's snapshot is its consolidated Z-set (every row with its net count), expanded
into plain rows; the streaming result after a run must equal the batch result of the SQL.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from streamjoin.conformance import _collect


def snapshot(changes: Sequence[tuple[str, Sequence[Any]]]) -> Counter:
    """Net count per row of a changelog (must never go negative for a valid changelog)."""
    counts: Counter = Counter()
    for kind, row in changes:
        counts[tuple(row)] += 1 if kind.startswith("+") else -1
    assert all(v >= 0 for v in counts.values()), "generated changelog retracts a row it never inserted"
    return counts


def batch_result(spark: SparkSession, sql: str, inputs: Mapping[str, Sequence[tuple[str, str]]],
                 changes: Mapping[str, Sequence[tuple[str, Sequence[Any]]]]) -> Counter:
    """Evaluate `sql` with Spark over the snapshots of all changes so far."""
    for name, columns in inputs.items():
        rows = [row for row, n in snapshot(changes.get(name, [])).items() for _ in range(n)]
        schema = StructType([StructField(c, _parse_datatype_string(t)) for c, t in columns])
        spark.createDataFrame(rows, schema).createOrReplaceTempView(name)
    return Counter(_collect(spark.sql(sql)))
