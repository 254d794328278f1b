"""A change of a model's projection only (output expressions, filters after its last join) needs no
rebuild: the next run re-projects the result from the last join's state, writes no state, and its
changelog is exactly the difference the change makes (plus the run's own changes). A change that
reaches the joins, or a last join whose state does not hold every row of the result, still needs
one; so does a change of an output column's type, which the changelog table keeps. Output columns
renamed, added, dropped or reordered need none: the result is replaced with the new columns, and
the changelog gains the new ones.

The oracle is Spark's batch evaluation of the new SQL over the inputs' snapshots."""
from __future__ import annotations

import logging
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin import InputSpec, ModelConfig, PlanChangedError, compile_sql, run_once
from streamjoin.api import last_complete_run
from streamjoin.explain import describe
from streamjoin.runtime.plan_change import plan_fingerprint, reprojection_blocker, state_fingerprint
from streamjoin.storage import delta_log

from oracle import batch_result
from scenario import Scenario
from test_exactly_once import InjectedCrash, crash_after
from test_regular_properties import INPUTS, changelog_runs

LEFT = "SELECT l.k AS lk, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
# the same joins, other output expressions and a filter that reads both sides (applied after the join)
LEFT_REPROJECTED = "SELECT l.k AS lk, l.v * 10 + 1 AS v, coalesce(r.w, -1) AS w FROM l LEFT JOIN r ON l.k = r.k " \
                   "WHERE r.w IS NULL OR l.v <= r.w"

HISTORY = [  # duplicates, NULL keys on both sides, an update of a key, a delete
    {"l": [("+I", [1, 1]), ("+I", [1, 1]), ("+I", [None, 2]), ("+I", [2, 3])],
     "r": [("+I", [1, 2]), ("+I", [None, 0]), ("+I", [2, 1])]},
    {"l": [("-U", [2, 3]), ("+U", [3, 0]), ("+I", [None, 2])], "r": [("-D", [2, 1]), ("+I", [3, 3]), ("+I", [1, 0])]},
]


def changed(model: Scenario, sql: str, **config) -> None:
    """The model's SQL (and config) as the user edits it between runs."""
    model.runner.plan = compile_sql("m", sql, model.runner.specs, ModelConfig.from_dict(config))


def replayed(model: Scenario) -> Counter:
    """The result rebuilt from every run's changelog."""
    out: Counter = Counter()
    for run_id in range(1, (last_complete_run(model.tables) or 0) + 1):
        for kind, row in model.runner.changelog(run_id):
            out[tuple(row)] += 1 if kind.startswith("+") else -1
    return Counter({k: v for k, v in out.items() if v})


def state_versions(model: Scenario) -> dict[str, int | None]:
    return {p: delta_log.version(p) for p in model.tables.state_tables() if delta_log.exists(p)}


def test_a_new_projection_is_applied_from_state_with_no_rebuild(spark, tmp_path, caplog):
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    seen: dict[str, list] = {"l": [], "r": []}
    for run in HISTORY:
        model.run(**run)
        for name, rows in run.items():
            seen[name] += rows
    before = model.result
    states = state_versions(model)

    changed(model, LEFT_REPROJECTED)
    assert "only the projection changed (output columns, filters after the last join), so the next run re-projects " \
           "the result from state" in describe(model.plan, model.tables)
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        model.run()  # no new changes: the run happens for the projection alone
    assert "only its projection (output columns, filters after its last join) changed" in caplog.text
    assert "+  select `l__k` AS lk, `l__v` * 10 + 1 AS v" in caplog.text
    assert model.report.status == "committed" and model.report.metrics["reprojected"] is True
    expected = batch_result(spark, LEFT_REPROJECTED, INPUTS, seen)
    assert model.result == expected
    change = Counter(expected)
    change.subtract(before)
    assert model.changelog == Counter({k: v for k, v in change.items() if v})  # exactly the difference
    assert replayed(model) == expected
    assert state_versions(model) == states  # no state was written: nothing was rebuilt

    # the plan fits again: the next run continues incrementally under the new projection
    model.run(l=[("+I", [1, 3]), ("-D", [1, 1])], r=[("+I", [None, 5])])
    seen["l"] += [("+I", [1, 3]), ("-D", [1, 1])]
    seen["r"] += [("+I", [None, 5])]
    assert "reprojected" not in model.report.metrics
    assert model.result == batch_result(spark, LEFT_REPROJECTED, INPUTS, seen)
    assert replayed(model) == model.result


