"""The multi-way join (Flink's StreamingMultiJoinOperator): N inputs on one common key, no intermediate state.

State is each input's own rows, bucketed by the common key. Every row of the result is made
of rows that share one key value (the first input's), so per run, with K the keys that the
inputs' changes touch:

    Δ result = NWAY(new state of K) - NWAY(old state of K),   new = old + Δ input

where NWAY evaluates the left-deep chain of INNER/LEFT joins with their whole ON conditions
(Z-set weights multiply; a LEFT join null-pads a row that matches nothing). Both terms run as
one chain of Spark joins over old and new rows tagged by version. Each input's state is read
once, for the touched keys only.

Rows whose common key is NULL never match: they are not stored, and those of the first input
pass straight to the result (null-padded when every join is LEFT, dropped otherwise).
"""
from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..one_partition import gathered
from ..sql.plan import MultiJoin
from ..storage.state import BUCKET, StateLayout
from ..types import JoinType, Side
from ..unions import union_by_name
from ..zset import WEIGHT, col
from .regular import JoinSide, RegularJoin, problem_checks, touched_counters

if TYPE_CHECKING:
    from ..runtime.executor import Executor

VERSION = "_v"  # 0 for a row of the old state, 1 for the new


def input_side(executor: "Executor", node: MultiJoin, i: int, types: tuple[str, ...]) -> JoinSide:
    """Input i as a join side: its columns, its common-key expressions and its unique key."""
    scan = node.inputs[i]
    spec = executor.plan.inputs[scan.input]
    unique_key = executor.plan.unique_key(scan)
    return JoinSide(side=Side.LEFT, label=spec.name, schema=executor.schema(scan), key_exprs=node.keys[i],
                    key_types=types, null_safe=(False,) * len(types), tracks_degree=False,
                    layout=StateLayout.choose(unique_key, node.keys[i]), unique_key=unique_key)


def nway(node: MultiJoin, frames: list[DataFrame]) -> DataFrame:
    """The chain of joins over version-tagged Z-sets (input i's weight in `_w<i>`, version in `_v<i>`).

    Rows only join rows of the same version; the result's weight is the product of the
    weights of its non-padded rows, negated for the old version.
    """
    acc = frames[0]
    for i in range(1, len(frames)):
        cond = F.expr(node.conditions[i]) & (col(f"{VERSION}0") == col(f"{VERSION}{i}"))
        how = "left" if node.join_types[i] is JoinType.LEFT else "inner"
        acc = acc.join(frames[i], cond, how)
        if i + 1 < len(frames):  # an inner join claims both sides' partitionings, which Spark cannot join on
            acc = gathered(acc)
    weight = reduce(lambda a, b: a * b, [F.coalesce(col(f"{WEIGHT}{i}"), F.lit(1)) for i in range(len(frames))])
    sign = F.when(col(f"{VERSION}0") == 1, F.lit(1)).otherwise(F.lit(-1))
    return acc.select(*[col(c) for c in node.output_columns], (sign * weight).cast("long").alias(WEIGHT))


def run_multi_join(executor: "Executor", node: MultiJoin) -> DataFrame:
    """One run of a multi-way join: its output change; stages each input's state appends."""
    spark, config = executor.spark, executor.plan.config
    types = executor.common_key_types([executor.schema(scan) for scan in node.inputs], node.keys)
    sides = [input_side(executor, node, i, types) for i in range(len(node.inputs))]
    ttl_ms = None if config.state_ttl is None else int(config.state_ttl.total_seconds() * 1000)

    # each input seen through the binary join's state handling (merge, checks, old/new rows, appends)
    views = [RegularJoin(join_type=JoinType.INNER, left=s, right=s, residual=None, buckets=config.state_buckets,
                         policy=config.on_missing_retraction, model=executor.plan.model, now_ms=executor.now_ms,
                         ttl_ms=ttl_ms) for s in sides]
    states = [executor.state_table(f"{node.id}_{i}", s) for i, s in enumerate(sides)]
    keyed = [s.with_keys(executor.delta(scan)) for s, scan in zip(sides, node.inputs)]
    null_first = keyed[0].where(sides[0].null_key())
    keyed = [k.where(~s.null_key()) for k, s in zip(keyed, sides)]

    n_keys = len(types)
    touched = union_by_name([
        k.select(*[col(c).alias(f"_k{j}") for j, c in enumerate(s.key_columns)]) for k, s in zip(keyed, sides)
    ]).distinct()
    touched = executor.persist(touched.withColumn(
        BUCKET, F.pmod(F.xxhash64(*[col(f"_k{j}") for j in range(n_keys)]), F.lit(config.state_buckets)).cast("int")))
    executor.count_metrics(node, {"operator": f"{len(sides)}-way join", "inputs": len(sides)}, touched_counters(touched))

    merged = [executor.persist(v.merge(spark, Side.LEFT, k, st, touched))
              for v, k, st in zip(views, keyed, states)]
    for check in problem_checks([p for view, m in zip(views, merged) for p in view.problems({Side.LEFT: m})],
                                executor.plan.model):
        executor.writer.check(check)

    frames = []
    for i, (view, side, m) in enumerate(zip(views, sides, merged)):
        tagged = [(view.old_rows(Side.LEFT, m), 0), (view.new_rows(Side.LEFT, m), 1)]
        if i == 0:
            tagged.append((null_first, 1))
        frames.append(union_by_name([
            rows.select(*[col(c) for c in side.columns], col(WEIGHT).alias(f"{WEIGHT}{i}"),
                        F.lit(v).alias(f"{VERSION}{i}")) for rows, v in tagged]))
        executor.stage_state(states[i], view.state_changes(Side.LEFT, m, None))
    return executor.emitted(node, nway(node, frames))
