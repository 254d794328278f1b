"""Lists PySpark hands the JVM are the same `java.util.ArrayList`s once `jvm_lists` is installed, built
in a few round trips instead of one per element."""
from __future__ import annotations

import pytest
from py4j import protocol
from py4j.java_collections import ListConverter
from pyspark.sql import functions as F

from streamjoin import jvm_lists
from test_jvm_lookups import sent_commands


@pytest.fixture
def batched():
    """`jvm_lists` installed for the test; the converters as they were after it (the list Py4J's
    gateways hold is the module's, so it is restored in place)."""
    saved = list(protocol.INPUT_CONVERTER)
    jvm_lists.install()
    yield next(c for c in protocol.INPUT_CONVERTER if isinstance(c, jvm_lists.BatchedListConverter))
    protocol.INPUT_CONVERTER[:] = saved


def commands(monkeypatch, spark, work) -> list[str]:
    """The commands `work()` sends to the JVM but object releases (sent as Python collects proxies)."""
    return [c for c in sent_commands(monkeypatch, spark, work) if not c.startswith("m\nd\n")]


def as_python(java_list) -> list:
    return [java_list.get(i) for i in range(java_list.size())]


def test_install_replaces_py4j_list_converter_once(batched):
    jvm_lists.install()
    assert sum(isinstance(c, ListConverter) for c in protocol.INPUT_CONVERTER) == 1
    assert sum(isinstance(c, jvm_lists.BatchedListConverter) for c in protocol.INPUT_CONVERTER) == 1


@pytest.mark.parametrize("size", [0, 1, 10, 11, 25])
def test_a_converted_list_is_an_array_list_of_the_same_elements_in_order(spark, batched, size):
    items = [f"s{i}" if i % 3 else i for i in range(size)]
    converted = batched.convert(items, spark.sparkContext._gateway._gateway_client)
    assert converted.getClass().getName() == "java.util.ArrayList"
    assert as_python(converted) == items
    converted.add("still mutable")
    assert converted.size() == size + 1


def test_lists_with_none_or_a_java_array_keep_each_element_as_it_is(spark, batched):
    client = spark.sparkContext._gateway._gateway_client
    assert as_python(batched.convert(["a", None, "b"], client)) == ["a", None, "b"]
    array = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.java.lang.String, 2)
    converted = batched.convert(["a", array], client)
    assert converted.size() == 2 and converted.get(1).getClass().isArray()


def test_a_list_of_25_takes_6_round_trips_not_26(spark, monkeypatch, batched):
    client = spark.sparkContext._gateway._gateway_client
    batched.convert(["warm"], client)  # the converter looks ArrayList and List.of up once per gateway
    items = [f"c{i}" for i in range(25)]
    sent = commands(monkeypatch, spark, lambda: batched.convert(items, client))
    assert len(sent) == 6, sent  # ArrayList(List.of(10)), then addAll(List.of(10)) and addAll(List.of(5))
    assert len(commands(monkeypatch, spark, lambda: ListConverter().convert(items, client))) == 26


def test_dataframes_built_through_it_are_the_same(spark, monkeypatch, batched):
    built = []
    sent = commands(monkeypatch, spark, lambda: built.append(spark.range(3).select(
        *[(F.col("id") + i).alias(f"c{i}") for i in range(23)], F.lit(None).alias("n"))))
    assert any(c.split("\n")[2:3] == ["of"] for c in sent)  # the select's columns went through List.of
    df = built[0]
    rows = df.unionByName(df.select(*reversed(df.columns))).orderBy(*df.columns).collect()
    assert [tuple(r) for r in rows] == [tuple(x + i for i in range(23)) + (None,) for x in (0, 0, 1, 1, 2, 2)]
