"""Interval joins on random append-only streams, against a batch evaluation and against Flink.

A random case has two inputs `l` and `r` (id, k, v, ts), a random join type, random bounds
(strict or not), watermark delays, allowed lateness, `=` or `<=>` keys and sometimes a
residual, and 2-3 runs of 0-4 rows per input. Rows are *on time*: a row arriving in run k
has event time >= W'_{k-1}, the watermark after the previous run minus allowed_lateness
(any disorder above that is allowed, so rows may be behind the watermark within the
lateness). Some rows repeat an earlier row exactly (same id), some have NULL keys. (A NULL
event time is malformed input, as in Flink: tests/test_bad_input.py.)

The batch oracle (see `oracle_rows`) is the same query run by Spark SQL over every row of
runs 0..k, restricted to the rows whose windows are closed after run k; the streamed result
after each run k must equal it:

- Every pair of the batch join is in the streamed result. On-time rows lose no pair: if a
  row had left state before a partner arrived in run k, the partner's event time would be
  below W'_{k-1} (it would have to be for the pair to satisfy the bound), which on-time rows
  never are.
- A batch row null-padded on a preserved side is in the streamed result exactly when its
  window is closed after run k: the bounds admit no pair at all (`l.ts > r.ts AND l.ts < r.ts`:
  Flink pads every outer row as it arrives), its key is NULL (`=` only, it can never match), or its
  event time is below that side's alive_from — W' + lower for
  the left (one microsecond more for a strict bound), W' - upper for the right, with
  W' = W_k - allowed_lateness. Rows whose window is still open are not yet emitted.

W_k follows FORMAT.md's definition (the test recomputes it from the rows it generated):
W_k = max(W_{k-1}, min over inputs of (largest event time so far - delay)), unset until
both inputs have seen a row.
"""
from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import IntegerType, StructField, StructType, TimestampType

from streamjoin.conformance import run_case
from streamjoin.sql.plan import TimeBound

T0 = dt.datetime(2021, 12, 25, 10, 0, 0)
SIDES = ("l", "r")
COLUMNS = [["id", "int"], ["k", "int"], ["v", "int"], ["ts", "timestamp"]]
SCHEMA = StructType([StructField("id", IntegerType()), StructField("k", IntegerType()),
                     StructField("v", IntegerType()), StructField("ts", TimestampType())])


@dataclass
class RandomCase:
    """A generated case, plus what the oracle needs: all rows and the final watermark."""

    case: dict[str, Any]
    join_type: str
    condition: str
    null_safe: bool
    lower: dt.timedelta
    upper: dt.timedelta
    strict: tuple[bool, bool]
    lateness: dt.timedelta
    rows: dict[str, list[list[Any]]] = field(default_factory=dict)  # per input: [id, k, v, ts, run]
    watermarks: list[dt.datetime | None] = field(default_factory=list)  # W after each run

    @property
    def watermark(self) -> dt.datetime | None:
        return self.watermarks[-1] if self.watermarks else None


def _shifted(column: str, seconds: int) -> str:
    if seconds == 0:
        return column
    return f"{column} {'+' if seconds > 0 else '-'} INTERVAL '{abs(seconds)}' SECOND"


def random_case(rng: random.Random, name: str, *, join_types: tuple[str, ...] = ("inner", "left", "right", "full")) -> RandomCase:
    """A random interval-join case with on-time rows (see the module docstring)."""
    join_type = rng.choice(join_types)
    lower = rng.randint(-6, 3)
    upper = lower + rng.randint(0, 6)
    strict = (rng.random() < 0.3, rng.random() < 0.3)
    null_safe = rng.random() < 0.3
    delays = {s: rng.choice([0, 1, 3]) for s in SIDES}
    lateness = rng.choice([0, 2, 3])
    ge, le = (">" if strict[0] else ">=", "<" if strict[1] else "<=")
    condition = (f"l.k {'<=>' if null_safe else '='} r.k AND l.ts {ge} {_shifted('r.ts', lower)} "
                 f"AND l.ts {le} {_shifted('r.ts', upper)}")
    if rng.random() < 0.3:
        condition += " AND l.v <= r.v"
    inputs = {s: {"columns": COLUMNS, "event_time": "ts", "watermark_delay": f"{delays[s]} seconds"} for s in SIDES}
    config = {"allowed_lateness": f"{lateness} seconds"} if lateness else {}
    sql = f"SELECT l.id AS lid, r.id AS rid FROM l {join_type.upper()} JOIN r ON {condition}"
    out = RandomCase({"name": name, "inputs": inputs, "sql": sql, "config": config, "runs": []}, join_type, condition,
                     null_safe, dt.timedelta(seconds=lower), dt.timedelta(seconds=upper), strict,
                     dt.timedelta(seconds=lateness), {s: [] for s in SIDES})
    max_time: dict[str, dt.datetime | None] = {s: None for s in SIDES}
    next_id = 0
    for run in range(rng.randint(2, 3)):
        on_time_from = T0 if out.watermark is None else max(T0, out.watermark - out.lateness)
        changes: dict[str, list] = {}
        for s in SIDES:
            for _ in range(rng.randint(0, 4)):
                earlier = [r for r in out.rows[s] if r[3] >= on_time_from]
                if earlier and rng.random() < 0.15:
                    row = [*rng.choice(earlier)[:4], run]
                else:
                    next_id += 1
                    ts = on_time_from + dt.timedelta(seconds=rng.randint(0, 10), milliseconds=rng.choice([0, 0, 0, 500]))
                    row = [next_id, rng.choice([1, 2, None]), rng.choice([0, 1, 2]), ts, run]
                out.rows[s].append(row)
                changes.setdefault(s, []).append(["+I", [*row[:3], str(row[3])]])
                max_time[s] = row[3] if max_time[s] is None else max(max_time[s], row[3])
        watermark = out.watermark
        if all(max_time[s] is not None for s in SIDES):
            candidate = min(max_time[s] - dt.timedelta(seconds=delays[s]) for s in SIDES)
            watermark = candidate if watermark is None else max(watermark, candidate)
        out.watermarks.append(watermark)
        out.case["runs"].append({"changes": changes})
    return out


