"""The regular (unwindowed) binary join, with Flink's StreamingJoinOperator semantics, in bulk.

Per run, with ΔL and ΔR the consolidated changes of the two inputs and L, R their states:

    Δ(L ⋈ R) = ΔL ⋈ R_new + L_old ⋈ ΔR

Sides that outer, semi or anti joins preserve keep a *degree* per row: how many rows of the
other side match it (key and residual). A preserved row contributes to the output through a
gate on its degree — null-padded when it is 0 (LEFT/RIGHT/FULL and ANTI), itself when it
is positive (SEMI) — so padded rows are emitted and retracted exactly when the degree
crosses 0 and 1. Degrees are updated incrementally: a stored row's new degree is its old
degree plus its matches in ΔOther; a new row's degree is its matches in Other_new.

The join is bilinear, so a side whose stored weights nothing needs (no retraction this run,
no unique key or degree to check, no retention) joins its stored fragments unsummed and
appends its change as it is, with no pass over its state beyond the join itself.

Rows whose (non-null-safe) join key is NULL never match: on a non-preserved side they are
dropped, on a preserved side they pass the gate with degree 0 and are never stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from typing import Callable, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..one_partition import gathered
from ..row_errors import fail_when, user_struct
from ..run_values import run_value
from ..spec import MissingRetractionPolicy
from ..storage import delta_log
from ..storage.state import BUCKET, DEGREE, UPDATED, StateLayout, StateTable
from ..types import JoinType, Side
from ..unions import union_by_name
from ..zset import WEIGHT, col

COUNTERS_KEY = "streamjoin.counters"
W_STORED, DEG_STORED = "_w_stored", "_deg_stored"
REACH = "_reach"  # a touched key's earliest (or latest) change time, when `touched_keys` is asked for it
W_OLD, W_DELTA, DEG_OLD, IN_STATE, DEG_INC, DEG_FULL = "_w_old", "_w_delta", "_deg_old", "_in_state", "_deg_inc", "_deg_full"


@dataclass(frozen=True)
class JoinSide:
    """One input of a binary join: its columns, its join key, and what it keeps in state."""

    side: Side
    label: str  # the input (or join node) this side reads, for messages
    schema: StructType
    key_exprs: tuple[str, ...]
    key_types: tuple[str, ...]
    null_safe: tuple[bool, ...]
    tracks_degree: bool
    layout: StateLayout
    unique_key: tuple[str, ...] = ()
    insert_only: bool = False  # this run's change of the side holds no retraction

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.schema.fields]

    @property
    def key_columns(self) -> list[str]:
        return [f"_{self.side.value[0]}k{i}" for i in range(len(self.key_exprs))]

    def with_keys(self, df: DataFrame) -> DataFrame:
        keys = [F.expr(e).alias(k) for e, k in zip(self.bucket_key_exprs, self.key_columns)]
        return df.select("*", *keys)

    def null_key(self) -> SparkColumn:
        """True for rows whose key can never match (a NULL in a non-null-safe key column)."""
        tests = [col(k).isNull() for k, safe in zip(self.key_columns, self.null_safe) if not safe]
        return reduce(lambda a, b: a | b, tests) if tests else F.lit(False)

    @property
    def unique_key_columns(self) -> list[str]:
        wanted = {u.lower() for u in self.unique_key}
        return [c for c in self.columns if c.split("__", 1)[-1].lower() in wanted]

    @property
    def bucket_key_exprs(self) -> tuple[str, ...]:
        """Spark SQL for the typed key columns (what `with_keys` adds and buckets hash)."""
        return tuple(f"CAST(({e}) AS {t})" for e, t in zip(self.key_exprs, self.key_types))

    def bucket(self, buckets: int) -> SparkColumn:
        return bucket_of(self.key_columns, buckets)


def bucket_of(key_columns: Sequence[str], buckets: int) -> SparkColumn:
    """The state bucket (`StateTable`'s partition) of a row whose typed join key is `key_columns`."""
    return F.pmod(F.xxhash64(*[col(k) for k in key_columns]), F.lit(buckets)).cast("int")


def touched_keys(sides: dict[Side, JoinSide], keyed: dict[Side, DataFrame], buckets: int, *,
                 reach: tuple[dict[Side, SparkColumn], bool] | None = None) -> DataFrame:
    """Distinct join keys of both sides' changes (`keyed`: with their key columns), as `_k<i>` with
    their bucket, and whether each side's change holds the key (`touched_by`).

    With `reach` = (each side's time, earliest) each key also gets `REACH`: the earliest (or, with
    earliest False, the latest) time of its changes on either side, NULL when all are NULL."""
    n = len(sides[Side.LEFT].key_columns)
    frames = []
    for s in Side:
        times = [] if reach is None else [reach[0][s].alias(REACH)]
        frames.append(keyed[s].select(*[col(k).alias(f"_k{i}") for i, k in enumerate(sides[s].key_columns)],
                                      *[F.lit(t is s).alias(touched_by(t)) for t in Side], *times))
    reached = [] if reach is None else [(F.min if reach[1] else F.max)(col(REACH)).alias(REACH)]
    keys = frames[0].unionByName(frames[1]).groupBy(*[col(f"_k{i}") for i in range(n)]).agg(
        *[F.bool_or(touched_by(t)).alias(touched_by(t)) for t in Side], *reached)
    return keys.withColumn(BUCKET, bucket_of([f"_k{i}" for i in range(n)], buckets))


def stored_rows(spark: SparkSession, side: JoinSide, state: StateTable, touched: DataFrame | None,
                carry: Sequence[str] = ()) -> DataFrame:
    """A side's stored fragments (rows with weights, not summed) of the `touched_keys`, with key columns
    and their key's `carry` columns of `touched`."""
    renamed = None if touched is None else touched.select(
        *[col(f"_k{i}").alias(k) for i, k in enumerate(side.key_columns)], col(BUCKET), *[col(c) for c in carry])
    return state.read(spark, renamed, side.with_keys, carry)


def stamps(side: JoinSide, now_ms: int, buckets: int) -> list[SparkColumn]:
    """The columns every row appended to a side's state carries: the run's time and the row's bucket."""
    return [run_value(now_ms).alias(UPDATED), side.bucket(buckets).alias(BUCKET)]


def touched_by(s: Side) -> str:
    """The column of a join's touched keys (`RegularJoin.touched_keys`) that says side `s`'s change holds the key."""
    return f"_by_{s.value}"


def touched_counters(touched: DataFrame) -> dict[str, tuple[DataFrame, SparkColumn]]:
    """The run-log figures of a join's touched keys (distinct keys with their bucket), as counters."""
    return {"touched_keys": (touched, F.lit(1)), "touched_buckets": (touched.select(BUCKET).distinct(), F.lit(1))}


@dataclass
class JoinResult:
    """What one run of a join computes: its output change, and the rows to append to state."""

    output: DataFrame  # not consolidated: a row may come in several parts
    appends: dict[Side, DataFrame]
    metadata: dict[Side, dict[str, str]]  # commit info per side's state table
    counters: dict[str, tuple[DataFrame, SparkColumn]]  # run-log figures, summed in the write pass
    checks: list[DataFrame]  # frames whose rows are bad input: evaluated in the run's write pass
    adds_only: bool = False  # every output weight is positive: its parts have nothing to cancel


class RegularJoin:
    """Incremental evaluation of one binary join node per run."""

    def __init__(self, *, join_type: JoinType, left: JoinSide, right: JoinSide, residual: str | None,
                 buckets: int, policy: MissingRetractionPolicy, model: str, now_ms: int,
                 ttl_ms: int | None = None, null_aware: bool = False) -> None:
        self.join_type = join_type
        self.now_ms = now_ms
        self.ttl_ms = ttl_ms
        self.null_aware = null_aware
        self.counters: dict[str, dict[str, int]] = {}
        self.sides = {Side.LEFT: left, Side.RIGHT: right}
        self.residual = residual
        self.buckets = buckets
        self.policy = policy
        self.model = model

    # -- conditions ---------------------------------------------------------------------------
    def match(self, left: DataFrame, right: DataFrame) -> SparkColumn:
        l, r = self.sides[Side.LEFT], self.sides[Side.RIGHT]
        conds = [left[a].eqNullSafe(right[b]) if safe else left[a] == right[b]
                 for a, b, safe in zip(l.key_columns, r.key_columns, l.null_safe)]
        cond = reduce(lambda x, y: x & y, conds)
        if self.residual:
            cond = cond & F.expr(self.residual)
        return cond

    def joined(self, left: DataFrame, right: DataFrame) -> DataFrame:
        return left.join(right, self.match(left, right), "inner")

    def gate(self, degree: SparkColumn) -> SparkColumn:
        """1 when a preserved row with this degree is part of the output, else 0."""
        passes = degree > 0 if self.join_type is JoinType.SEMI else degree == 0
        return F.when(passes, F.lit(1)).otherwise(F.lit(0)).cast("long")

    # -- the run ------------------------------------------------------------------------------
    def run(self, spark: SparkSession, deltas: dict[Side, DataFrame], states: dict[Side, StateTable],
            persist: Callable[[DataFrame], DataFrame]) -> JoinResult:
        keyed = {s: self.sides[s].with_keys(deltas[s]) for s in Side}
        null_keyed = {s: keyed[s].where(self.sides[s].null_key()) for s in Side}
        keyed = {s: keyed[s].where(~self.sides[s].null_key()) for s in Side}
        if self.null_aware:  # NOT IN: the left side's NULL-keyed rows live in state like any other
            keyed[Side.LEFT] = self.sides[Side.LEFT].with_keys(deltas[Side.LEFT])
            null_keyed[Side.LEFT] = keyed[Side.LEFT].limit(0)
        touched = persist(self.touched_keys(keyed))
        counters = touched_counters(touched)
        metadata: dict[Side, dict[str, str]] = {}
        if self.null_aware:
            self.counters = self.null_aware_counters(states[Side.RIGHT], deltas[Side.RIGHT], keyed[Side.RIGHT])
            metadata[Side.RIGHT] = {COUNTERS_KEY: json.dumps(self.counters["new"])}
        merged, delta_eff, old, new = {}, {}, {}, {}
        for s in Side:
            if self.appends_only(s):  # no stored row's weight matters: join the stored fragments as they are
                side = self.sides[s]
                delta_eff[s] = keyed[s].select(*[col(c) for c in side.columns + side.key_columns], col(WEIGHT))
                # its stored rows only ever pair with the other side's change: read only that change's keys
                old[s] = self.stored(spark, s, states[s], touched.where(col(touched_by(s.other)))).select(
                    *[col(c) for c in side.columns + side.key_columns], col(WEIGHT))
                new[s] = old[s].unionByName(delta_eff[s])
                continue
            everything = s is Side.LEFT and self.null_aware and self.counters["old"] != self.counters["new"]
            merged[s] = persist(self.merge(spark, s, keyed[s], states[s], None if everything else touched))
            delta_eff[s] = self.effective_delta(s, merged[s])
            new[s] = self.new_rows(s, merged[s])
            old[s] = self.old_rows(s, merged[s])
        checks = problem_checks(self.problems(merged), self.model)
        if any(self.sides[s].tracks_degree for s in Side):  # degrees read the other side's change again
            delta_eff = {s: persist(d) for s, d in delta_eff.items()}

        parts: list[DataFrame] = []
        out_cols = self.output_columns()
        if self.join_type.emits_pairs:
            for a, b in ((delta_eff[Side.LEFT], new[Side.RIGHT]), (old[Side.LEFT], delta_eff[Side.RIGHT])):
                pairs = self.joined(a.withColumnRenamed(WEIGHT, "_wl"), b.withColumnRenamed(WEIGHT, "_wr"))
                parts.append(pairs.select(*[col(c) for c in out_cols], (col("_wl") * col("_wr")).alias(WEIGHT)))
        appends: dict[Side, DataFrame] = {}
        for s in Side:
            side = self.sides[s]
            if side.tracks_degree:
                rows = persist(self.degrees(s, merged[s], delta_eff[s.other], new[s.other]))
                parts.append(self.gated_output(s, rows))
                parts.append(self.gated_null_keys(s, null_keyed[s]))
                appends[s] = self.state_changes(s, rows, F.when(col(W_OLD) + col(W_DELTA) != 0, col("_deg_new")).otherwise(0))
            elif s in merged:
                appends[s] = self.state_changes(s, merged[s], None)
            else:
                appends[s] = delta_eff[s].select(*[col(c) for c in side.columns], col(WEIGHT),
                                                 *stamps(side, self.now_ms, self.buckets))
        return JoinResult(output=union_by_name(parts), appends=appends, metadata=metadata,
                          counters=counters, checks=checks, adds_only=self.adds_only(states))

    def adds_only(self, states: dict[Side, StateTable]) -> bool:
        """True when every weight of this run's output is positive: an inner join of two sides that
        only insert this run, each joined with rows of positive weight (a merged side's rows are
        consolidated; a side joined as stored, `appends_only`, holds no retraction by its statistics)."""
        return (self.join_type is JoinType.INNER and all(self.sides[s].insert_only for s in Side)
                and all(states[s].holds_no_retraction() for s in Side if self.appends_only(s)))

    def appends_only(self, s: Side) -> bool:
        """True when this run only adds rows to a side that needs no stored row's weight: no
        retraction to check, no unique key to check, no degree, no retention, not NOT IN."""
        side = self.sides[s]
        unique_checked = side.layout is not StateLayout.NO_UNIQUE_KEY and side.unique_key_columns
        return (side.insert_only and not unique_checked and not side.tracks_degree and self.ttl_ms is None
                and not self.null_aware)

    def state_changes(self, s: Side, rows: DataFrame, degree: SparkColumn | None) -> DataFrame:
        """Fragments to append to a side's state so that it sums to the new weights (and degrees).

        Rows that expired by retention are cancelled out here as well."""
        side = self.sides[s]
        weight = (col(W_OLD) + col(W_DELTA) - col(W_STORED)).alias(WEIGHT)
        cols = [*[col(c) for c in side.columns], weight]
        changed = col(WEIGHT) != 0
        if degree is not None:
            cols.append((degree - col(DEG_STORED)).alias(DEGREE))
            changed = changed | (col(DEGREE) != 0)
        return rows.select(*cols, *stamps(side, self.now_ms, self.buckets)).where(changed)


    def null_aware_counters(self, state: StateTable, delta: DataFrame, keyed_delta: DataFrame) -> dict[str, dict[str, int]]:
        """NOT IN depends on two global facts about the subquery side: is it empty, has it a NULL.

        Their counts before the run come from the state table's last commit; the run adds its
        changes' counts (NULL-keyed rows are counted but never stored)."""
        raw = delta_log.latest_metadata(state.path, COUNTERS_KEY, state.version) if state.version is not None else None
        old = json.loads(raw) if raw else {"rows": 0, "null_keys": 0}
        side = self.sides[Side.RIGHT]
        row = side.with_keys(delta).agg(
            F.coalesce(F.sum(WEIGHT), F.lit(0)).alias("rows"),
            F.coalesce(F.sum(F.when(side.null_key(), col(WEIGHT))), F.lit(0)).alias("null_keys")).collect()[0]
        new = {"rows": old["rows"] + int(row["rows"]), "null_keys": old["null_keys"] + int(row["null_keys"])}
        return {"old": old, "new": new}

    def null_aware_gate(self, degree: SparkColumn, counters: dict[str, int]) -> SparkColumn:
        """1 when a row passes `key NOT IN (subquery)`: the subquery is empty, or it holds no NULL,
        the key is not NULL and nothing matches it."""
        key_null = self.sides[Side.LEFT].null_key()
        empty = run_value(counters["rows"]) == 0
        passes = (run_value(counters["null_keys"]) == 0) & (degree == 0) & (~key_null | empty)
        return F.when(passes, F.lit(1)).otherwise(F.lit(0)).cast("long")

    def output_columns(self) -> list[str]:
        cols = self.sides[Side.LEFT].columns
        return cols + self.sides[Side.RIGHT].columns if self.join_type.emits_pairs else cols

    def touched_keys(self, keyed: dict[Side, DataFrame]) -> DataFrame:
        return touched_keys(self.sides, keyed, self.buckets)

    def stored(self, spark: SparkSession, s: Side, state: StateTable, touched: DataFrame | None) -> DataFrame:
        return stored_rows(spark, self.sides[s], state, touched)

    def merge(self, spark: SparkSession, s: Side, delta: DataFrame, state: StateTable,
              touched: DataFrame | None) -> DataFrame:
        """One row per distinct touched row of a side: old weight, change, old degree, in state."""
        side = self.sides[s]
        stored = self.stored(spark, s, state, touched)
        names = side.columns + side.key_columns
        deg = col(DEGREE) if side.tracks_degree else F.lit(0).cast("long")
        zero = F.lit(0).cast("long")
        a = stored.select(*[col(c) for c in names], col(WEIGHT).alias(W_STORED), zero.alias(W_DELTA),
                          deg.alias(DEG_STORED), col(UPDATED))
        b = delta.select(*[col(c) for c in names], zero.alias(W_STORED), col(WEIGHT).alias(W_DELTA),
                         zero.alias(DEG_STORED), F.lit(None).cast("long").alias(UPDATED))
        merged = (gathered(a.unionByName(b)).groupBy(*[col(c) for c in names]).agg(
            F.sum(W_STORED).cast("long").alias(W_STORED), F.sum(W_DELTA).cast("long").alias(W_DELTA),
            F.sum(DEG_STORED).cast("long").alias(DEG_STORED), F.max(UPDATED).alias(UPDATED))
            .where((col(W_STORED) != 0) | (col(W_DELTA) != 0)))
        # state retention: a row not updated within state_ttl has left state (silently, as in Flink)
        expired = (col(UPDATED) < run_value(self.now_ms - self.ttl_ms)) if self.ttl_ms is not None else F.lit(False)
        merged = (merged.withColumn(W_OLD, F.when(expired, 0).otherwise(col(W_STORED)).cast("long"))
                  .withColumn(DEG_OLD, F.when(expired, 0).otherwise(col(DEG_STORED)).cast("long"))
                  .withColumn(IN_STATE, (col(W_OLD) != 0).cast("int")))
        if self.policy == "ignore":
            merged = merged.withColumn(W_DELTA, F.greatest(col(W_DELTA), -col(W_OLD)))
        return merged

    def problems(self, merged: dict[Side, DataFrame]) -> list[DataFrame]:
        """Bad input rows, for `problem_checks`: retractions of rows state never held, and unique
        keys with more than one live row. A side whose change holds no retraction cannot retract a
        row, so it needs no frame for the first."""
        problems: list[DataFrame] = []
        for s in merged:
            side = self.sides[s]
            live = col(W_OLD) + col(W_DELTA)
            if self.policy == "fail" and not side.insert_only:
                problems.append(merged[s].where(live < 0).select(
                    F.lit("missing").alias("kind"), F.lit(side.label).alias("input"),
                    F.to_json(user_struct(side.columns)).alias("row"), (-col(W_DELTA)).alias("n"), col(W_OLD).alias("held")))
            key = side.unique_key_columns
            if side.layout is not StateLayout.NO_UNIQUE_KEY and key:
                problems.append(merged[s].where(live > 0).groupBy(*[col(c) for c in key]).agg(F.sum(live).alias("n"))
                                .where(col("n") > 1).select(F.lit("duplicate").alias("kind"), F.lit(side.label).alias("input"),
                                                            F.to_json(user_struct(key)).alias("row"), col("n"),
                                                            F.lit(0).cast("long").alias("held")))
        return problems

    def effective_delta(self, s: Side, merged: DataFrame) -> DataFrame:
        side = self.sides[s]
        return merged.where(col(W_DELTA) != 0).select(*[col(c) for c in side.columns + side.key_columns],
                                                      col(W_DELTA).alias(WEIGHT))

    def new_rows(self, s: Side, merged: DataFrame) -> DataFrame:
        side = self.sides[s]
        return merged.where(col(W_OLD) + col(W_DELTA) != 0).select(
            *[col(c) for c in side.columns + side.key_columns], (col(W_OLD) + col(W_DELTA)).alias(WEIGHT))

    def old_rows(self, s: Side, merged: DataFrame) -> DataFrame:
        side = self.sides[s]
        return merged.where(col(W_OLD) != 0).select(*[col(c) for c in side.columns + side.key_columns],
                                                    col(W_OLD).alias(WEIGHT))

    def degrees(self, s: Side, merged: DataFrame, other_delta: DataFrame, other_new: DataFrame) -> DataFrame:
        """Each touched row of a preserved side with its old and new degree."""
        side = self.sides[s]
        names = side.columns + side.key_columns
        zero = F.lit(0).cast("long")
        base = merged.select(*[col(c) for c in names], col(W_OLD), col(W_DELTA), col(DEG_OLD), col(IN_STATE),
                             col(W_STORED), col(DEG_STORED), zero.alias(DEG_INC), zero.alias(DEG_FULL))
        stored = merged.where(col(IN_STATE) == 1).select(*[col(c) for c in names])
        fresh = merged.where(col(IN_STATE) == 0).select(*[col(c) for c in names])
        parts = [base]
        for rows, other, target in ((stored, other_delta, DEG_INC), (fresh, other_new, DEG_FULL)):
            o = other.withColumnRenamed(WEIGHT, "_wo")
            pair = self.joined(rows, o) if s is Side.LEFT else self.joined(o, rows)
            parts.append(pair.select(*[col(c) for c in names], zero.alias(W_OLD), zero.alias(W_DELTA), zero.alias(DEG_OLD),
                                     F.lit(0).alias(IN_STATE), zero.alias(W_STORED), zero.alias(DEG_STORED),
                                     (col("_wo") if target == DEG_INC else zero).alias(DEG_INC),
                                     (col("_wo") if target == DEG_FULL else zero).alias(DEG_FULL)))
        grouped = gathered(union_by_name(parts)).groupBy(*[col(c) for c in names]).agg(
            *[F.sum(c).cast("long").alias(c) for c in (W_OLD, W_DELTA, DEG_OLD, DEG_INC, DEG_FULL, W_STORED, DEG_STORED)],
            F.max(IN_STATE).alias(IN_STATE))
        deg_new = F.when(col(IN_STATE) == 1, col(DEG_OLD) + col(DEG_INC)).otherwise(col(DEG_FULL))
        return grouped.withColumn("_deg_new", deg_new)

    def padded(self, s: Side, weight: SparkColumn) -> list[SparkColumn]:
        """The output columns for a preserved row: itself, and NULLs for the other side if pairs are emitted."""
        side = self.sides[s]
        other = self.sides[s.other]
        if not self.join_type.emits_pairs:
            return [col(c) for c in side.columns] + [weight.alias(WEIGHT)]
        nulls = {f.name: F.lit(None).cast(f.dataType).alias(f.name) for f in other.schema.fields}
        mine = {c: col(c) for c in side.columns}
        return [mine.get(c, nulls.get(c)) for c in self.output_columns()] + [weight.alias(WEIGHT)]

    def gated_output(self, s: Side, rows: DataFrame) -> DataFrame:
        w_new = col(W_OLD) + col(W_DELTA)
        if self.null_aware:
            weight = (w_new * self.null_aware_gate(col("_deg_new"), self.counters["new"])
                      - col(W_OLD) * self.null_aware_gate(col(DEG_OLD), self.counters["old"]))
        else:
            weight = w_new * self.gate(col("_deg_new")) - col(W_OLD) * self.gate(col(DEG_OLD))
        return rows.select(*self.padded(s, weight)).where(col(WEIGHT) != 0)

    def gated_null_keys(self, s: Side, rows: DataFrame) -> DataFrame:
        return rows.select(*self.padded(s, col(WEIGHT) * self.gate(F.lit(0)))).where(col(WEIGHT) != 0)


def problem_checks(problems: Sequence[DataFrame], model: str) -> list[DataFrame]:
    """Frames that fail the Spark job evaluating them at their first row of `RegularJoin.problems`,
    with an `InputError` naming the input, the row and the fix (see `row_errors`)."""
    missing = F.concat(
        F.lit("a retraction of a row that state never held: "), col("row"), F.lit(" retracted "),
        col("n").cast("string"), F.lit(" time(s), held "), col("held").cast("string"),
        F.lit(". Each -U/-D must retract a row inserted earlier; set on_missing_retraction='ignore' to drop such "
              "retractions as Flink does"))
    duplicate = F.concat(
        F.lit("more than one live row for a unique key: "), col("row"), F.lit(" has "), col("n").cast("string"),
        F.lit(" live rows; retract the old row (-U) before inserting its new version (+U), or drop unique_key from "
              "the declaration"))
    message = F.when(col("kind") == "missing", missing).otherwise(duplicate)
    return [p.where(~fail_when(F.lit(True), message, model=model, input_name=col("input"))) for p in problems]
