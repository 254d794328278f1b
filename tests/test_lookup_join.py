"""Lookup joins run by run: Flink's processing-time temporal join (FORMAT.md, "Timing of temporal and
window joins").

Each probe row joins the dimension's rows as they are after the run that brings it (that run's
changes included), and is never updated later; LEFT JOIN pads a probe row nothing matches. The
probe input declares `proc_time`, a column whose value is the run's time. Scenarios are conformance
cases run through the real pipeline; a property test checks random dimension changelogs and probe
rows against the rule computed in Python. Flink itself is the oracle in test_lookup_flink_agreement.py,
through a lookup connector of the Flink oracle's own (tests/flink_oracle/lookup_connector/: PyFlink
ships none, and Flink joins by processing time only against a table that serves lookups).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario import assert_ok, cases_pass, compile_error, input_specs
from streamjoin.conformance import CaseRunner, run_case
from streamjoin.runtime.run import run_once
from streamjoin.errors import ConfigError
from streamjoin.explain import describe
from streamjoin.spec import InputSpec
from streamjoin.sql.compiler import compile_sql

CASES = sorted((Path(__file__).parent / "cases").glob("lookup-*.json"))
ORDERS = {"columns": [["id", "int"], ["cust", "int"]], "proc_time": "pt", "changelog_format": "append"}
CUSTOMERS = {"columns": [["id", "int"], ["name", "string"]]}
LEFT = "SELECT o.id, c.name FROM orders o LEFT JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.id"
INNER = LEFT.replace("LEFT JOIN", "JOIN")


def case(name: str, sql: str, runs: list[tuple[dict, list]], **inputs: Any) -> dict:
    """Runs are (changes as {input: [changes]}, rows the run must emit)."""
    return {"name": name, "sql": sql, "inputs": {"orders": ORDERS, "customers": CUSTOMERS, **inputs},
            "runs": [{"changes": changes, "expect_changelog": [["+I", r] for r in emitted]} for changes, emitted in runs]}


def retracting(name: str, sql: str, runs: list[tuple[dict, list]], **inputs: Any) -> dict:
    """A case whose probe input is a changelog; runs are (changes, the signed rows the run must emit)."""
    return {"name": name, "sql": sql, "inputs": {"orders": {**ORDERS, "changelog_format": "changelog"},
                                                  "customers": CUSTOMERS, **inputs},
            "runs": [{"changes": changes, "expect_changelog": emitted} for changes, emitted in runs]}


def ins(*row: Any) -> list:
    return ["+I", list(row)]


SCENARIOS = [
    case("every-matching-dimension-row-joins-null-keys-never-match", INNER, [
        ({"customers": [ins(1, "a"), ins(1, "b"), ins(None, "n")], "orders": [ins(10, 1), ins(10, 1), ins(11, None)]},
         [[10, "a"], [10, "b"], [10, "a"], [10, "b"]]),
    ]),
    case("conditions-on-the-dimension-decide-the-match-and-later-changes-update-nothing",
         LEFT + " AND c.name <> 'x' WHERE o.id > 0", [
             ({"customers": [ins(1, "x"), ins(2, "y")], "orders": [ins(10, 1), ins(11, 2), ins(-1, 2)]},
              [[10, None], [11, "y"]]),
             ({"customers": [["-D", [2, "y"]], ins(1, "z")], "orders": [ins(12, 2), ins(13, 1)]},
              [[12, None], [13, "z"]]),
         ]),
    case("an-upsert-dimension-and-a-derived-probe", "SELECT o.id, o.twice, c.name FROM (SELECT id, cust, id * 2 AS "
         "twice, pt FROM orders) o JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.id", [
             ({"customers": [ins(1, "a"), ins(1, "b")], "orders": [ins(10, 1)]}, [[10, 20, "b"]]),
             ({"customers": [ins(1, "c")], "orders": [ins(11, 1)]}, [[11, 22, "c"]]),
         ], customers={**CUSTOMERS, "unique_key": ["id"], "changelog_format": "upsert"}),
    # as in Flink (which accepts this form), the lookup happens when the join emits the row: run 2's dimension
    case("after-a-join-a-row-looks-the-dimension-up-in-the-run-the-join-emits-it",
         "SELECT o.id, s.note, c.name FROM orders o JOIN notes s ON o.id = s.id "
         "JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.id", [
             ({"orders": [ins(10, 1), ins(11, 1)], "customers": [ins(1, "a")], "notes": [ins(11, "m")]}, [[11, "m", "a"]]),
             ({"customers": [["-D", [1, "a"]], ins(1, "b")]}, []),
             ({"notes": [ins(10, "n")]}, [[10, "n", "b"]]),
         ], notes={"columns": [["id", "int"], ["note", "string"]], "changelog_format": "append"}),
    # a probe side that retracts: a retraction retracts what its row's insertion emitted (Flink's TRY_RESOLVE)
    retracting("a-retraction-retracts-what-the-insertion-emitted-though-the-dimension-changed", INNER, [
        ({"customers": [ins(1, "a")], "orders": [ins(10, 1), ins(11, 1)]}, [["+I", [10, "a"]], ["+I", [11, "a"]]]),
        ({"customers": [["-D", [1, "a"]], ins(1, "b")], "orders": [["-D", [10, 1]], ins(12, 1)]},
         [["-D", [10, "a"]], ["+I", [12, "b"]]]),
        ({"orders": [["-U", [11, 1]], ["+U", [11, 2]], ["-D", [12, 1]]]}, [["-D", [11, "a"]], ["-D", [12, "b"]]]),
    ]),
    retracting("copies-of-a-row-are-retracted-latest-first-and-null-padded-rows-too", LEFT, [
        ({"customers": [ins(1, "a")], "orders": [ins(10, 1), ins(13, 5)]}, [["+I", [10, "a"]], ["+I", [13, None]]]),
        ({"customers": [["-D", [1, "a"]], ins(1, "b"), ins(5, "e")], "orders": [ins(10, 1), ins(10, 1)]},
         [["+I", [10, "b"]], ["+I", [10, "b"]]]),
        ({"orders": [["-D", [10, 1]], ["-D", [10, 1]], ["-D", [13, 5]]]},
         [["-D", [10, "b"]], ["-D", [10, "b"]], ["-D", [13, None]]]),
        ({"orders": [["-D", [10, 1]], ins(10, 1)]}, []),  # the retraction and the insertion cancel in the run
        ({"orders": [["-D", [10, 1]]]}, [["-D", [10, "a"]]]),
    ]),
    retracting("an-insertion-that-joined-nothing-is-retracted-with-nothing", INNER, [
        ({"orders": [ins(10, 1)]}, []),
        ({"customers": [ins(1, "a")], "orders": [["-D", [10, 1]], ins(10, 1)]}, []),
        ({"orders": [["-D", [10, 1]]]}, []),
        ({"orders": [ins(10, 1)]}, [["+I", [10, "a"]]]),
    ]),
    retracting("an-upsert-probe-updates-its-row-with-the-dimension-of-the-update-s-run", LEFT, [
        ({"customers": [ins(1, "a")], "orders": [ins(10, 1)]}, [["+I", [10, "a"]]]),
        ({"customers": [ins(2, "b"), ["-D", [1, "a"]]], "orders": [["+U", [10, 2]]]},
         [["-D", [10, "a"]], ["+I", [10, "b"]]]),
        ({"orders": [["+U", [10, 1]]]}, [["-D", [10, "b"]], ["+I", [10, None]]]),
    ], orders={**ORDERS, "changelog_format": "upsert", "unique_key": ["id"]}),
    {**retracting("a-retraction-of-a-row-never-inserted-fails-the-run", INNER, []),
     "runs": [{"changes": {"orders": [ins(10, 1)], "customers": [ins(1, "a")]}},
              {"changes": {"orders": [["-D", [10, 1]], ["-D", [10, 1]]]},
               "expect_error": 'retracts the probe row {"id":10,"cust":1} 2 time(s) while 1 insertion(s) of it are live'}]},
    {**retracting("with-on-missing-retraction-ignore-a-retraction-takes-the-live-insertions-only", LEFT, [
        ({"orders": [ins(10, 1)], "customers": [ins(1, "a")]}, [["+I", [10, "a"]]]),
        ({"orders": [["-D", [10, 1]], ["-D", [10, 1]], ["-D", [11, 1]]]}, [["-D", [10, "a"]]]),
        ({"orders": [ins(10, 1)]}, [["+I", [10, "a"]]]),
    ]), "config": {"on_missing_retraction": "ignore"}},
]


def test_scenarios(spark):
    cases_pass(spark, SCENARIOS, CASES)


def test_the_processing_time_column_holds_the_time_of_the_run(spark):
    sql = "SELECT o.id, o.pt FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.id"
    outcome = run_case(spark, case("proc-time", sql, [({"customers": [ins(1, "a")], "orders": [ins(10, 1)]}, [])]))
    [[_, [_, pt]]] = outcome["runs"][0]["changelog"]
    assert pt.startswith("20") and outcome["runs"][0]["result"] == [[10, pt]], outcome


# -- compile time ----------------------------------------------------------------------------------
def _specs() -> dict[str, InputSpec]:
    return input_specs({"orders": ORDERS, "customers": CUSTOMERS})


def test_explain_names_the_lookup_join():
    text = compile_sql("m", LEFT, _specs()).explain()
    assert "left lookup join j1 ON `o__cust` = `c__id` FOR SYSTEM_TIME AS OF o__pt (processing time" in text


def test_explain_shows_the_emitted_rows_only_for_a_probe_side_that_may_retract():
    appending = describe(compile_sql("m", LEFT, _specs()))
    retracting = describe(compile_sql("m", LEFT, {**_specs(), "orders": InputSpec.from_dict(
        "orders", {**ORDERS, "changelog_format": "changelog"})}))
    assert "state j1_emitted" not in appending and "lookup operator" in appending
    assert "state j1_emitted: orders AS o: per probe row and run, the rows its insertions emitted" in retracting
    assert "orders: changelog_format changelog; inserts, updates and deletes" in retracting
    assert "j1: every live row stays (set state_ttl to bound it" in retracting
    assert "j1: keeps no state" in appending


@pytest.mark.parametrize("sql, config, message", [
    (LEFT.replace("LEFT JOIN", "RIGHT JOIN"), {}, "a RIGHT lookup join is not supported"),
    (LEFT.replace("AS OF o.pt", "AS OF o.id"), {}, "the probe input 'orders' declares no event_time"),
    (LEFT.replace("o.cust = c.id", "o.cust > c.id"), {}, "no equality between the probe and the dimension"),
    (LEFT, {"join_strategy": "multi"}, "join_strategy 'multi' cannot include a lookup join"),
])
def test_unsupported_variants_fail_at_compile_time(sql, config, message):
    error = compile_error("lookup_model", sql, {"orders": ORDERS, "customers": CUSTOMERS}, config)
    assert message in error and "model 'lookup_model'" in error


def test_proc_time_must_not_name_a_column_the_input_holds():
    with pytest.raises(ConfigError, match="proc_time 'cust' names a column the input holds"):
        InputSpec.from_dict("orders", {**ORDERS, "proc_time": "cust"})


# -- property: the rule, computed in Python ---------------------------------------------------------
@st.composite
def changelogs(draw, retracting: bool = False) -> list[dict]:
    """Runs of dimension changes (inserts, duplicates, NULL keys, updates as -U/+U, deletes) and probe
    rows, at random run boundaries; with `retracting`, probe rows are also deleted and updated (-U/+U),
    some of them duplicates inserted in other runs."""
    live: list[list] = []
    probes_live: list[list] = []
    runs = []
    least = 2 if retracting else 0  # changes of each input per run
    for _ in range(draw(st.integers(2 + least // 2, 4 + least // 2))):
        changes: dict[str, list] = {}
        for _ in range(draw(st.integers(least, 4))):
            if live and draw(st.booleans()):
                old = live.pop(draw(st.integers(0, len(live) - 1)))
                if draw(st.booleans()):
                    changes.setdefault("customers", []).append(["-D", old])
                else:
                    new = [old[0], draw(st.sampled_from("abc"))]
                    live.append(new)
                    changes.setdefault("customers", []).extend([["-U", old], ["+U", new]])
            else:
                new = [draw(st.sampled_from([1, 2, None])), draw(st.sampled_from("abc"))]
                live.append(new)
                changes.setdefault("customers", []).append(["+I", new])
        for _ in range(draw(st.integers(least, 4 + least))):
            if retracting and probes_live and draw(st.booleans()):
                old = probes_live.pop(draw(st.integers(0, len(probes_live) - 1)))
                if draw(st.booleans()):
                    changes.setdefault("orders", []).append(["-D", old])
                else:
                    new = [old[0], draw(st.sampled_from([1, 2, 3, None]))]
                    probes_live.append(new)
                    changes.setdefault("orders", []).extend([["-U", old], ["+U", new]])
            elif retracting and probes_live and draw(st.booleans()):  # a copy of a live row
                new = list(draw(st.sampled_from(probes_live)))
                probes_live.append(new)
                changes.setdefault("orders", []).append(ins(*new))
            else:
                new = [draw(st.integers(0, 3)), draw(st.sampled_from([1, 2, 3, None]))]
                probes_live.append(new)
                changes.setdefault("orders", []).append(ins(*new))
        runs.append({"changes": changes})
    return runs


def expected_changelogs(runs: list[dict], left: bool) -> list[Counter]:
    """Per run, the signed rows the rule emits: a probe row's insertions join the dimension as the run
    leaves it; its retractions retract what its latest live insertions emitted (a run's changes of a
    row count by their sum)."""
    dimension: list[list] = []
    emitted: dict[tuple, list[list[tuple]]] = {}  # probe row -> what each live insertion emitted, oldest first
    out = []
    for run in runs:
        for kind, row in run["changes"].get("customers", []):
            if kind in ("+I", "+U"):
                dimension.append(row)
            else:
                dimension.remove(row)
        net: Counter = Counter()
        for kind, row in run["changes"].get("orders", []):
            net[tuple(row)] += 1 if kind in ("+I", "+U") else -1
        change: Counter = Counter()
        for (oid, cust), n in net.items():
            names = [name for key, name in dimension if cust is not None and key == cust and name != "c"]
            rows = [(oid, name) for name in names] or ([(oid, None)] if left else [])
            stack = emitted.setdefault((oid, cust), [])
            for _ in range(n):
                stack.append(rows)
                change.update(rows)
            for _ in range(-n):
                change.subtract(stack.pop())
        out.append(Counter({r: c for r, c in change.items() if c}))
    return out


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=changelogs(), left=st.booleans())
def test_each_probe_row_joins_the_dimension_as_its_run_leaves_it(spark, runs, left):
    check_property(spark, runs, left, ORDERS)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=changelogs(retracting=True), left=st.booleans())
def test_a_retraction_retracts_what_the_latest_insertion_of_its_row_emitted(spark, runs, left):
    check_property(spark, runs, left, {**ORDERS, "changelog_format": "changelog"})


def check_property(spark, runs: list[dict], left: bool, orders: dict) -> None:
    sql = (LEFT if left else INNER) + " AND c.name <> 'c'"
    outcome = run_case(spark, {"name": "lookup-property", "sql": sql, "runs": runs,
                               "inputs": {"orders": orders, "customers": CUSTOMERS}})
    assert_ok(outcome)
    for i, (expected, got) in enumerate(zip(expected_changelogs(runs, left), outcome["runs"])):
        emitted: Counter = Counter()
        for kind, row in got["changelog"]:
            emitted[tuple(row)] += 1 if kind in ("+I", "+U") else -1
        assert Counter({r: c for r, c in emitted.items() if c}) == expected, \
            f"run {i}: {emitted} != {expected}\nruns: {json.dumps(runs)}"
        if orders.get("changelog_format") == "append":
            assert all(k == "+I" for k, _ in got["changelog"]), got["changelog"]


def test_a_run_consolidates_only_the_dimension_rows_of_the_keys_its_probes_look_up(spark, tmp_path):
    """The dimension holds 200 customers (with updates and deletes); a run whose probes look up two of
    them reads those keys' rows only (the run log's `dimension_rows_read`), and joins them right."""
    customers = [ins(i % 100, f"c{i}") for i in range(200)] + [["-D", [5, "c5"]], ["-U", [7, "c7"]], ["+U", [7, "z"]]]
    runner = CaseRunner(spark, {"name": "lookup-touched", "sql": LEFT, "runs": [],
                                "inputs": {"orders": ORDERS, "customers": CUSTOMERS}}, str(tmp_path))
    runner.append_changes(0, {"customers": customers, "orders": [ins(1, 5), ins(2, 7), ins(3, 7), ins(4, None)]})
    first = run_once(spark, runner.plan, runner.tables)
    # key 5: c105 (c5 deleted); key 7: c107 and z; a NULL key looks nothing up
    assert first.metrics["j1"]["dimension_rows_read"] == 3
    assert sorted(runner.result(), key=repr) == sorted(
        [(1, "c105"), (2, "c107"), (2, "z"), (3, "c107"), (3, "z"), (4, None)], key=repr)
    runner.append_changes(1, {"orders": [ins(5, 99)]})
    assert run_once(spark, runner.plan, runner.tables).metrics["j1"]["dimension_rows_read"] == 2


def test_a_retraction_reads_the_emitted_rows_of_its_own_row_only(spark, tmp_path):
    """Of the rows 300 insertions emitted, a run retracting two probe rows reads those rows' state
    only (their markers and joined rows: the run log's `emitted_rows_read`)."""
    orders = {**ORDERS, "changelog_format": "changelog"}
    runner = CaseRunner(spark, {"name": "lookup-emitted", "sql": LEFT, "runs": [],
                                "inputs": {"orders": orders, "customers": CUSTOMERS}}, str(tmp_path))
    runner.append_changes(0, {"customers": [ins(1, "a"), ins(1, "b")], "orders": [ins(i, i % 3) for i in range(300)]})
    run_once(spark, runner.plan, runner.tables)
    runner.append_changes(1, {"orders": [["-D", [1, 1]], ["-D", [2, 2]]]})
    second = run_once(spark, runner.plan, runner.tables)
    # order 1 joined customer 1 twice (a, b): a marker and 2 rows; order 2 was padded: a marker and 1 row
    assert second.metrics["j1"]["emitted_rows_read"] == 5 and second.metrics["j1"]["probes_retracted"] == 2
    assert len(runner.result()) == 300 + 100 - 3



def test_a_probe_input_declared_a_changelog_later_has_its_model_rebuilt_with_the_rows_retractions_need(spark, tmp_path):
    """An `append` probe side keeps no emitted rows. Declared a changelog later, the join keeps them
    (the plan's outline says so), so the state no longer fits: the run rebuilds the model, and the
    retraction it reads takes what its insertion emitted instead of failing the run for a missing insertion."""
    from dataclasses import replace

    case = {"name": "lookup-redeclared", "sql": LEFT, "runs": [],
            "inputs": {"orders": {**ORDERS, "changelog_format": "changelog"}, "customers": CUSTOMERS}}
    runner = CaseRunner(spark, case, str(tmp_path))
    appending = compile_sql(runner.name, LEFT, {**runner.specs,
                                                "orders": replace(runner.specs["orders"], changelog_format="append")})
    assert "keeping the rows it emitted" in runner.plan.explain() and "keeping" not in appending.explain()
    runner.append_changes(0, {"customers": [ins(1, "a")], "orders": [ins(1, 1), ins(2, 1), ins(3, 2)]})
    run_once(spark, appending, runner.tables)
    runner.append_changes(1, {"orders": [["-D", [1, 1]], ["-D", [3, 2]]]})
    report = run_once(spark, runner.plan, runner.tables)
    assert report.status == "committed" and runner.result() == [(2, "a")]

# -- through the API dbt calls, with the views it publishes ------------------------------------------
def test_lookup_and_window_models_run_through_the_api_and_publish_their_views(spark, tmp_path):
    """The entry point generated model code calls, with relation names as dbt renders them: a lookup join
    against an upsert dimension (sequence column and delete flag), and a window self-join of the probe
    input; each publishes its result and a `__batch` view Spark can read."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from streamjoin.api import run_model

    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    write_deltalake(orders, pa.table({"id": [1, 2, 3], "cust": [10, 20, 10],
                                      "ts": pa.array([1_000_000, 2_000_000, 7_000_000], pa.timestamp("us", "UTC"))}))
    write_deltalake(customers, pa.table({"cid": [10, 10, 20], "name": ["new", "old", "gone"], "seq": [2, 1, 1],
                                         "deleted": [False, False, True]}))
    declared = {"relation": "shop.orders", "location": orders, "changelog_format": "append", "event_time": "ts"}
    inputs = {"orders": {**declared, "proc_time": "pt"},
              "customers": {"relation": "shop.customers", "location": customers, "changelog_format": "upsert",
                            "unique_key": ["cid"], "delete_column": "deleted", "sequence_column": "seq"}}
    spark.sql("CREATE DATABASE IF NOT EXISTS shop")
    root = str(tmp_path / "models")
    run_model(spark, name="lk", sql="SELECT o.id, c.name, o.pt FROM shop.orders o LEFT JOIN shop.customers FOR "
              "SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.cid", inputs=inputs, config={}, root=root, relation="shop.lk")
    assert Counter((r.id, r.name) for r in spark.sql("SELECT * FROM shop.lk").collect()) == \
        Counter({(1, "new"): 1, (2, None): 1, (3, "new"): 1})
    result = Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lk").collect())
    assert Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lk__batch").collect()) == result  # pt included
    write_deltalake(customers, pa.table({"cid": [20], "name": ["back"], "seq": [2], "deleted": [False]}), mode="append")
    write_deltalake(orders, pa.table({"id": [4], "cust": [20], "ts": pa.array([8_000_000], pa.timestamp("us", "UTC"))}),
                    mode="append")
    run_model(spark, name="lk", sql="SELECT o.id, c.name, o.pt FROM shop.orders o LEFT JOIN shop.customers FOR "
              "SYSTEM_TIME AS OF o.pt AS c ON o.cust = c.cid", inputs=inputs, config={}, root=root, relation="shop.lk")
    result = Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lk").collect())
    # order 2 keeps the NULL its run found; order 4 finds customer 20 as the second run left it
    assert Counter((i, n) for i, n, _ in result.elements()) == Counter({(1, "new"): 1, (2, None): 1, (3, "new"): 1,
                                                                         (4, "back"): 1})
    assert Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lk__batch").collect()) == result

    window = "TABLE(TUMBLE(TABLE shop.orders, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
    sql = (f"SELECT L.id, R.id AS rid, L.window_end FROM {window} L JOIN {window} R "
           "ON L.cust = R.cust AND L.window_start = R.window_start AND L.window_end = R.window_end")
    run_model(spark, name="wj", sql=sql, inputs={"orders": declared}, config={}, root=root, relation="shop.wj")
    fired = Counter((r.id, r.rid) for r in spark.sql("SELECT * FROM shop.wj").collect())  # W = 7 s: [0, 5) fired
    batch = Counter((r.id, r.rid) for r in spark.sql("SELECT * FROM shop.wj__batch").collect())
    assert fired == Counter({(1, 1): 1, (2, 2): 1}) and batch == fired  # the batch keeps the fired windows too


@pytest.mark.parametrize("fmt", ["changelog", "upsert"])
def test_with_a_retracting_probe_the_batch_view_gives_the_rows_the_runs_kept(spark, tmp_path, fmt):
    """A probe input that updates and deletes its rows (copies of a row inserted in different runs
    among them): after every run the `__batch` view holds what the model's result holds, each live
    row with the time and the dimension of the run that read its latest live insertion."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from streamjoin.api import run_model

    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    upsert = fmt == "upsert"
    probe_runs = [  # (id, cust, row kind); an upsert input's row replaces its id's and `deleted` deletes it
        [(1, 10, "+I"), (2, 10, "+I"), (3, 20, "+I")],
        [(1, 10, "-D"), (4, 10, "+I")] + ([(2, 20, "+U")] if upsert else [(2, 10, "+I"), (3, 20, "-D")]),
        [(2, 10, "-D"), (3, 10, "+U"), (5, 20, "+I")] if upsert else [(2, 10, "-D"), (5, 20, "+I")],
        [(1, 10, "+I"), (4, 10, "+I")] if upsert else [(1, 10, "+I"), (4, 10, "-D"), (4, 11, "+I")],
    ]
    names = [["a"], ["b"], ["c"], ["d"]]
    spark.sql("CREATE DATABASE IF NOT EXISTS shop")
    declared = ({"changelog_format": "upsert", "unique_key": ["id"], "delete_column": "deleted"} if upsert else
                {"changelog_format": "changelog"})
    inputs = {"orders": {"relation": "shop.orders", "location": orders, "proc_time": "pt", **declared},
              "customers": {"relation": "shop.customers", "location": customers, "changelog_format": "upsert",
                            "unique_key": ["cid"]}}
    sql = ("SELECT o.id, o.cust, c.name, o.pt FROM shop.orders o LEFT JOIN shop.customers FOR SYSTEM_TIME AS OF o.pt "
           "AS c ON o.cust = c.cid")
    for changes, (name,) in zip(probe_runs, names):
        rows = {"id": [r[0] for r in changes], "cust": [r[1] for r in changes]}
        if upsert:
            rows["deleted"] = [r[2] == "-D" for r in changes]
        else:
            rows["_row_kind"] = [r[2] for r in changes]
        write_deltalake(orders, pa.table(rows), mode="append")
        write_deltalake(customers, pa.table({"cid": [10, 20], "name": [name, name + name]}), mode="append")
        run_model(spark, name="lkc", sql=sql, inputs=inputs, config={}, root=str(tmp_path / "models"),
                  relation="shop.lkc")
        result = Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkc").collect())
        assert Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkc__batch").collect()) == result
    # the rows each live insertion joined: its run's customer name
    expected = ({(3, 10, "c"), (5, 20, "cc"), (1, 10, "d"), (4, 10, "b")} if upsert else
                {(2, 10, "a"), (5, 20, "cc"), (1, 10, "d"), (4, 11, None)})
    assert Counter((i, c, n) for i, c, n, _ in result.elements()) == Counter(expected)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=changelogs(retracting=True))
