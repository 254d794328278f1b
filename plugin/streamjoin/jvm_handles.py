"""The JVM members streamjoin calls beyond PySpark's API, looked up once per JVM.

Each segment of a dotted name (`jvm.org.apache.spark…`) is a Py4J reflection round trip. Looked up
on every call, the members a kept result and a union use cost several round trips each (about 9 ms a
kept result, 80 ms of a small run's 2 s, measured before); they are looked up the first time and kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class JvmHandles:
    """The JVM members `unions` and `runtime.intermediates` call."""

    datasets: Any  # org.apache.spark.sql.classic.Dataset
    to_seq: Any  # PythonUtils.toSeq
    union: Any  # the Union logical plan's constructor
    relations: Any  # InMemoryRelation's companion object
    memory_and_disk: Any  # StorageLevel.MEMORY_AND_DISK
    kept_name: Any  # Some("streamjoin kept result"): unnamed, Spark names each kept result by its whole plan's text

    @staticmethod
    @lru_cache(maxsize=4)
    def of(jvm: Any) -> "JvmHandles":
        """The handles of the JVM behind the view `jvm` (a SparkSession's `_jvm`)."""
        return JvmHandles(
            datasets=jvm.org.apache.spark.sql.classic.Dataset,
            to_seq=jvm.org.apache.spark.api.python.PythonUtils.toSeq,
            union=jvm.org.apache.spark.sql.catalyst.plans.logical.Union,
            relations=getattr(jvm.org.apache.spark.sql.execution.columnar, "InMemoryRelation$").__getattr__("MODULE$"),
            memory_and_disk=jvm.org.apache.spark.storage.StorageLevel.MEMORY_AND_DISK(),
            kept_name=jvm.scala.Some("streamjoin kept result"))
