"""SessionPlan: embedded defaults, and profile server_side_parameters on top."""

from __future__ import annotations

from pathlib import Path

from dbt.adapters.streamjoin.session import SessionPlan


def plan_with(**server_side_parameters: str) -> SessionPlan:
    return SessionPlan.embedded(
        local_dir=Path("/p/.streamjoin"),
        state_root="/p/.streamjoin/state",
        server_side_parameters={k.replace("__", "."): v for k, v in server_side_parameters.items()},
    )


def test_embedded_defaults() -> None:
    conf = plan_with().conf
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.ui.enabled"] == "false"
    # shuffles are sized by their data (adaptive coalescing of 200 initial partitions), as streamjoin's own sessions
    assert (conf["spark.sql.adaptive.enabled"], conf["spark.sql.shuffle.partitions"]) == ("true", "200")
    assert conf["spark.driver.memory"] == "2g"  # local: the driver is also the executor
    assert conf["spark.sql.catalogImplementation"] == "hive"
    # the catalog is the project's metastore service (started with the session), not an embedded Derby
    assert plan_with().project_metastore
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in conf and "spark.hadoop.hive.metastore.uris" not in conf


def test_a_metastore_named_in_the_profile_replaces_the_projects_service() -> None:
    assert not plan_with(spark__hadoop__hive__metastore__uris="thrift://metastore:9083").project_metastore
    assert not plan_with(spark__hadoop__javax__jdo__option__ConnectionURL="jdbc:derby:;databaseName=/m").project_metastore
    assert not plan_with(spark__sql__catalogImplementation="in-memory").project_metastore


def test_server_side_parameters_win() -> None:
    conf = plan_with(
        spark__sql__shuffle__partitions="3", spark__sql__warehouse__dir="/lake/warehouse"
    ).conf
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.sql.warehouse.dir"] == "/lake/warehouse"


def test_a_cluster_master_gets_no_local_defaults() -> None:
    conf = plan_with(spark__master="spark://spark-master:7077").conf
    assert conf["spark.master"] == "spark://spark-master:7077"
    assert "spark.driver.memory" not in conf
