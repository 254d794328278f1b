"""Views are replaced in place: a listing of their schema in another thread or process (dbt's relation
cache) never finds a name whose view is gone, as `CREATE OR REPLACE VIEW` (a drop, then a create) let it."""
from __future__ import annotations

import threading

from streamjoin import catalog


def created_at(spark, name: str) -> int:
    state = spark._jsparkSession.sessionState()
    return state.catalog().getTableMetadata(state.sqlParser().parseTableIdentifier(name)).createTime()


def test_a_view_is_replaced_in_place_with_its_new_columns(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS views_in_place")
    catalog.put_view(spark, "views_in_place.v", "SELECT 1 AS a", exists=False)
    created = created_at(spark, "views_in_place.v")
    catalog.put_view(spark, "views_in_place.v", "SELECT 2 AS a, 'x' AS b", exists=True)
    assert created_at(spark, "views_in_place.v") == created  # altered, not dropped and created again
    assert [tuple(r) for r in spark.sql("SELECT * FROM views_in_place.v").collect()] == [(2, "x")]
    assert catalog.table_entry(spark, "views_in_place.v") == ("VIEW", "SELECT 2 AS a, 'x' AS b")


def test_a_view_another_process_created_meanwhile_is_altered(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS views_in_place")
    spark.sql("CREATE OR REPLACE VIEW views_in_place.raced AS SELECT 1 AS a")
    catalog.put_view(spark, "views_in_place.raced", "SELECT 3 AS a", exists=False)  # absent when looked up
    assert [tuple(r) for r in spark.sql("SELECT * FROM views_in_place.raced").collect()] == [(3,)]


def test_a_listing_beside_republishing_always_finds_the_view(spark):
    spark.sql("CREATE DATABASE IF NOT EXISTS views_listed")
    catalog.put_view(spark, "views_listed.v", "SELECT 0 AS a", exists=catalog.table_exists(spark, "views_listed.v"))
    errors: list[str] = []
    done = threading.Event()

    def list_relations() -> None:  # what dbt-spark's list_relations_without_caching runs
        while not done.is_set():
            try:
                spark.sql("SHOW TABLE EXTENDED IN views_listed LIKE '*'").collect()
            except Exception as error:  # noqa: BLE001 - every failure is the finding
                errors.append(str(error).splitlines()[0])

    lister = threading.Thread(target=list_relations)
    lister.start()
    try:
        for i in range(150):
            catalog.put_view(spark, "views_listed.v", f"SELECT {i} AS a" + (", 'x' AS b" if i % 2 else ""), exists=True)
    finally:
        done.set()
        lister.join()
    assert errors == []
