"""ASOF joins over changelogs: each left row with the one right row of its key nearest in time.

Scenarios are conformance cases run through the real pipeline (the result after each run, and what a
run retracts and re-emits when a right row arrives, changes or goes); a property test checks random
changelogs of both sides, at random run boundaries, against the rule computed in Python over the
inputs' snapshots after every run. Times are seconds after 2024-01-01 00:00:00.
"""
from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario import Scenario, assert_ok, cases_pass, compacting_at, compile_error, input_specs, insert
from streamjoin.conformance import CaseRunner, run_case
from streamjoin.errors import InputError
from streamjoin.runtime.run import run_once
from streamjoin.spec import InputSpec
from streamjoin.sql.compiler import compile_sql

CASES = sorted((Path(__file__).parent / "cases").glob("asof-*.json"))
TRADES = {"columns": [["id", "int"], ["sym", "string"], ["ts", "timestamp"]]}
QUOTES = {"columns": [["sym", "string"], ["px", "int"], ["ts", "timestamp"]]}
LEFT = "SELECT t.id, t.sym, q.px FROM trades t LEFT ASOF JOIN quotes q MATCH_CONDITION(t.ts >= q.ts) ON t.sym = q.sym"


def t(seconds: int) -> str:
    return f"2024-01-01 00:00:{seconds:02d}"


def trade(i: int, sym: str | None, s: int, kind: str = "+I") -> list:
    return [kind, [i, sym, t(s)]]


def quote(sym: str | None, px: int, s: int, kind: str = "+I") -> list:
    return [kind, [sym, px, t(s)]]


def case(name: str, sql: str, runs: list[tuple[dict, list]], config: dict | None = None) -> dict:
    """Runs are (changes as {input: [changes]}, the result after the run)."""
    return {"name": name, "sql": sql, "inputs": {"trades": TRADES, "quotes": QUOTES}, "config": config or {},
            "runs": [{"changes": changes, "expect_result": result} for changes, result in runs]}


SCENARIOS = [
    case("the-latest-quote-at-or-before-and-a-new-one-moves-only-the-trades-it-is-nearer-to", LEFT, [
        ({"trades": [trade(1, "A", 5), trade(2, "A", 1), trade(3, "B", 5), trade(4, None, 5)],
          "quotes": [quote("A", 100, 2), quote("A", 101, 6), quote(None, 9, 1)]},
         [[1, "A", 100], [2, "A", None], [3, "B", None], [4, None, None]]),
        ({"quotes": [quote("A", 102, 4), quote("B", 7, 0)]}, [[1, "A", 102], [2, "A", None], [3, "B", 7], [4, None, None]]),
        ({"quotes": [quote("A", 102, 4, "-D")], "trades": [trade(2, "A", 1, "-D"), trade(5, "A", 9)]},
         [[1, "A", 100], [3, "B", 7], [4, None, None], [5, "A", 101]]),
    ]),
    case("duckdb-spelling-strict-and-earliest-after", "SELECT t.id, q.px FROM trades t ASOF JOIN quotes q "
         "ON t.sym = q.sym AND q.ts > t.ts", [
             ({"trades": [trade(1, "A", 5), trade(1, "A", 5), trade(2, "A", 9)],
               "quotes": [quote("A", 1, 5), quote("A", 2, 7), quote("A", 3, 8)]},
              [[1, 2], [1, 2]]),  # a duplicate left row joins twice; nothing after 9: dropped (inner)
             ({"quotes": [quote("A", 2, 7, "-U"), quote("A", 4, 7, "+U")]}, [[1, 4], [1, 4]]),
         ]),
    case("ties-go-to-the-smallest-row-and-where-filters-the-chosen-row", LEFT + " WHERE q.px IS NULL OR q.px < 50", [
        ({"trades": [trade(1, "A", 5), trade(2, "B", 5)],
          "quotes": [quote("A", 60, 3), quote("A", 20, 3), quote("B", 90, 4), quote("B", 10, 2)]},
         [[1, "A", 20]]),  # B's nearest is 90 (dropped by WHERE), not the older 10
    ]),
    case("conditions-on-the-right-input-in-on-filter-it-before-choosing", LEFT.replace(
        "ON t.sym = q.sym", "ON t.sym = q.sym AND q.px < 50"), [
        ({"trades": [trade(2, "B", 5)], "quotes": [quote("B", 90, 4), quote("B", 10, 2)]}, [[2, "B", 10]]),
    ]),
    {**case("updates-of-a-keyed-output-are-written-as-update-pairs", LEFT, [], config={"output_unique_key": ["id"]}),
     "runs": [{"changes": {"trades": [trade(1, "A", 5)], "quotes": [quote("A", 100, 2)]}},
              {"changes": {"quotes": [quote("A", 101, 3)]},
               "expect_changelog": [["-U", [1, "A", 100]], ["+U", [1, "A", 101]]]}]},
]