def test_the_run_that_reprojects_also_applies_its_own_changes(spark, tmp_path):
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    model.run(**HISTORY[0])
    changed(model, LEFT_REPROJECTED)
    model.run(**HISTORY[1])
    seen = {n: HISTORY[0].get(n, []) + HISTORY[1].get(n, []) for n in ("l", "r")}
    assert model.report.metrics["reprojected"] is True
    assert model.result == batch_result(spark, LEFT_REPROJECTED, INPUTS, seen)
    assert replayed(model) == model.result


def test_a_crash_in_the_run_that_reprojects_is_repaired_by_the_next_run(spark, tmp_path, monkeypatch):
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    model.run(**HISTORY[0])
    changed(model, LEFT_REPROJECTED)
    model.runner.append_changes(1, HISTORY[1])
    committed = []
    for attempt in range(4):  # the first attempt dies before its first commit, each later one after one more
        with monkeypatch.context() as patch:
            done = crash_after(patch, min(attempt, 1))
            with pytest.raises(InjectedCrash):
                run_once(spark, model.plan, model.tables)
        committed += done
    assert len(committed) == 3 and model.tables.runs not in committed
    model.report = run_once(spark, model.plan, model.tables)
    assert model.report.run_id == 2 and model.report.metrics["reprojected"] is True
    seen = {n: HISTORY[0].get(n, []) + HISTORY[1].get(n, []) for n in ("l", "r")}
    assert model.result == batch_result(spark, LEFT_REPROJECTED, INPUTS, seen)
    assert replayed(model) == model.result


MULTIWAY_INPUTS = {**INPUTS, "s": [("k", "int"), ("x", "int")]}
MULTIWAY = "SELECT l.k, l.v, r.w, s.x FROM l LEFT JOIN r ON l.k = r.k LEFT JOIN s ON l.k = s.k"
MULTIWAY_REPROJECTED = "SELECT l.k, l.v + coalesce(r.w, 0) AS v, r.w, s.x FROM l LEFT JOIN r ON l.k = r.k " \
                       "LEFT JOIN s ON l.k = s.k WHERE s.x IS NULL OR s.x <> r.w"


def test_a_multi_way_join_is_reprojected_from_its_inputs_state(spark, tmp_path):
    model = Scenario(spark, tmp_path, MULTIWAY, config={"join_strategy": "multi"}, **MULTIWAY_INPUTS)
    runs = [{**HISTORY[0], "s": [("+I", [1, 2]), ("+I", [None, 1]), ("+I", [2, 1])]},
            {**HISTORY[1], "s": [("-D", [2, 1]), ("+I", [3, 0])]}]
    for run in runs:
        model.run(**run)
    assert "multi-way join" in model.plan.explain()
    changed(model, MULTIWAY_REPROJECTED, join_strategy="multi")
    model.run()
    seen = {n: [c for run in runs for c in run.get(n, [])] for n in MULTIWAY_INPUTS}
    assert model.report.metrics["reprojected"] is True
    assert model.result == batch_result(spark, MULTIWAY_REPROJECTED, MULTIWAY_INPUTS, seen)
    assert replayed(model) == model.result


REFUSED = [  # (the model's new SQL, its config, why the run refuses it under on_plan_change='fail')
    ("SELECT l.k AS lk, l.v, r.w FROM l JOIN r ON l.k = r.k", {},
     "the change reaches its joins or what they keep, so its state no longer fits"),
    ("SELECT l.k AS lk, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k WHERE l.v > 0", {},  # a filter pushed below the join
     "the change reaches its joins or what they keep"),
    ("SELECT l.k AS lk, l.v + 1 AS v, r.w FROM l LEFT JOIN r ON l.k = r.k", {"state_ttl": "1 hour"},
     "state_ttl lets rows leave state that the result still holds"),
    ("SELECT l.k AS lk, l.v, CAST(r.w AS BIGINT) AS w FROM l LEFT JOIN r ON l.k = r.k", {},
     "so did the type of output column(s) w int before, bigint now, which its changelog table keeps"),
]


def test_other_changes_still_need_a_rebuild_and_write_nothing(spark, tmp_path):
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    model.run(**HISTORY[0])
    model.runner.append_changes(1, {"l": [("+I", [5, 5])]})
    versions = model.versions()
    for new_sql, config, reason in REFUSED:
        changed(model, new_sql, **config, on_plan_change="fail")
        with pytest.raises(PlanChangedError) as refused:
            run_once(spark, model.plan, model.tables)
        assert reason in str(refused.value) and "run it with --full-refresh" in str(refused.value), new_sql
        assert "--- plan of the last run" in str(refused.value)
        assert model.versions() == versions, new_sql


