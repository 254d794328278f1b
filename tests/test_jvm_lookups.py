"""PySpark's class and method lookups are answered from a cache once `jvm_lookups` is installed: the
same results, without a reflection round trip to the JVM per `pyspark.sql.functions` call."""
from __future__ import annotations

from py4j.java_gateway import JavaClass, is_instance_of
from pyspark import SparkContext
from pyspark.sql import functions as F

from streamjoin import jvm_lookups


def raw_view():
    view = SparkContext._jvm
    return view._view if isinstance(view, jvm_lookups.CachedView) else view


def sent_commands(monkeypatch, spark, work) -> list[str]:
    """The commands `work()` sends to the JVM."""
    client_type = type(spark.sparkContext._gateway._gateway_client)
    real, sent = client_type.send_command, []

    def counting(self, command, *args, **kwargs):
        sent.append(command)
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(client_type, "send_command", counting)
    try:
        work()
    finally:
        monkeypatch.setattr(client_type, "send_command", real)
    return sent


def reflections(monkeypatch, spark, work) -> int:
    """How many reflection commands (class and member lookups) `work()` sends to the JVM."""
    return sum(1 for c in sent_commands(monkeypatch, spark, work) if c.startswith("r\n"))


def build_columns():
    for i in range(20):
        F.col(f"c{i}") + F.lit(i)


def test_function_calls_look_nothing_up_once_their_class_and_method_are_known(spark, monkeypatch):
    monkeypatch.setattr(SparkContext, "_jvm", raw_view())
    assert reflections(monkeypatch, spark, build_columns) >= 80  # class and method, per call of col and lit
    monkeypatch.setattr(SparkContext, "_jvm", jvm_lookups.CachedView(raw_view()))
    build_columns()
    assert reflections(monkeypatch, spark, build_columns) == 0
    rows = spark.range(3).select((F.col("id") + F.lit(10)).alias("x"), F.upper(F.lit("a")).alias("y")).collect()
    assert [tuple(r) for r in rows] == [(10, "A"), (11, "A"), (12, "A")]


def test_a_cached_class_is_a_py4j_class_that_constructs_and_is_checked_against(spark, monkeypatch):
    monkeypatch.setattr(SparkContext, "_jvm", jvm_lookups.CachedView(raw_view()))
    conf_class = SparkContext._jvm.SparkConf  # a short name PySpark imports
    assert isinstance(conf_class, JavaClass) and conf_class is SparkContext._jvm.SparkConf
    conf = conf_class(False).set("streamjoin.test", "yes")
    assert conf.get("streamjoin.test") == "yes"
    assert is_instance_of(spark.sparkContext._gateway, conf, conf_class)
    assert SparkContext._jvm._gateway_client is raw_view()._gateway_client  # the view's own attributes pass through


def test_install_puts_one_caching_view_in_place(spark, monkeypatch):
    monkeypatch.setattr(SparkContext, "_jvm", raw_view())
    jvm_lookups.install()
    installed = SparkContext._jvm
    jvm_lookups.install()
    assert isinstance(installed, jvm_lookups.CachedView) and SparkContext._jvm is installed