def _flink_client() -> Any:
    """tests/flink_oracle/client.py, imported by path (that folder is no package)."""
    import importlib.util

    path = Path(__file__).resolve().parent / "flink_oracle" / "client.py"
    spec = importlib.util.spec_from_file_location("interval_flink_client", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _micros(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def oracle_rows(spark, rc: RandomCase, run: int) -> Counter:
    """The batch result after run `run`, restricted to rows whose windows are closed (module docstring)."""
    for s in SIDES:
        rows = [r[:4] for r in rc.rows[s] if r[4] <= run]
        spark.createDataFrame(rows, SCHEMA).createOrReplaceTempView(f"oracle_{s}")
    closed = {}
    watermark = rc.watermarks[run]
    empty = TimeBound("l.ts", "r.ts", rc.lower, rc.upper, *rc.strict).empty
    for s in SIDES:
        never = ["TRUE" if empty else "FALSE"] + ([] if rc.null_safe else [f"{s}.k IS NULL"])
        if watermark is not None:
            w, us = _micros(watermark - rc.lateness), dt.timedelta(microseconds=1)
            alive_from = (w + rc.lower // us + int(rc.strict[0]) if s == "l"
                          else w - rc.upper // us + int(rc.strict[1]))
            never.append(f"unix_micros({s}.ts) < {alive_from}")
        closed[s] = " OR ".join(never)
    sql = (f"SELECT l.id AS lid, r.id AS rid FROM oracle_l l {rc.join_type.upper()} JOIN oracle_r r ON {rc.condition} "
           f"WHERE (l.id IS NOT NULL AND r.id IS NOT NULL) OR (r.id IS NULL AND ({closed['l']})) "
           f"OR (l.id IS NULL AND ({closed['r']}))")
    return Counter(tuple(row) for row in spark.sql(sql).collect())


def streamed_rows(spark, rc: RandomCase) -> list[Counter]:
    """The result after each run."""
    outcome = run_case(spark, rc.case)
    assert outcome["ok"], f"{outcome['error']}\n{rc.case}"
    return [Counter(tuple(row) for row in run["result"]) for run in outcome["runs"]]


@settings(max_examples=5, deadline=None)
@given(st.randoms(use_true_random=False))
def test_streamed_result_equals_the_batch_join_of_closed_windows_after_every_run(spark, rng: random.Random) -> None:
    rc = random_case(rng, "interval-property")
    for run, got in enumerate(streamed_rows(spark, rc)):
        want = oracle_rows(spark, rc, run)
        assert got == want, (f"after run {run}: {rc.case['sql']} lateness {rc.lateness} W {rc.watermarks}\n"
                             f"rows [id, k, v, ts, run] {rc.rows}\nstreamed-only {got - want}\nbatch-only {want - got}")


def test_inner_interval_joins_end_where_flink_ends(spark) -> None:
    """Random INNER interval joins (no NULL event times: Flink rejects them) through real Flink
    (one JVM for all cases); the oracle feeds Flink FORMAT.md's watermark after every run."""
    run_in_flink = _flink_client().run_in_flink
    cases = [random_case(random.Random(seed), f"interval-vs-flink-{seed}", join_types=("inner",))
             for seed in range(5)]
    flink = run_in_flink([rc.case for rc in cases])
    for rc in cases:
        got = streamed_rows(spark, rc)[-1]
        assert got == Counter(tuple(row) for row in flink[rc.case["name"]]), rc.case
        assert got == oracle_rows(spark, rc, len(rc.watermarks) - 1), rc.case