def test_the_state_fingerprint_covers_the_columns_each_input_keeps_not_the_projection():
    def specs(*l_columns: str) -> dict[str, InputSpec]:
        return {"l": InputSpec.from_dict("l", {"columns": [[c, "int"] for c in l_columns]}),
                "r": InputSpec.from_dict("r", {"columns": [["k", "int"], ["w", "int"]]})}

    def fingerprints(sql: str, inputs: dict[str, InputSpec]) -> tuple[str, str]:
        plan = compile_sql("m", sql, inputs, ModelConfig())
        return plan_fingerprint(plan), state_fingerprint(plan)

    plan, state = fingerprints("SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k", specs("k", "v", "u"))
    # state keeps every declared column of an input: any of them may enter the projection
    reprojected = fingerprints("SELECT l.k, l.u * 2 AS v, r.k AS w FROM l LEFT JOIN r ON l.k = r.k WHERE l.v > r.w",
                               specs("k", "v", "u"))
    assert reprojected[0] != plan and reprojected[1] == state
    # an input declared with another column keeps other rows in state
    assert fingerprints("SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k", specs("k", "v"))[1] != state


def test_a_nested_join_on_a_padded_side_needs_a_rebuild(spark, tmp_path):
    three = {**INPUTS, "s": [("k", "int"), ("x", "int")]}
    sql = "SELECT l.k, r.w, s.x FROM l JOIN r ON l.v = r.w LEFT JOIN s ON l.k = s.k"
    model = Scenario(spark, tmp_path, sql, config={"join_strategy": "binary"}, **three)
    model.run(l=[("+I", [1, 1])], r=[("+I", [1, 1])])
    changed(model, sql.replace("s.x", "s.x + 1 AS x"), join_strategy="binary", on_plan_change="fail")
    with pytest.raises(PlanChangedError, match="the last join pads the rows of join j1 with a NULL key"):
        model.run()


TIMED = {name: InputSpec.from_dict(name, {"columns": [["k", "int"], ["v", "int"], ["t", "timestamp"]], "event_time": "t",
                                          "unique_key": ["k"] if name == "r" else []}) for name in ("l", "r")}


@pytest.mark.parametrize("sql, kind", [
    ("SELECT l.k, r.v FROM l JOIN r ON l.k = r.k AND l.t BETWEEN r.t AND r.t + INTERVAL 1 MINUTE", "an inner"),
    ("SELECT l.k, r.v FROM l LEFT JOIN r FOR SYSTEM_TIME AS OF l.t AS r ON l.k = r.k", "a left event-time temporal"),
    ("SELECT l.k, r.v FROM l ASOF JOIN r MATCH_CONDITION(l.t >= r.t) ON l.k = r.k", "an inner asof"),
])
def test_a_time_based_last_join_cannot_be_reprojected(sql, kind):
    plan = compile_sql("m", sql, TIMED, ModelConfig())
    assert reprojection_blocker(plan) == \
        f"the last join is {kind} join, whose state does not keep every row its result was made of"


PROJECTIONS = [
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l {join} JOIN r ON l.k = r.k",
    "SELECT coalesce(l.k, r.k) AS lk, l.v * 2 AS v, r.k AS rk, r.w - 1 AS w FROM l {join} JOIN r ON l.k = r.k",
    "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l {join} JOIN r ON l.k = r.k WHERE l.v IS NULL OR r.w IS NULL OR l.v >= r.w",
]


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(join=st.sampled_from(["", "LEFT", "RIGHT", "FULL"]), pair=st.permutations(range(3)),
       runs=changelog_runs(runs=3), cut=st.integers(1, 2))
def test_after_a_projection_change_the_result_is_the_new_sqls_batch_result(spark, tmp_path_factory, join, pair, runs,
                                                                          cut):
    old, new = (PROJECTIONS[i].format(join=join) for i in pair[:2])
    model = Scenario(spark, tmp_path_factory.mktemp("p"), old, **INPUTS)
    seen: dict[str, list] = {"l": [], "r": []}
    for i, run in enumerate(runs):
        if i == cut:
            changed(model, new)
        model.run(**run)
        for name, rows in run.items():
            seen[name] += rows
        assert model.result == batch_result(spark, new if i >= cut else old, INPUTS, seen), f"run {i}"
    assert replayed(model) == model.result


COLUMN_CHANGES = {  # LEFT with its output columns changed, and a filter after the join that changes rows too
    "renamed": "SELECT l.k AS key, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k",
    "added": "SELECT l.k AS lk, l.v, r.w, l.v + r.w AS total FROM l LEFT JOIN r ON l.k = r.k",
    "dropped and filtered": "SELECT l.k AS lk, r.w FROM l LEFT JOIN r ON l.k = r.k WHERE r.w IS NULL OR r.w > 0",
}
MORE = {"l": [("+I", [3, 5]), ("-D", [1, 1])], "r": [("+I", [None, 4]), ("-D", [1, 2])]}
LAST = {"l": [("+I", [1, 9])], "r": [("+I", [1, 3])]}


