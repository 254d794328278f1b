"""Shared fixtures: one local SparkSession for the whole test run (Spark starts in seconds, not ms)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from streamjoin.session import local_session

    # test data is tiny: one shuffle partition halves the tasks of every stage
    # three test workers share two cores: the serial collector spends the least CPU on their small heaps
    session = local_session(app_name="streamjoin-tests", conf={"spark.sql.shuffle.partitions": "1",
                                                                "spark.driver.extraJavaOptions": "-XX:+UseSerialGC"})
    yield session
