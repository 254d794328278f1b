"""Which runs' output changes hold no retraction (`sql.plan.inserts_only`), per join kind.

A run whose output change can hold no retraction appends it to the result's level 0, with no merge;
the write checks the claim and fails the run when a retraction shows up.
A regular outer join retracts a padded row when its match arrives, and an ASOF join retracts its
choice; a join with time pads a row once, for good. A temporal join's change is its probes'.
"""
from __future__ import annotations

import pytest

from scenario import input_specs
from streamjoin.conformance import CaseRunner
from streamjoin.runtime.run import run_once
from streamjoin.sql.compiler import compile_sql
from streamjoin.sql.plan import inserts_only
from streamjoin.storage import delta_log, state

TIMED = {"columns": [["k", "int"], ["v", "int"], ["ts", "timestamp"]], "event_time": "ts"}
VERSIONS = {**TIMED, "unique_key": ["k"]}
PROBES = {"columns": [["k", "int"], ["v", "int"]], "proc_time": "pt", "changelog_format": "append"}
INTERVAL = "SELECT l.v, r.v AS w FROM l {kind} JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '5' SECOND"
WINDOW = ("SELECT L.v, R.v AS w FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '5' SECOND)) L {kind} JOIN "
          "TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' SECOND)) R ON L.k = R.k AND "
          "L.window_start = R.window_start AND L.window_end = R.window_end")
TEMPORAL = "SELECT l.v, r.v AS w FROM l {kind} JOIN r FOR SYSTEM_TIME AS OF l.ts AS r ON l.k = r.k"
LOOKUP = "SELECT l.v, r.v AS w FROM l {kind} JOIN r FOR SYSTEM_TIME AS OF l.pt AS r ON l.k = r.k"
ASOF = "SELECT l.v, r.v AS w FROM l {kind} ASOF JOIN r MATCH_CONDITION(l.ts >= r.ts) ON l.k = r.k"


@pytest.mark.parametrize("sql, kind, left, right, expected", [
    ("SELECT l.v, r.v AS w FROM l {kind} JOIN r ON l.k = r.k", "", TIMED, TIMED, True),
    ("SELECT l.v, r.v AS w FROM l {kind} JOIN r ON l.k = r.k", "LEFT", TIMED, TIMED, False),  # a match retracts a pad
    (INTERVAL, "FULL", TIMED, TIMED, True),  # padded once no match can come any more
    (WINDOW, "FULL", TIMED, TIMED, True),  # padded when the window fires
    (ASOF, "", TIMED, TIMED, False),  # a nearer right row changes the choice
    (TEMPORAL, "LEFT", TIMED, VERSIONS, True),  # the versions' changes retract nothing it emitted
    (TEMPORAL, "", TIMED, VERSIONS, True),  # a held-back probe retraction comes with the insertion it cancels
    (LOOKUP, "LEFT", PROBES, VERSIONS, True),  # the dimension's changes retract nothing it emitted
    (LOOKUP, "", {**PROBES, "changelog_format": "changelog"}, VERSIONS, True),  # retracts in the run it reads
])
def test_a_run_whose_inputs_insert_only_emits_insertions_only_unless_a_join_retracts_its_own_rows(
        sql, kind, left, right, expected):
    specs = input_specs({"l": left, "r": right})
    plan = compile_sql("m", sql.format(kind=kind), specs)
    assert inserts_only(plan.root, set(specs)) is expected
    assert inserts_only(plan.root, {"r"}) is False  # its left side retracts this run


def test_a_time_based_outer_join_appends_its_padded_rows_to_the_result_s_level_0(spark, tmp_path):
    """Its runs write no result bucket: every file the result holds is level 0's."""
    sql = INTERVAL.format(kind="LEFT")
    runner = CaseRunner(spark, {"name": "padded", "sql": sql, "runs": [], "inputs": {"l": TIMED, "r": TIMED}},
                        str(tmp_path))
    runner.append_changes(0, {"l": [["+I", [1, 10, "2024-01-01 00:00:01"]], ["+I", [2, 20, "2024-01-01 00:00:02"]]],
                              "r": [["+I", [1, 100, "2024-01-01 00:00:03"]]]})
    run_once(spark, runner.plan, runner.tables)
    minute = "2024-01-01 00:01:00"
    runner.append_changes(1, {"l": [["+I", [3, 30, minute]]], "r": [["+I", [3, 300, minute]]]})
    run_once(spark, runner.plan, runner.tables)
    assert sorted(runner.result(), key=repr) == [(10, 100), (20, None), (30, 300)]  # order 2 padded in run 2
    files = delta_log.data_files(runner.tables.result, delta_log.version(runner.tables.result))
    assert files and state.level0(files) == files