def test_scenarios(spark):
    cases_pass(spark, SCENARIOS, CASES)


def test_update_pairs_carry_the_row_kinds(spark):
    outcome = run_case(spark, SCENARIOS[-1])
    kinds = sorted(k for k, _ in outcome["runs"][1]["changelog"])
    assert kinds == ["+U", "-U"], outcome["runs"][1]


def test_a_match_condition_over_a_time_and_a_string_fails_the_run_naming_both_and_the_fix(spark):
    """Spark would compare them after a cast, but one ordering of both cannot follow that comparison."""
    quotes = {"columns": [["sym", "string"], ["px", "int"], ["ts", "string"]]}
    outcome = run_case(spark, {"name": "asof-string-time", "sql": LEFT, "inputs": {"trades": TRADES, "quotes": quotes},
                               "runs": [{"changes": {"trades": [trade(1, "A", 5)], "quotes": [["+I", ["A", 1, t(2)]]]},
                                         "expect_error": "MATCH_CONDITION compares t.ts (timestamp) with q.ts "
                                                         "(string); cast one side so that both are timestamps, "
                                                         "dates or numbers"}]})
    assert_ok(outcome)



def test_state_an_earlier_streamjoin_kept_in_one_table_fails_the_run_asking_for_one_rebuild(spark, tmp_path):
    """Earlier builds appended an ASOF join's state to a table read whole every run (a `_run` column per row)."""
    case = {"name": "asof-old-state", "sql": LEFT, "inputs": {"trades": TRADES, "quotes": QUOTES}, "runs": []}
    runner = CaseRunner(spark, case, str(tmp_path))
    old = pa.table({"t__id": pa.array([1], pa.int32()), "t__sym": ["A"], "t__ts": pa.array([0], pa.timestamp("us")),
                    "_run": [1], "_weight": [1]})
    write_deltalake(runner.tables.state("j1_left"), old)
    runner.append_changes(0, {"trades": [trade(2, "A", 5)]})
    with pytest.raises(InputError, match=r"model 'asof-old-state': the ASOF join j1's state was written by an earlier "
                                         r"streamjoin.*dbt run --full-refresh --select asof-old-state"):
        run_once(spark, runner.plan, runner.tables)
    assert not DeltaTable.is_deltatable(runner.tables.result), "the failed run committed nothing"


def test_a_run_recomputes_only_the_rows_its_changes_can_reach(spark, tmp_path):
    """A key's history before a run's earliest change keeps its matches: the run log counts the stored
    rows the run recomputes (distinct rows), and the result still follows the rule."""
    m = Scenario(spark, tmp_path, LEFT, trades=TRADES["columns"], quotes=QUOTES["columns"])
    history = {"trades": [insert(i, "A", t(2 * i + 1)) for i in range(10)],
               "quotes": [insert("A", i, t(2 * i)) for i in range(10)] + [insert("B", 0, t(0))]}
    m.run(**history)
    m.run(trades=[insert(10, "A", t(30))], quotes=[insert("A", 10, t(25))])
    reached = m.report.metrics["j1"]
    # left: no stored trade at or after 0:25; right: the last quote before it (0:18), to be the new trade's
    # match were 0:25 not there; key B is untouched
    assert (reached["touched_keys"], reached["reached_left_rows"], reached["reached_right_rows"]) == (1, 0, 1), reached
    m.run(quotes=[insert("A", 99, t(9))])  # an early quote: trades from 0:09 on and quotes from 0:08 on
    reached = m.report.metrics["j1"]
    assert (reached["reached_left_rows"], reached["reached_right_rows"]) == (7, 7), reached
    snapshot = {"trades": [r for _, r in history["trades"]] + [[10, "A", t(30)]],
                "quotes": [r for _, r in history["quotes"]] + [["A", 10, t(25)], ["A", 99, t(9)]]}
    assert sorted(m.result.elements(), key=repr) == asof_rule(snapshot["trades"], snapshot["quotes"], ">=", True)


# -- compile time ----------------------------------------------------------------------------------
def _specs() -> dict[str, InputSpec]:
    return input_specs({"trades": TRADES, "quotes": QUOTES})


def test_explain_names_the_asof_join():
    text = compile_sql("m", LEFT, _specs()).explain()
    assert "left asof join j1 ON `t__sym` = `q__sym` MATCH_CONDITION(`t__ts` >= `q__ts`)" in text