def test_with_random_probe_retractions_the_batch_view_holds_the_result(spark, tmp_path_factory, runs):
    """Random changelogs of both inputs, run through the API: after every run the `__batch` view
    (the live probe rows paired with their latest live insertion's run, in SQL) holds the result."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from streamjoin.api import run_model

    folder = tmp_path_factory.mktemp("lookup-batch")
    locations = {name: str(folder / name) for name in ("orders", "customers")}
    inputs = {name: {"relation": f"shop.{name}", "location": locations[name]} for name in locations}
    inputs["orders"].update(proc_time="pt")
    spark.sql("CREATE DATABASE IF NOT EXISTS shop")
    sql = ("SELECT o.id, o.cust, c.name, o.pt FROM shop.orders o LEFT JOIN shop.customers FOR SYSTEM_TIME AS OF o.pt "
           "AS c ON o.cust = c.id AND c.name <> 'c'")
    for name, first in (("orders", ("id", "cust")), ("customers", ("id", "name"))):
        types = [pa.int32(), pa.int32() if name == "orders" else pa.string()]
        write_deltalake(locations[name], pa.table({first[0]: pa.array([], types[0]), first[1]: pa.array([], types[1]),
                                                   "_row_kind": pa.array([], pa.string())}))
    for run in runs:
        for name, columns in (("orders", ("id", "cust")), ("customers", ("id", "name"))):
            changes = run["changes"].get(name, [])
            if changes:
                table = pa.table({columns[0]: pa.array([r[0] for _, r in changes], pa.int32()),
                                  columns[1]: pa.array([r[1] for _, r in changes],
                                                       pa.int32() if name == "orders" else pa.string()),
                                  "_row_kind": [k for k, _ in changes]})
                write_deltalake(locations[name], table, mode="append")
        run_model(spark, name="lkp", sql=sql, inputs=inputs, config={}, root=str(folder / "models"),
                  relation="shop.lkp")
        result = Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkp").collect())
        batch = Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkp__batch").collect())
        assert batch == result, f"{batch} != {result}\nruns: {json.dumps(runs)}"


def test_a_rebuilt_lookup_model_s_batch_view_gives_its_rows_the_times_of_the_rebuild_s_runs(spark, tmp_path):
    """The rebuild reads every probe row again at its own runs' times, against the dimension as those
    runs read it; after the swap the `__batch` view does the same (it did not: it kept the times of
    the model's runs before the swap, and the dimension as they read it)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from streamjoin.api import run_model

    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    write_deltalake(orders, pa.table({"id": [1], "cust": [10]}))
    write_deltalake(customers, pa.table({"cid": [10], "name": ["first"]}))
    inputs = {"orders": {"relation": "shop.orders", "location": orders, "changelog_format": "append", "proc_time": "pt"},
              "customers": {"relation": "shop.customers", "location": customers, "changelog_format": "upsert",
                            "unique_key": ["cid"]}}
    spark.sql("CREATE DATABASE IF NOT EXISTS shop")
    root = str(tmp_path / "models")

    def run(sql: str) -> tuple[Counter, Counter]:
        run_model(spark, name="lkr", sql=sql, inputs=inputs, config={}, root=root, relation="shop.lkr")
        return (Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkr").collect()),
                Counter(tuple(r) for r in spark.sql("SELECT * FROM shop.lkr__batch").collect()))

    left = "SELECT o.id, c.name, o.pt FROM shop.orders o LEFT JOIN shop.customers FOR SYSTEM_TIME AS OF o.pt AS c " \
           "ON o.cust = c.cid"
    result, batch = run(left)
    assert [n for _, n, _ in result] == ["first"] and batch == result
    write_deltalake(customers, pa.table({"cid": [10], "name": ["second"]}), mode="append")
    write_deltalake(orders, pa.table({"id": [2], "cust": [10]}), mode="append")
    result, batch = run(left)
    assert sorted(n for _, n, _ in result) == ["first", "second"] and batch == result
    inner = left.replace("LEFT JOIN", "JOIN")  # the last join changed: rebuilt side by side, then swapped in
    result, batch = run(inner)
    assert sorted(n for _, n, _ in result) == ["second", "second"]  # the rebuild read both orders in one run
    assert batch == result
    write_deltalake(orders, pa.table({"id": [3], "cust": [10]}), mode="append")
    result, batch = run(inner)
    assert len(result) == 3 and batch == result


@pytest.mark.parametrize("fmt", ["changelog", "append", "upsert", "cdf", "debezium"])
def test_the_dimension_s_files_hand_spark_only_the_looked_up_keys_rows(spark, tmp_path, fmt):
    """What a lookup asks of the dimension's files (`formats.read_changes` with wanted keys): the looked-up
    keys' rows and those with a NULL key, filtered as the files are read; a Debezium input's keys are
    inside its row images, so it is read whole."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from streamjoin.storage import formats
    from streamjoin.storage.file_reads import WantedKeys

    keys = [*range(40), None]
    rows: dict[str, Any] = {"id": pa.array(keys, pa.int32()), "name": [f"c{k}" for k in keys]}
    declared: dict[str, Any] = {"columns": CUSTOMERS["columns"], "location": str(tmp_path / "dim"), "changelog_format": fmt}
    if fmt == "changelog":
        rows["_row_kind"] = ["+I"] * len(keys)
    if fmt == "upsert":
        declared["unique_key"] = ["id"]
    if fmt == "debezium":
        image = pa.StructArray.from_arrays([rows["id"], pa.array(rows["name"])], ["id", "name"])
        rows = {"before": pa.nulls(len(keys), image.type), "after": image, "op": ["c"] * len(keys)}
    write_deltalake(declared["location"], pa.table(rows),
                    configuration={"delta.enableChangeDataFeed": "true"} if fmt == "cdf" else None)
    spec = InputSpec.from_dict("customers", declared)
    wanted = spark.createDataFrame([(3,), (7,), (99,)], "k bigint")
    read = formats.read_changes(spark, spec, None, 0, WantedKeys(wanted, (("k", "id"),))).rows
    found = sorted((r["id"] for r in read.collect()), key=repr)
    assert found == (sorted(keys, key=repr) if fmt == "debezium" else [3, 7, None])
