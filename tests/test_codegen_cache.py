"""Runs of one model reuse the Java classes Spark generated for the runs before (session.DEFAULTS keeps
enough of them, and `run_values` keeps each run's own values out of their code): a run compiles its
plans once, not every run again."""
from __future__ import annotations

import pytest

from scenario import Scenario, delete, insert

from streamjoin.conformance import CaseRunner
from streamjoin.runtime import sizing
from streamjoin.runtime.run import run_once

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}


def compilations(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def cache_capacity(spark) -> int:
    """The most generated classes this JVM's code generator keeps (Spark 4.2's private fields)."""
    jvm = spark._jvm
    owner = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$")
    cache = private_field(owner, owner.getDeclaredField("MODULE$").get(None), "cache")
    guava = private_field(cache.getClass().getSuperclass(), cache, "cache")
    local = private_field(guava.getClass().getSuperclass(), guava, "localCache")
    return private_field(local.getClass(), local, "maxWeight")


def private_field(owner, instance, name: str):
    field = owner.getDeclaredField(name)
    field.setAccessible(True)
    return field.get(instance)


def test_the_cache_takes_its_size_from_the_session(spark):
    assert cache_capacity(spark) == int(spark.conf.get("spark.sql.codegen.cache.maxEntries")) == 4096


def test_later_runs_of_a_model_compile_almost_nothing(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(sizing, "CODEGEN_MIN_BYTES", 0)  # runs this small would not compile at all
    m = Scenario(spark, tmp_path, SQL, **INPUTS)
    compiled = []
    for changes in ({"l": [insert(1, 10), insert(2, 20)], "r": [insert(1, 100)]},
                    {"l": [delete(1, 10), insert(3, 30)], "r": [insert(2, 200), delete(1, 100)]},
                    {"l": [insert(1, 11)], "r": [delete(2, 200), insert(3, 300)]},
                    {"l": [insert(4, 40)], "r": [insert(4, 400), delete(3, 300)]},
                    {"l": [insert(5, 50)], "r": [insert(5, 500), delete(4, 400)]}):
        before = compilations(spark)
        m.run(**changes)
        compiled.append(compilations(spark) - before)
    # run 2 is the first to retract (the result is all level 0 then), run 3 the first to merge result
    # buckets' files; from then on the plan has one shape, and runs 4 and 5 find run 3's classes (with
    # Spark's default of 100 cached classes each compiled about 200; with each run's id and clock in the
    # generated code, about 5)
    assert compiled[3:] == [0, 0], compiled
    assert m.result == {(2, 20, None): 1, (3, 30, None): 1, (1, 11, None): 1, (4, 40, None): 1, (5, 50, 500): 1}


def test_a_run_finds_the_classes_of_stages_it_plans_in_another_order(spark, tmp_path, monkeypatch):
    """Spark numbers a plan's whole-stage classes by their place in the plan, so a stage compiled before
    but placed otherwise in a new plan would compile again; a run's classes are not numbered
    (`runtime.run.RUN_CONF`). The last run here retracts a row of r after runs that only appended, each
    input alone and both together: numbered, it compiled 18 classes; its stages were all compiled before."""
    monkeypatch.setattr(sizing, "CODEGEN_MIN_BYTES", 0)
    m = Scenario(spark, tmp_path, "SELECT l.k, l.ordered, r.w FROM l LEFT JOIN r ON l.k = r.k",
                 l=[("k", "int"), ("ordered", "int")], r=[("k", "int"), ("w", "int")])
    compiled = []
    for changes in ({"l": [insert(1, 10), insert(2, 20)], "r": [insert(1, 100)]}, {"l": [insert(3, 30)]},
                    {"r": [insert(3, 300)]}, {"l": [delete(1, 10), insert(4, 40)], "r": [insert(2, 200), delete(1, 100)]},
                    {"l": [insert(5, 50)]}, {"r": [insert(5, 500)]}, {"l": [insert(6, 60)], "r": [insert(6, 600)]},
                    {"l": [insert(8, 80)], "r": [insert(8, 800), delete(6, 600)]}):
        before = compilations(spark)
        m.run(**changes)
        compiled.append(compilations(spark) - before)
    assert compiled[4:] == [0, 0, 0, 0], compiled
    assert m.result == {(2, 20, 200): 1, (3, 30, 300): 1, (4, 40, None): 1, (5, 50, 500): 1, (6, 60, None): 1,
                        (8, 80, 800): 1}


#: Per kind of time-based join: its SQL over inputs o and r, what each declares beyond its columns and
#: event time, and the rows each of the runs below adds (k = i pairs, k = i + 100 of o is padded).
TIME_BASED_JOINS = {
    # each run's pair, and from run 2 on the last run's padded row, once the watermark passes its bound
    "interval": ("SELECT o.k, o.v, r.v AS w FROM o LEFT JOIN r ON o.k = r.k "
                 "AND o.ts BETWEEN r.ts - INTERVAL '1' MINUTE AND r.ts + INTERVAL '1' MINUTE", {},
                 [1, 2, 2, 2, 2, 2, 2]),
    # both probes are due in their own run
    "temporal": ("SELECT o.k, o.v, r.v AS w FROM o LEFT JOIN r FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k",
                 {"r": {"unique_key": ["k"]}}, [2, 2, 2, 2, 2, 2, 2]),
    # a run's window fires in the next run
    "window": ("SELECT L.k, L.v, R.v AS w, L.window_end FROM TABLE(TUMBLE(TABLE o, DESCRIPTOR(ts), INTERVAL '5' MINUTE)) L "
               "LEFT JOIN TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' MINUTE)) R "
               "ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end", {},
               [0, 2, 2, 2, 2, 2, 2]),
}


@pytest.mark.parametrize("kind", sorted(TIME_BASED_JOINS))
def test_runs_of_a_time_based_join_with_a_new_watermark_each_compile_nothing_new(spark, tmp_path, monkeypatch, kind):
    """Each run has its own id and watermark, and expires, pads, emits due probes and fires windows by
    it: once the runs' plans have one shape, a run finds every class it needs already compiled (each
    such value written into the code made every stage compile again, every run: a 100k-change temporal
    join's runs compiled 8 classes each)."""
    monkeypatch.setattr(sizing, "CODEGEN_MIN_BYTES", 0)
    sql, declared, expected = TIME_BASED_JOINS[kind]
    columns = [["k", "int"], ["v", "int"], ["ts", "timestamp"]]
    runner = CaseRunner(spark, {"name": "m", "sql": sql, "config": {}, "runs": [], "inputs": {
        n: {"columns": columns, "event_time": "ts", **declared.get(n, {})} for n in ("o", "r")}}, str(tmp_path))
    compiled, added = [], []
    for i in range(len(expected)):
        at = f"2024-01-01 {i:02d}:00:00"
        runner.append_changes(i, {"o": [insert(i, 1, at), insert(i + 100, 2, at)], "r": [insert(i, 3, at)]})
        before = compilations(spark)
        report = run_once(spark, runner.plan, runner.tables)
        compiled.append(compilations(spark) - before)
        added.append(report.rows_out.get("+", 0))
    assert added == expected
    assert compiled[-2:] == [0, 0], compiled
