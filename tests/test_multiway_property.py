"""Property: on random 3- and 4-way INNER/LEFT joins on one key, the multi-way and the binary strategy
produce the same changelog every run, and both results equal the batch query over the inputs' rows."""
from __future__ import annotations

import json
from collections import Counter

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from streamjoin.conformance import run_case

IDS = st.sampled_from([1, 2, 3, None])
VALUES = st.integers(0, 2)


def draw_query(data: st.DataObject) -> tuple[int, str]:
    n = data.draw(st.integers(3, 4), label="inputs")
    select = ", ".join(f"t{i}.id AS id{i}, t{i}.v AS v{i}" for i in range(n))
    sql = f"SELECT {select} FROM mw_t0 t0"
    for i in range(1, n):
        kinds = ["JOIN", "LEFT JOIN"] + (["RIGHT JOIN"] if i == 1 else [])
        kind = data.draw(st.sampled_from(kinds), label=f"join {i}")
        to = data.draw(st.integers(0, i - 1), label=f"join {i} links to")
        extra = data.draw(st.sampled_from(["", f" AND t{i}.v <> t{to}.v"]), label=f"join {i} residual")
        sql += f" {kind} mw_t{i} t{i} ON t{i}.id = t{to}.id{extra}"
    return n, sql


def draw_changes(data: st.DataObject, live: Counter, name: str) -> list:
    """A few changes of one input: inserts (duplicates and NULL keys included), deletes and updates
    of live rows; `live` follows them."""
    out = []
    for _ in range(data.draw(st.integers(0, 4), label=f"{name} changes")):
        alive = list(live.elements())
        kind = data.draw(st.sampled_from(["+I", "-D", "-U"]) if alive else st.just("+I"))
        if kind == "+I":
            row = (data.draw(IDS), data.draw(VALUES))
            out.append(["+I", list(row)])
            live[row] += 1
            continue
        old = data.draw(st.sampled_from(alive))
        live[old] -= 1
        out.append([kind, list(old)])
        if kind == "-U":
            new = (data.draw(st.sampled_from([old[0], data.draw(IDS)])), data.draw(VALUES))
            out.append(["+U", list(new)])
            live[new] += 1
    return out


def batch(spark, sql: str, live: dict[str, Counter]) -> Counter:
    for name, rows in live.items():
        spark.createDataFrame(list(rows.elements()), "id int, v int").createOrReplaceTempView(name)
    return Counter(tuple(r) for r in spark.sql(sql).collect())


def signed(changelog: list) -> Counter:
    out: Counter = Counter()
    for kind, row in changelog:
        out[tuple(row)] += 1 if kind.startswith("+") else -1
    return Counter({k: v for k, v in out.items() if v})


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_multi_and_binary_agree_with_each_other_and_with_batch(spark, data):
    n, sql = draw_query(data)
    names = [f"mw_t{i}" for i in range(n)]
    live = {name: Counter() for name in names}
    runs, snapshots = [], []
    for _ in range(2):
        runs.append({"changes": {name: draw_changes(data, live[name], name) for name in names}})
        snapshots.append({name: Counter(rows) for name, rows in live.items()})
    case = {"name": "multiway-property", "sql": sql, "runs": runs,
            "inputs": {name: {"columns": [["id", "int"], ["v", "int"]]} for name in names}}
    note(json.dumps(case))
    outcomes = {s: run_case(spark, {**case, "config": {"join_strategy": s}}) for s in ("binary", "multi")}
    for s, outcome in outcomes.items():
        assert outcome["ok"], f"{s}: {outcome['error']}"
    for i, snapshot in enumerate(snapshots):
        binary, multi = outcomes["binary"]["runs"][i], outcomes["multi"]["runs"][i]
        assert signed(multi["changelog"]) == signed(binary["changelog"]), f"run {i}"
        expected = batch(spark, sql, snapshot)
        assert Counter(map(tuple, multi["result"])) == expected, f"run {i}: multi"
        assert Counter(map(tuple, binary["result"])) == expected, f"run {i}: binary"
