"""The batch oracle: the model's own SQL evaluated by Spark over each input's current snapshot.

A changelog's snapshot is its consolidated Z-set (every row with its net count), expanded
into plain rows; the streaming result after a run must equal the batch result of the SQL.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, TimestampType, _parse_datatype_string

from streamjoin.conformance import _to_python


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
    return Counter(collected(spark.sql(sql)))


def collected(df: DataFrame) -> list[tuple]:
    """Rows as the conformance runner compares them; timestamps travel as UTC text so no local timezone creeps in."""
    fields = df.schema.fields
    exprs = [F.date_format(F.col(f.name), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(f.name)
             if isinstance(f.dataType, TimestampType) else F.col(f.name) for f in fields]
    return [tuple(_to_python(v, f.dataType) for v, f in zip(row, fields)) for row in df.select(*exprs).collect()]
