"""The lookup join (Flink's processing-time temporal join), in bulk.

`FROM p [LEFT] JOIN d FOR SYSTEM_TIME AS OF p.proc_time AS d ON p.k = d.k [AND residual]`, where
`proc_time` is the probe input's processing-time column (its value: the time of the run that
reads the row). Each probe row of a run joins the dimension's rows as they are after that run's
changes — the dimension input's snapshot at the version the run reads to — and is emitted once:
later changes of the dimension do not update rows already emitted, as in Flink. Under LEFT JOIN a
probe row no dimension row matches is null-padded.

The dimension keeps no state: each run reads it at its pinned version, and consolidates only the
rows of the keys its probe rows look up (where the ON condition compares them with a column of the
dimension as declared); where Arrow compares those columns as Spark does, the tasks reading the
dimension's files hand Spark only those keys' rows.

A probe side that may retract (`sql.plan.keeps_emitted`: an input below it other than `append`, or
a join below it that pads) keeps the rows the join emitted, as Flink does under its `TRY_RESOLVE`
strategy, so that a retraction retracts exactly what the insertion of its row emitted, whatever the
dimension holds since (Flink's default looks a retraction up again, which can retract a row never
emitted). The table `<join>_emitted` holds, per probe row and run that inserted copies of it, a
marker row (`_marker`, weighing the copies) and the rows those copies emitted, as a state table bucketed by the
columns a retraction matches them by: every probe column but those computed from a processing-time
column (a retraction carries the time of the run that reads it); a retraction reads its keys' rows.
A run's changes of a row count by their sum; a run retracting n copies of a row takes them from the
runs that inserted it, the latest first, and fails, with nothing committed, when fewer copies are
live (unless `on_missing_retraction` is 'ignore': it takes the live ones). An insertion's rows stay
until it is retracted, or, with `state_ttl`, until they have been idle that long (a later retraction
of them is then ignored, as on_missing_retraction defaults to with it). Runs append the rows they
add and the negated rows they retract (`storage.state` folds and compacts them).
"""
from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from ..row_errors import fail_when, user_struct
from ..run_values import run_value
from ..sql.plan import EquiKey, Join, Scan, inserts_only, keeps_emitted
from ..sql.temporal import proc_time_columns
from ..storage import formats
from ..storage.file_reads import WantedKeys
from ..storage.state import BUCKET, UPDATED, StateTable, plain_key_columns
from ..types import JoinType, q
from ..zset import WEIGHT, col, consolidate
from .conditions import on_condition

if TYPE_CHECKING:
    from ..runtime.executor import Executor

EMITTED = "emitted"
RUN, MARKER = "_run", "_marker"


def run_lookup_join(x: "Executor", node: Join) -> DataFrame:
    """The output change of a lookup join node for this run (append-only when its probes only insert)."""
    if not keeps_emitted(x.plan.inputs, node):
        return x.emitted(node, looked_up(x, node, x.delta(node.left), {}), adds_only=inserts_only(node.left, x.insert_only))
    return EmittedRows(x, node).run()


def looked_up(x: "Executor", node: Join, probes: DataFrame, counters: dict[str, tuple[DataFrame, Column]]
              ) -> DataFrame:
    """The weighted rows `probes` (insertions) join in the dimension as this run leaves it, not yet
    consolidated; the run-log figures of the node with `counters` besides. The join is kept: the
    figures and the rows read it."""
    dim: Scan = node.right  # type: ignore[assignment]
    spec = x.plan.inputs[dim.input]
    keep, keyed = touched_keys(x, node, dim, probes)
    dimension = x.persist(x.scan(dim, formats.snapshot(x.spark, spec, x.input_versions[spec.name], keep, keyed)))
    joined = x.persist(probes.withColumnRenamed(WEIGHT, "_wp").join(
        dimension.withColumnRenamed(WEIGHT, "_wd"), on_condition(node),
        "left_outer" if node.join_type is JoinType.LEFT else "inner"))
    weight = col("_wp") * F.coalesce(col("_wd"), F.lit(1))
    found = col("_wd").isNotNull()
    x.count_metrics(node, {"operator": "lookup join"}, {
        "probes_looked_up": (probes, col(WEIGHT)),
        "dimension_rows_read": (dimension, col(WEIGHT)),
        "rows_joined": (joined, F.when(found, weight).otherwise(0)),
        "probes_unmatched": (joined, F.when(found, 0).otherwise(col("_wp"))), **counters})
    return joined.select(*[col(c) for c in [*node.left.output_columns, *dim.output_columns]], weight.alias(WEIGHT))