def changelog_rows(model: Scenario, run_id: int) -> Counter:
    """One run's changelog rows in every column the changelog table holds, signed."""
    out: Counter = Counter()
    for row in delta_log.table(model.tables.changelog).to_pyarrow_table().to_pylist():
        if row.pop("_run_id") == run_id:
            sign = 1 if row.pop("_row_kind").startswith("+") else -1
            out[tuple(sorted(row.items(), key=lambda kv: kv[0]))] += sign
    return Counter({k: v for k, v in out.items() if v})


def as_rows(counts: Counter, names: list[str], columns: list[str], sign: int) -> Counter:
    """Result rows (tuples in `names`) as changelog rows in `columns` (the others NULL), signed."""
    return Counter({tuple(sorted({c: dict(zip(names, row)).get(c) for c in columns}.items(), key=lambda kv: kv[0])):
                    sign * n for row, n in counts.items()})


@pytest.mark.parametrize("change", COLUMN_CHANGES)
def test_output_columns_renamed_added_dropped_or_reordered_need_no_rebuild(spark, tmp_path, change, caplog):
    new_sql = COLUMN_CHANGES[change]
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    for run in HISTORY:
        model.run(**run)
    before, states = model.result, state_versions(model)
    changed(model, new_sql)
    assert "only the projection changed" in describe(model.plan, model.tables)
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        model.run(**MORE)  # the re-projection, and the run's own changes
    assert "only its projection (output columns, filters after its last join) changed" in caplog.text
    assert model.report.metrics["reprojected"] is True and state_versions(model) != {}
    seen = {n: [c for run in [*HISTORY, MORE] for c in run.get(n, [])] for n in INPUTS}
    expected = batch_result(spark, new_sql, INPUTS, seen)
    assert model.result == expected
    names = model.plan.output_names
    columns = [f.name for f in delta_log.table_schema(model.tables.changelog) if f.name not in ("_row_kind", "_run_id")]
    assert columns == ["lk", "v", "w"] + [n for n in names if n not in ("lk", "v", "w")]  # the changelog gains columns
    change_rows = as_rows(expected, names, columns, 1)
    change_rows.update(as_rows(before, ["lk", "v", "w"], columns, -1))
    assert changelog_rows(model, model.report.run_id) == Counter({k: v for k, v in change_rows.items() if v})
    model.run(**LAST)  # and the runs after it go on in the new columns
    seen = {n: seen[n] + LAST.get(n, []) for n in INPUTS}
    assert model.result == batch_result(spark, new_sql, INPUTS, seen)
    assert replayed(model) == model.result  # the changelog read in the result's columns replays to it
    assert states != state_versions(model)  # (the run after it wrote state as usual)


def test_a_run_that_changes_the_columns_is_repaired_after_a_crash_at_any_point(spark, tmp_path, monkeypatch):
    sql = COLUMN_CHANGES["renamed"]
    reference = Scenario(spark, tmp_path / "reference", LEFT, **INPUTS)
    for run in HISTORY:
        reference.run(**run)
    changed(reference, sql)
    reference.run(**MORE)
    for crash in range(4):  # after 0..3 commits, and (3) between the changelog's new columns and its rows
        model = Scenario(spark, tmp_path / f"crash{crash}", LEFT, **INPUTS)
        for run in HISTORY:
            model.run(**run)
        changed(model, sql)
        model.runner.append_changes(model.runs, MORE)
        model.runs += 1
        if crash < 3:
            crash_after(monkeypatch, crash)
        else:
            real = delta_log._add_columns

            def add_then_crash(*args):
                if real(*args):
                    raise InjectedCrash("crash after the changelog gained its columns")
                return False

            monkeypatch.setattr(delta_log, "_add_columns", add_then_crash)
        with pytest.raises(InjectedCrash):
            run_once(spark, model.plan, model.tables)
        monkeypatch.undo()
        model.run()
        assert model.report.run_id == 3 and model.result == reference.result, crash
        assert changelog_rows(model, 3) == changelog_rows(reference, 3), crash


def test_output_columns_only_reordered_change_nothing_stored(spark, tmp_path):
    model = Scenario(spark, tmp_path, LEFT, **INPUTS)
    for run in HISTORY:
        model.run(**run)
    before = model.result
    changed(model, "SELECT r.w, l.k AS lk, l.v FROM l LEFT JOIN r ON l.k = r.k")
    model.run()
    assert model.report.metrics["reprojected"] is True and model.changelog == Counter()
    assert model.result == before  # read in the table's columns, which Delta keeps by name
