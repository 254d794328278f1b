"""The lookup join (Flink's processing-time temporal join), in bulk.

`FROM p [LEFT] JOIN d FOR SYSTEM_TIME AS OF p.proc_time AS d ON p.k = d.k [AND residual]`, where
`proc_time` is the probe input's processing-time column (its value: the time of the run that
reads the row). Each probe row of a run joins the dimension's rows as they are after that run's
changes — the dimension input's snapshot at the version the run reads to — and is emitted once:
later changes of the dimension do not update rows already emitted, as in Flink. Under LEFT JOIN a
probe row no dimension row matches is null-padded.

The operator keeps no state: each run reads the dimension at its pinned version, and consolidates
only the rows of the keys its probe rows look up (where the ON condition compares them with a
column of the dimension as declared); where Arrow compares those columns as Spark does, the tasks
reading the dimension's files hand Spark only those keys' rows. The probe side must only insert: a
retraction would have to retract the rows its insert joined, against a dimension that may have changed
since. Flink takes a changelog probe, and by default looks a retraction up again in the dimension as it
is then (which can retract a row it never emitted), or, under its `TRY_RESOLVE` strategy and for a probe
with a key, keeps the rows it emitted per key to retract them; streamjoin does neither, and a retraction
reaching the join fails the run in its write pass.
"""
from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..row_errors import fail_when, user_struct
from ..sql.plan import EquiKey, Join, Scan
from ..storage import formats
from ..storage.file_reads import WantedKeys
from ..storage.state import plain_key_columns
from ..types import JoinType, q
from ..zset import WEIGHT, col, consolidate
from .conditions import on_condition

if TYPE_CHECKING:
    from ..runtime.executor import Executor


def run_lookup_join(x: "Executor", node: Join) -> DataFrame:
    """The output change of a lookup join node for this run (append-only)."""
    dim: Scan = node.right  # type: ignore[assignment]
    spec = x.plan.inputs[dim.input]
    probes = x.delta(node.left)
    reject_retractions(x, node, probes)
    keep, keyed = touched_keys(x, node, dim, probes)
    dimension = x.persist(x.scan(dim, formats.snapshot(x.spark, spec, x.input_versions[spec.name], keep, keyed)))
    joined = probes.withColumnRenamed(WEIGHT, "_wp").join(
        dimension.withColumnRenamed(WEIGHT, "_wd"), on_condition(node),
        "left_outer" if node.join_type is JoinType.LEFT else "inner")
    columns = [*node.left.output_columns, *dim.output_columns]
    weight = col("_wp") * F.coalesce(col("_wd"), F.lit(1))
    output = x.persist(consolidate(joined.select(*[col(c) for c in columns], weight.alias(WEIGHT)), columns))
    found = col("_wd").isNotNull()
    x.count_metrics(node, {"operator": "lookup join"}, {
        "probes_looked_up": (probes, col(WEIGHT)),
        "dimension_rows_read": (dimension, col(WEIGHT)),
        "rows_joined": (joined, F.when(found, weight).otherwise(0)),
        "probes_unmatched": (joined, F.when(found, 0).otherwise(col("_wp")))})
    return output


def dimension_keys(node: Join, dim: Scan) -> list[tuple[EquiKey, str]]:
    """The join keys that compare a probe expression with a column of the dimension as declared,
    each with that column's name: what a run looks the dimension up by."""
    own = {q(internal): name for (name, internal), source in zip(dim.columns, dim.column_sources) if source == q(name)}
    return [(k, own[k.right]) for k in node.keys if k.right in own]


def touched_keys(x: "Executor", node: Join, dim: Scan, probes: DataFrame
                 ) -> tuple[Callable[[DataFrame], DataFrame] | None, WantedKeys | None]:
    """What keeps the dimension's changelog rows whose `dimension_keys` a probe row of this run
    holds, so the snapshot consolidates those keys' rows only (None: no such key, every row counts);
    and, where the dimension stores those keys as columns Arrow compares as Spark compares the
    keys, those keys for the tasks reading its files, which then hand Spark mostly their rows."""
    keys = dimension_keys(node, dim)
    if not keys:
        return None, None
    names = [f"_key{i}" for i in range(len(keys))]
    wanted = probes.select(*[F.expr(k.left).alias(n) for (k, _), n in zip(keys, names)]).distinct()

    def keep(rows: DataFrame) -> DataFrame:
        equal = [rows[column].eqNullSafe(wanted[n]) if k.null_safe else rows[column] == wanted[n]
                 for (k, column), n in zip(keys, names)]
        return rows.join(wanted, reduce(lambda a, b: a & b, equal), "left_semi")

    stored = formats.data_schema(x.plan.inputs[dim.input])
    types = x.common_key_types([x.schema(node.left), stored], [[k.left for k, _ in keys], [q(n) for _, n in keys]])
    plain = plain_key_columns(stored, [q(n) for _, n in keys], types)
    if not plain or not plain_key_columns(wanted.schema, names, types):  # both sides compare in Arrow as in Spark
        return keep, None
    return keep, WantedKeys(wanted, tuple(zip(names, plain)))


def reject_retractions(x: "Executor", node: Join, probes: DataFrame) -> None:
    """Fail the run's write pass at the first retraction reaching the lookup join."""
    label = node.left.input if isinstance(node.left, Scan) else f"the join {node.left.id}"
    message = F.concat(
        F.lit(f"a lookup join emits each probe row once, against the dimension as that run leaves it, so its probe "
              f"side must be append-only: a retraction reached the lookup join {node.id}: "),
        F.to_json(user_struct(list(node.left.output_columns))),
        F.lit(". streamjoin neither looks a retraction up again in a dimension that may have changed (Flink's "
              "default, which can retract a row never emitted) nor keeps the rows it emitted by the probe's key "
              "(Flink's 'TRY_RESOLVE' strategy). Feed it an insert-only changelog (only +I rows, or changelog_format "
              "'append')"))
    x.writer.check(probes.where(col(WEIGHT) < 0).where(~fail_when(F.lit(True), message, model=x.plan.model,
                                                                   input_name=label)))
