"""Lookups in the session catalog (the metastore) by name, without Spark's analyzer in between.

Spark's catalog API (`spark.catalog.tableExists`, `getTable`) and `DESCRIBE TABLE EXTENDED` resolve a
name as a query would, and the latter analyzes a view's query: about 0.1 s a name in a warm
session, several times that in a new process, where a dbt invocation looks up every source it
publishes. These ask the session catalog directly: one metastore call each.
"""
from __future__ import annotations

from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the session catalog has a table or view `name` (``db.table`` or ``table``)."""
    catalog, identifier = _resolve(spark, name)
    return catalog.tableExists(identifier)


def table_entry(spark: SparkSession, name: str) -> tuple[str | None, str | None]:
    """The type of the table `name` (``VIEW``, ``MANAGED``, ``EXTERNAL``; None when there is none) and,
    for a view, the SELECT it was created with."""
    catalog, identifier = _resolve(spark, name)
    if not catalog.tableExists(identifier):
        return None, None
    table = catalog.getTableMetadata(identifier)
    view_text = table.viewText()
    return table.tableType().name(), view_text.get() if view_text.isDefined() else None


def put_view(spark: SparkSession, name: str, select: str, *, exists: bool) -> None:
    """Make `name` a view of `select`, replacing in place the view the caller found (`exists`).

    `CREATE OR REPLACE VIEW` drops a permanent view and creates it again, so a listing of its schema
    in another thread or process (dbt's relation cache) can find the name and then no view.
    `ALTER VIEW ... AS` is one catalog update: the view is always there, old or new.
    """
    if exists:
        spark.sql(f"ALTER VIEW {name} AS {select}")
        return
    try:
        spark.sql(f"CREATE VIEW {name} AS {select}")
    except AnalysisException as error:  # another process created it since
        if error.getCondition() != "TABLE_OR_VIEW_ALREADY_EXISTS":
            raise
        spark.sql(f"ALTER VIEW {name} AS {select}")


def _resolve(spark: SparkSession, name: str) -> tuple[Any, Any]:
    """The session catalog (JVM) and `name` parsed as its table identifier."""
    state = spark._jsparkSession.sessionState()
    return state.catalog(), state.sqlParser().parseTableIdentifier(name)