class EmittedRows:
    """One run of a lookup join whose probe side may retract, with the rows it emitted
    (`<join>_emitted`, see the module's docstring), keyed by the probe columns they are matched by."""

    def __init__(self, x: "Executor", node: Join) -> None:
        self.x, self.node = x, node
        self.probe_columns = list(node.left.output_columns)
        self.columns = [*node.left.output_columns, *node.right.output_columns]
        self.state_columns = [*self.columns, RUN, MARKER]
        # a retraction matches by the columns its run's time does not decide (it carries the run's time)
        timed = proc_time_columns(node.left, computed=True)
        self.match = [c for c in self.probe_columns if c not in timed] or self.probe_columns
        self.keys = [f"_pk{i}" for i in range(len(self.match))]
        self.dimension_fields = [StructField(f.name, f.dataType) for f in x.schema(node.right).fields]
        path = x.tables.state(f"{node.id}_{EMITTED}")
        schema = StructType([*x.schema(node.left).fields, *self.dimension_fields, StructField(RUN, LongType()),
                             StructField(MARKER, BooleanType())])
        types = [schema[c].dataType.simpleString() for c in self.match]
        self.table = StateTable(path=path, schema=schema, key_columns=self.keys, tracks_degree=False,
                                version=x.versions.get(path), bucket_exprs=[q(c) for c in self.match],
                                buckets=x.plan.config.state_buckets,
                                file_keys=plain_key_columns(schema, [q(c) for c in self.match], types))

    def with_keys(self, df: DataFrame) -> DataFrame:
        return df.select("*", *[col(c).alias(k) for c, k in zip(self.match, self.keys)])

    def bucket(self) -> Column:
        return F.pmod(F.xxhash64(*[col(k) for k in self.keys]), F.lit(self.table.buckets)).cast("int")

    def run(self) -> DataFrame:
        x = self.x
        probes = x.persist(consolidate(x.delta(self.node.left), self.probe_columns))
        inserted = probes.where(col(WEIGHT) > 0)
        run = run_value(x.run_id).alias(RUN)
        if inserts_only(self.node.left, x.insert_only):  # nothing to retract: append this run's rows
            output = self.consolidated(looked_up(x, self.node, inserted, {}))
            self.stage(self.added(inserted, output, run))
            return output
        wanted = x.persist(self.wanted(probes.where(col(WEIGHT) < 0)))
        read = x.persist(self.table.read(
            x.spark, wanted.select(*[col(k) for k in self.keys]).withColumn(BUCKET, self.bucket()), self.with_keys))
        removed = x.persist(self.retracted(wanted, consolidate(read, self.state_columns)))
        output = self.consolidated(looked_up(x, self.node, inserted, {
            "probes_retracted": (removed, F.when(col(MARKER), -col(WEIGHT)).otherwise(0)),
            "emitted_rows_read": (read, F.lit(1))}))
        self.stage(self.added(inserted, output, run).unionByName(removed))
        return output.unionByName(removed.where(~col(MARKER)).select(*[col(c) for c in self.columns], col(WEIGHT)))

    def consolidated(self, rows: DataFrame) -> DataFrame:
        """The looked-up `rows` consolidated and kept: the run's output and its state appends read them."""
        return self.x.persist(consolidate(rows, self.columns))

    def stage(self, changes: DataFrame) -> None:
        self.x.stage_state(self.table, self.with_keys(changes).select(
            *[col(c) for c in self.state_columns], col(WEIGHT), run_value(self.x.now_ms).alias(UPDATED),
            self.bucket().alias(BUCKET)))

    def added(self, inserted: DataFrame, output: DataFrame, run: Column) -> DataFrame:
        """The state rows of this run's insertions: each probe row's marker and the rows it joined."""
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in self.dimension_fields]
        markers = inserted.select(*[col(c) for c in self.probe_columns], *nulls, run, F.lit(True).alias(MARKER),
                                  col(WEIGHT))
        return output.select(*[col(c) for c in self.columns], run, F.lit(False).alias(MARKER), col(WEIGHT)
                             ).unionByName(markers)

    def wanted(self, retractions: DataFrame) -> DataFrame:
        """The keys of the rows `retractions` retract, each with how many copies (`_n`) and the row as
        JSON for messages (`_row`)."""
        return retractions.groupBy(*[col(c).alias(k) for c, k in zip(self.match, self.keys)]).agg(
            F.sum(-col(WEIGHT)).alias("_n"), F.first(F.to_json(user_struct(self.match))).alias("_row"))

    def retracted(self, wanted: DataFrame, kept: DataFrame) -> DataFrame:
        """The state rows the run's retractions (`wanted`: the keys of the rows they retract, with the
        count `_n`) take out of `kept` (the stored rows of those keys), negated, markers included:
        n copies of a row from the runs that inserted it, the latest first. Fails the run's write pass
        where fewer copies are live (unless on_missing_retraction is 'ignore')."""
        same = reduce(lambda a, b: a & b, [col(c).eqNullSafe(col(k)) for c, k in zip(self.match, self.keys)])
        copies = F.sum(F.when(col(MARKER), col(WEIGHT)).otherwise(0))
        newer = Window.partitionBy(*self.keys).orderBy(col(RUN).desc()).rangeBetween(
            Window.unboundedPreceding, Window.currentRow)
        hit = wanted.join(kept, same, "left").withColumns({
            "_live": copies.over(Window.partitionBy(*self.keys)),
            "_copies": copies.over(Window.partitionBy(*self.keys, RUN)),
            "_upto": copies.over(newer)})
        if self.x.plan.config.on_missing_retraction == "fail":
            self.x.writer.check(hit.where(col("_live") < col("_n")).where(~fail_when(
                F.lit(True), self.missing(), model=self.x.plan.model, input_name=self.label)))
        taken = F.least(col("_copies"), F.greatest(F.lit(0), col("_n") - (col("_upto") - col("_copies"))))
        return hit.withColumn("_k", taken).where(col(RUN).isNotNull() & (col("_k") > 0)).select(
            *[col(c) for c in self.state_columns], F.expr(f"-({WEIGHT} * _k div _copies)").alias(WEIGHT))

    @property
    def label(self) -> str:
        left = self.node.left
        return left.input if isinstance(left, Scan) else f"the join {left.id}"

    def missing(self) -> Column:
        return F.concat(
            F.lit(f"the lookup join {self.node.id} retracts the rows that the insertion of a probe row emitted, "
                  "but this run retracts the probe row "), col("_row"), F.lit(" "), col("_n").cast("string"),
            F.lit(" time(s) while "), col("_live").cast("string"),
            F.lit(" insertion(s) of it are live: retract only rows that earlier runs inserted (the probe input "
                  "retracts a row it never inserted, or more copies than it inserted), or set "
                  "on_missing_retraction='ignore' to retract only the live ones"))


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
