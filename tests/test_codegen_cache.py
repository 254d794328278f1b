"""Runs of one model reuse the Java classes Spark generated for the runs before (session.DEFAULTS keeps
enough of them): a run compiles its plans once, not every run again."""
from __future__ import annotations

from scenario import Scenario, delete, insert

from streamjoin.runtime import sizing

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
    # Spark's default of 100 cached classes each compiled about 200)
    assert max(compiled[3:]) <= 10, compiled
    assert m.result == {(2, 20, None): 1, (3, 30, None): 1, (1, 11, None): 1, (4, 40, None): 1, (5, 50, 500): 1}
