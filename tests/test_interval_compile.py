"""The compiler recognises interval joins: which conditions bound the time, and which do not."""
from __future__ import annotations

from datetime import timedelta

import pytest

from streamjoin.sql.compiler import compile_sql
from streamjoin.errors import CompileError
from streamjoin.sql.plan import Join, TimeBound
from streamjoin.spec import InputSpec

H = timedelta(hours=1)
MS = timedelta(milliseconds=1)


def _specs(ts_type: str = "timestamp", *, event_time: bool = True) -> dict[str, InputSpec]:
    raw = {"columns": [["id", "int"], ["v", "int"], ["ts", ts_type]]}
    if event_time:
        raw["event_time"] = "ts"
    return {n: InputSpec.from_dict(n, raw) for n in ("l", "r")}


def _join(on: str, kind: str = "JOIN", **spec_options) -> Join:
    plan = compile_sql("m", f"SELECT l.id, r.v FROM l {kind} r ON l.id = r.id AND {on}", _specs(**spec_options))
    assert isinstance(plan.root, Join)
    return plan.root


def _bound(lower, upper, lower_strict=False, upper_strict=False) -> TimeBound:
    return TimeBound("l__ts", "r__ts", lower, upper, lower_strict, upper_strict)


@pytest.mark.parametrize("on, bound", [
    ("l.ts BETWEEN r.ts - INTERVAL '4' HOUR AND r.ts", _bound(-4 * H, timedelta(0))),
    ("r.ts BETWEEN l.ts - INTERVAL '4' HOUR AND l.ts", _bound(timedelta(0), 4 * H)),
    ("l.ts >= r.ts - INTERVAL '10' MILLISECOND AND l.ts <= r.ts + INTERVAL '20' MILLISECOND", _bound(-10 * MS, 20 * MS)),
    ("l.ts > r.ts AND l.ts < r.ts + INTERVAL '1' MINUTE", _bound(timedelta(0), timedelta(minutes=1), True, True)),
    ("r.ts < l.ts AND r.ts + INTERVAL '1' MINUTE >= l.ts", _bound(timedelta(0), timedelta(minutes=1), True, False)),
    ("r.ts - INTERVAL '2' SECOND <= l.ts AND l.ts - INTERVAL 3 SECONDS < r.ts",
     _bound(timedelta(seconds=-2), timedelta(seconds=3), False, True)),
    ("l.ts - r.ts <= INTERVAL '1' DAY AND l.ts - r.ts >= INTERVAL '-90' MINUTE", _bound(timedelta(minutes=-90), 24 * H)),
    ("l.ts BETWEEN r.ts + INTERVAL '1:30' HOUR TO MINUTE AND r.ts + INTERVAL '1' HOUR + INTERVAL '45' MINUTE",
     _bound(timedelta(minutes=90), timedelta(minutes=105))),
    ("l.ts BETWEEN r.ts - INTERVAL '1.5' SECOND AND r.ts + INTERVAL '250' MICROSECOND",
     _bound(timedelta(seconds=-1.5), timedelta(microseconds=250))),
])
def test_two_sided_bounds_make_an_interval_join(on: str, bound: TimeBound) -> None:
    join = _join(on)
    assert join.time_bound == bound
    assert join.residual is None


def test_the_tighter_of_two_bounds_wins_and_strict_beats_equal() -> None:
    join = _join("l.ts >= r.ts AND l.ts > r.ts AND l.ts <= r.ts + INTERVAL '2' HOUR AND l.ts <= r.ts + INTERVAL '1' HOUR")
    assert join.time_bound == _bound(timedelta(0), H, lower_strict=True)


def test_other_conditions_stay_in_the_residual() -> None:
    join = _join("l.v < r.v AND l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' HOUR")
    assert join.time_bound == _bound(timedelta(0), H)
    assert join.residual == "(`l__v` < `r__v`)"


@pytest.mark.parametrize("kind", ["LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"])
def test_outer_joins_can_be_interval_joins(kind: str) -> None:
    assert _join("l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' HOUR", kind).time_bound == _bound(timedelta(0), H)


def test_a_where_clause_bound_of_a_comma_join_counts() -> None:
    plan = compile_sql("m", "SELECT l.id FROM l, r WHERE l.id = r.id AND l.ts BETWEEN r.ts - INTERVAL '4' HOUR AND r.ts",
                       _specs())
    assert plan.root.time_bound == _bound(-4 * H, timedelta(0))
    assert plan.is_interval


@pytest.mark.parametrize("on", [
    "l.ts >= r.ts",  # one-sided: state would grow forever, so a regular join
    "l.ts <= r.ts + INTERVAL '1' HOUR",
    "l.ts >= r.ts AND l.v <= r.v + 1",
    "l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' MONTH",  # not a fixed duration
    "(l.ts >= r.ts AND l.ts <= r.ts + INTERVAL '1' HOUR OR l.v = r.v)",
    "l.ts + l.ts >= r.ts AND l.ts <= r.ts",
])
def test_without_two_fixed_bounds_it_stays_a_regular_join(on: str) -> None:
    join = _join(on)
    assert join.time_bound is None
    assert join.residual is not None


def test_without_event_times_it_stays_a_regular_join() -> None:
    assert _join("l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' HOUR", event_time=False).time_bound is None


def test_semi_joins_stay_regular() -> None:
    plan = compile_sql("m", "SELECT l.id FROM l WHERE EXISTS (SELECT 1 FROM r WHERE r.id = l.id "
                            "AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '1' HOUR)", _specs())
    assert plan.root.time_bound is None


def test_an_event_time_that_is_not_a_timestamp_is_rejected() -> None:
    with pytest.raises(CompileError, match="event_time column 'ts' is date"):
        _join("l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' DAY", ts_type="date")


def test_every_event_time_of_a_model_with_a_time_based_join_must_be_a_timestamp() -> None:
    """The model's one watermark is made of every declared event time, also that of an input only a
    regular join reads; without a time-based join none is read, and any type will do."""
    seen = InputSpec.from_dict("s", {"columns": [["id", "int"], ["seen", "bigint"]], "event_time": "seen"})
    sql = "SELECT l.id, r.v, s.seen FROM l JOIN r ON l.id = r.id {} JOIN s ON s.id = l.id"
    with pytest.raises(CompileError, match="input 's': event_time column 'seen' is bigint; the model's watermark, "
                                           "which its interval join j1 follows"):
        compile_sql("m", sql.format("AND l.ts BETWEEN r.ts AND r.ts + INTERVAL '1' HOUR"), {**_specs(), "s": seen})
    plan = compile_sql("m", sql.format(""), {**_specs(), "s": seen})
    assert plan.watermark_inputs == ["l", "r", "s"] and not plan.is_interval