def test_an_output_that_only_inserts_may_stamp_its_rows_with_the_run_s_time(spark, tmp_path):
    """`current_timestamp() AS loaded_at` in an interval join of append-only inputs: each row keeps the time
    of the run that emitted it (no row is ever retracted, so no run computes it again)."""
    appended = {**TIMED, "changelog_format": "append"}
    sql = ("SELECT l.v, r.v AS w, current_timestamp() AS loaded_at FROM l JOIN r ON l.k = r.k "
           "AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '5' SECOND")
    runner = CaseRunner(spark, {"name": "stamped", "sql": sql, "runs": [], "inputs": {"l": appended, "r": appended}},
                        str(tmp_path))
    runner.append_changes(0, {"l": [["+I", [1, 10, "2024-01-01 00:00:01"]]], "r": [["+I", [1, 100, "2024-01-01 00:00:03"]]]})
    run_once(spark, runner.plan, runner.tables)
    runner.append_changes(1, {"l": [["+I", [2, 20, "2024-01-01 00:00:04"]]], "r": [["+I", [2, 200, "2024-01-01 00:00:05"]]]})
    run_once(spark, runner.plan, runner.tables)
    stamped = {row[:2]: row[2] for row in runner.result()}
    assert set(stamped) == {(10, 100), (20, 200)}
    assert stamped[(10, 100)] < stamped[(20, 200)]  # each the time of its own run


def test_an_inner_join_of_insertions_joins_a_stored_retraction_as_a_retraction(spark, tmp_path):
    """Runs whose inputs only insert emit their inner join's parts unconsolidated when every part adds
    rows. A side joined as stored (no unique key) that holds a retraction apart from the row it retracts
    joins it as a negative part, which the output must cancel: the state's file statistics tell."""
    plain = {"columns": [["k", "int"], ["v", "int"]]}
    sql = "SELECT l.v, r.v AS w FROM l JOIN r ON l.k = r.k"
    runner = CaseRunner(spark, {"name": "parts", "sql": sql, "runs": [], "inputs": {"l": plain, "r": plain}},
                        str(tmp_path))

    def weights_stored() -> set[int]:
        mins = {f.stat("minValues", "_weight") for p in runner.tables.state_tables()
                for f in delta_log.data_files(p, delta_log.version(p)) if f.num_records}
        assert None not in mins  # every state file states its smallest weight
        return mins

    runner.append_changes(0, {"l": [["+I", [1, 10]]], "r": [["+I", [1, 100]]]})
    run_once(spark, runner.plan, runner.tables)
    assert weights_stored() == {1}
    runner.append_changes(1, {"l": [["-D", [1, 10]]]})
    run_once(spark, runner.plan, runner.tables)
    assert runner.changelog(2) == [("-D", (10, 100))]
    assert min(weights_stored()) == -1  # l's retraction, stored apart from its row
    runner.append_changes(2, {"l": [["+I", [1, 10]]], "r": [["+I", [1, 200]]]})
    run_once(spark, runner.plan, runner.tables)
    assert sorted(runner.changelog(3)) == [("+I", (10, 100)), ("+I", (10, 200))]
    assert sorted(runner.result()) == [(10, 100), (10, 200)]
    runner.append_changes(3, {"l": [["+I", [1, 10]]], "r": [["+I", [1, 100]]]})
    run_once(spark, runner.plan, runner.tables)  # a row twice: two +I rows
    assert sorted(runner.changelog(4)) == [("+I", (10, 100))] * 3 + [("+I", (10, 200))]
    assert sorted(runner.result()) == [(10, 100)] * 4 + [(10, 200)] * 2


def test_a_temporal_join_emits_a_held_retraction_with_its_insertion_in_a_run_of_insertions(spark, tmp_path):
    """A probe's retraction that waits for the watermark in state, apart from the insertion it takes, is
    emitted with it by a later run whose inputs only insert: the two cancel, though the run's output
    otherwise only adds rows. The probes table's file statistics tell."""
    runner = CaseRunner(spark, {"name": "held", "sql": TEMPORAL.format(kind=""), "runs": [],
                                "inputs": {"l": TIMED, "r": VERSIONS}}, str(tmp_path))
    runner.append_changes(0, {"l": [["+I", [1, 10, "2024-01-01 00:00:05"]]], "r": [["+I", [1, 100, "2024-01-01 00:00:00"]]]})
    run_once(spark, runner.plan, runner.tables)
    runner.append_changes(1, {"l": [["-D", [1, 10, "2024-01-01 00:00:05"]]]})
    run_once(spark, runner.plan, runner.tables)  # the watermark stays at 00:00:00: both wait
    runner.append_changes(2, {"l": [["+I", [2, 20, "2024-01-01 00:00:11"]]], "r": [["+I", [2, 200, "2024-01-01 00:00:10"]]]})
    run_once(spark, runner.plan, runner.tables)  # the watermark passes 00:00:05: the pair is emitted and cancels
    assert [runner.changelog(run) for run in (1, 2, 3)] == [[], [], []]
    runner.append_changes(3, {"l": [["+I", [1, 30, "2024-01-01 00:00:12"]]], "r": [["+I", [1, 300, "2024-01-01 00:00:20"]]]})
    run_once(spark, runner.plan, runner.tables)
    assert sorted(runner.changelog(4)) == [("+I", (20, 200)), ("+I", (30, 100))]
