"""PySpark's lookups of JVM classes and methods, answered once per process instead of once per call.

Each `pyspark.sql.functions` call (`F.col`, `F.lit`, …) and each list PySpark hands the JVM looks
its class up (`sc._jvm.<class>`) and then its method (`<class>.<method>`) before calling it: Py4J
sends a reflection round trip for each, every time, and caches nothing. A small run builds its
plans with a few thousand such calls, so about a fifth of its round trips to the JVM were these
lookups (850 of 3,800 in a 2-way join's run). `install` puts a caching view in front of the
SparkContext's JVM view: a class is looked up once, and so is each of its methods; fields (whose
values may change), packages and the calls themselves still go to the JVM every time.

A name resolves to the class it resolved to the first time: Java classes do not change in a
running JVM. (A later `java_import` that made a short name mean another class would not be seen;
PySpark imports its packages when it starts, and none of them share a class name.)
"""
from __future__ import annotations

import threading
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember
from pyspark import SparkContext

_lock = threading.Lock()


class _CachedClass(JavaClass):
    """A Py4J class (it is one, for every check and call) whose methods and nested classes are looked
    up once."""

    def __init__(self, cls: JavaClass) -> None:
        super().__init__(cls._fqn, cls._gateway_client)
        self._members: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        found = self._members.get(name) if not name.startswith("_") else None
        if found is None:
            found = super().__getattr__(name)
            if isinstance(found, JavaMember):
                self._members[name] = found
            elif isinstance(found, JavaClass):
                found = self._members[name] = _CachedClass(found)
        return found


class CachedView:
    """A Py4J JVM view whose classes (and their methods, see `_CachedClass`) are looked up once."""

    def __init__(self, view: Any) -> None:
        self._view = view
        self._classes: dict[str, _CachedClass] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # the view's own attributes (`_gateway_client`, `_id`, …)
            return getattr(self._view, name)
        found = self._classes.get(name)
        if found is not None:
            return found
        looked_up = getattr(self._view, name)
        if not isinstance(looked_up, JavaClass):
            return looked_up  # a package: its members are looked up where they are used
        return self._classes.setdefault(name, _CachedClass(looked_up))


def install() -> None:
    """Answer the active SparkContext's class and method lookups from a cache, from now on in this
    process (again after a new JVM gateway replaced the view)."""
    with _lock:
        view = SparkContext._jvm
        if view is not None and not isinstance(view, CachedView):
            SparkContext._jvm = CachedView(view)
