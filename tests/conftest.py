"""Shared fixtures: one local SparkSession for the whole test run (Spark starts in seconds, not ms)."""
from __future__ import annotations

import os

import pytest

# A project's metastore service (streamjoin.metastore), started by the dbt and Airflow tests' processes,
# stops soon after its last process exits instead of outliving the test run by minutes.
os.environ.setdefault("STREAMJOIN_METASTORE_IDLE_SECONDS", "20")


@pytest.fixture(scope="session")
def spark():
    from streamjoin.session import local_session

    # test data is tiny: one shuffle partition halves the tasks of every stage
    # three test workers share two cores: the serial collector spends the least CPU on their small heaps
    # (C1-only compilation, tried, made the suite slower: its test processes live for half an hour)
    session = local_session(app_name="streamjoin-tests", conf={"spark.sql.shuffle.partitions": "1",
                                                                "spark.driver.extraJavaOptions": "-XX:+UseSerialGC"})
    yield session


@pytest.fixture(scope="session")
def s3_lake():
    """A bucket on an S3 emulator on 127.0.0.1 (`s3_emulator.Bucket`), its storage options registered here."""
    from s3_emulator import s3_bucket
    from streamjoin.storage import filesystem

    with s3_bucket() as bucket:
        filesystem.register(bucket.uri, bucket.options)
        yield bucket


#: Modules that take minutes, the longest first (from CI's `--durations`). Test processes take whole
#: modules (`--dist loadfile`) in collection order: starting with these, and leaving the short modules
#: to fill in around them, keeps a long module from starting last and running alone at the end.
LONGEST_FIRST = (
    "tests/cluster/test_cluster_dbt.py", "tests/airflow/test_dag_end_to_end.py", "tests/test_conformance.py",
    "tests/test_batch_views.py", "tests/airflow/test_local_executor.py", "tests/test_multiway_conformance.py",
    "tests/cluster/test_cluster.py", "tests/test_interval_join.py",
    "tests/test_window_join.py", "tests/test_temporal_join.py", "tests/test_flink_agreement.py",
    "tests/test_lookup_join.py", "tests/test_interval_cascade.py", "tests/dbt/test_dbt_parallel.py",
    "tests/test_lookup_flink_agreement.py", "tests/test_theta_join.py", "tests/test_asof_join.py",
    "tests/test_regular_properties.py",
    "tests/test_multiway_property.py", "tests/dbt/test_dbt_failures.py", "tests/dbt/test_dbt_object_store.py",
    "tests/test_exactly_once.py", "tests/test_interval_property.py", "tests/dbt_adapter/test_adapter_end_to_end.py",
    "tests/bench/test_bench_smoke.py", "tests/flink_oracle/test_flink_oracle.py",
    "tests/test_regular_scenarios.py", "tests/test_retention.py", "tests/test_plan_rebuild.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
