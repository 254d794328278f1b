"""A model's changelog mapped onto Spark Declarative Pipelines' Auto CDC (`streamjoin.cdc`): applied
as Auto CDC's SCD type 1 applies a source (per key, the row of the largest `sequence_by`; none when
that row is a delete), it replays to the model's result after every run. (`spark-pipelines` runs
here, but its Auto CDC flow needs a MERGE-capable target, whose jars cannot be fetched: see README.)"""
from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from scenario import Scenario, delete, insert, update_after, update_before
from streamjoin.cdc import auto_cdc_flow_arguments, auto_cdc_source
from streamjoin.errors import ConfigError
from streamjoin.storage import delta_log

SQL = "SELECT o.id, o.item, p.price FROM o LEFT JOIN p ON o.pid = p.pid"


def scd1(source: DataFrame, keys: list[str], sequence_by: str, apply_as_deletes: str,
         except_column_list: list[str]) -> DataFrame:
    """What an Auto CDC (SCD type 1) target holds after reading all of `source`."""
    latest = source.withColumn("_n", F.row_number().over(Window.partitionBy(*keys).orderBy(F.col(sequence_by).desc())))
    return latest.where("_n = 1").where(~F.expr(apply_as_deletes)).drop("_n", *except_column_list)


def test_the_changelog_without_its_update_befores_replays_to_the_result_as_auto_cdc_applies_it(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, config={"output_unique_key": ["id"]}, unique_keys={"o": ["id"], "p": ["pid"]},
                 o=[("id", "int"), ("item", "string"), ("pid", "int")], p=[("pid", "int"), ("price", "int")])
    arguments = auto_cdc_flow_arguments(m.plan)
    assert arguments["keys"] == ["id"] and arguments["sequence_by"] == "_run_id"
    runs = [
        {"o": [insert(1, "pen", 10), insert(2, "ink", 20)], "p": [insert(10, 5)]},
        {"o": [delete(1, "pen", 10), insert(3, "cap", 10)], "p": [insert(20, 7)]},  # a delete, a padded row filled
        {"o": [update_before(2, "ink", 20), update_after(2, "ink2", 10)], "p": [delete(10, 5)]},  # rows padded again
        {"o": [insert(1, "pen", 20), delete(3, "cap", 10)], "p": [insert(10, 9)]},  # a deleted key comes back
    ]
    for changes in runs:
        m.run(**changes)
        path = m.tables.changelog
        changelog = spark.read.parquet(*[f.uri for f in delta_log.data_files(path, delta_log.version(path))])
        source = auto_cdc_source(changelog)
        assert source.groupBy("id", "_run_id").count().where("count > 1").count() == 0  # sequence_by orders each key
        target = scd1(source, **arguments)
        assert Counter(tuple(r) for r in target.select("id", "item", "price").collect()) == m.result
    assert m.result == Counter({(1, "pen", 7): 1, (2, "ink2", 9): 1})


def test_a_model_without_an_output_unique_key_has_no_auto_cdc_mapping(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, o=[("id", "int"), ("item", "string"), ("pid", "int")],
                 p=[("pid", "int"), ("price", "int")])
    with pytest.raises(ConfigError, match="declare one"):
        auto_cdc_flow_arguments(m.plan)