@pytest.mark.parametrize("sql, config, message", [
    (LEFT.replace("LEFT ASOF", "RIGHT ASOF").replace("RIGHT ASOF JOIN", "ASOF RIGHT JOIN"), {},
     "RIGHT ASOF JOIN is not supported"),
    (LEFT.replace("t.sym = q.sym", "t.id > 0"), {}, "no equality between the two sides"),
    (LEFT.replace("ON t.sym = q.sym", "ON t.sym = q.sym AND t.id < q.px"), {}, "ON may hold only the key equalities"),
    (LEFT.replace("MATCH_CONDITION(t.ts >= q.ts) ", ""), {}, "needs exactly one match condition"),
    (LEFT.replace("t.ts >= q.ts", "t.ts = q.ts"), {}, "MATCH_CONDITION must compare a time of the left input"),
    (LEFT, {"join_strategy": "multi"}, "join_strategy 'multi' cannot include an ASOF join"),
])
def test_unsupported_variants_fail_at_compile_time(sql, config, message):
    error = compile_error("asof_model", sql, {"trades": TRADES, "quotes": QUOTES}, config)
    assert message in error and "model 'asof_model'" in error


# -- property: the rule over the snapshots, computed in Python -------------------------------------
@st.composite
def changelogs(draw) -> list[dict]:
    """Runs of trades and quotes (inserts, duplicates, NULL keys, ties, updates as -U/+U, deletes) at
    random run boundaries."""
    live: dict[str, list[list]] = {"trades": [], "quotes": []}
    runs = []
    for _ in range(draw(st.integers(2, 4))):
        changes: dict[str, list] = {}
        for name in ("trades", "quotes"):
            for _ in range(draw(st.integers(0, 4))):
                rows = live[name]
                if rows and draw(st.integers(0, 2)) == 0:
                    old = rows.pop(draw(st.integers(0, len(rows) - 1)))
                    if draw(st.booleans()):
                        changes.setdefault(name, []).append(["-D", old])
                        continue
                    new = [old[0], old[1], t(draw(st.integers(0, 9)))] if name == "trades" else \
                        [old[0], draw(st.integers(0, 3)), old[2]]
                    rows.append(new)
                    changes.setdefault(name, []).extend([["-U", old], ["+U", new]])
                    continue
                sym = draw(st.sampled_from(["A", "B", None]))
                new = [draw(st.integers(1, 3)), sym, t(draw(st.integers(0, 9)))] if name == "trades" else \
                    [sym, draw(st.integers(0, 3)), t(draw(st.integers(0, 9)))]
                rows.append(new)
                changes.setdefault(name, []).append(["+I", new])
        runs.append({"changes": changes})
    return runs


def asof_rule(trades: list[list], quotes: list[list], op: str, left: bool) -> list[tuple]:
    """Each trade with the quote of its symbol nearest in time that satisfies `trade.ts op quote.ts`;
    ties to the smallest quote (NULLs first)."""
    holds = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}[op]
    out = []
    for i, sym, ts in trades:
        found = [q for q in quotes if sym is not None and q[0] == sym and holds(ts, q[2])]
        smallest = lambda q: tuple((v is not None, v) for v in q)  # noqa: E731
        if found:
            best = min(found, key=lambda q: ((-1 if op.startswith(">") else 1) * int(q[2][-2:]), smallest(q)))
            out.append((i, sym, best[1]))
        elif left:
            out.append((i, sym, None))
    return sorted(out, key=repr)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=changelogs(), op=st.sampled_from([">=", ">", "<=", "<"]), left=st.booleans(), folding=st.booleans())
def test_results_follow_the_rule_over_the_snapshots(spark, runs, op, left, folding):
    sql = LEFT.replace(">=", op).replace("LEFT ASOF", "LEFT ASOF" if left else "ASOF")
    # folding: every run folds state into files per bucket, so later runs read the touched keys' rows from them
    with compacting_at(1, 1, level0_rows=1) if folding else nullcontext():
        outcome = run_case(spark, {"name": "asof-property", "sql": sql, "runs": runs,
                                   "inputs": {"trades": TRADES, "quotes": QUOTES}})
    assert_ok(outcome)
    now: dict[str, list[list]] = {"trades": [], "quotes": []}
    for i, (run, got) in enumerate(zip(runs, outcome["runs"])):
        for name, changes in run["changes"].items():
            for kind, row in changes:
                now[name].append(row) if kind in ("+I", "+U") else now[name].remove(row)
        want = asof_rule(now["trades"], now["quotes"], op, left)
        assert sorted((tuple(r) for r in got["result"]), key=repr) == want, \
            f"run {i} ({sql}): {got['result']} != {want}\nruns: {json.dumps(runs)}"
