"""How many partitions a run's shuffles get: from the bytes the run reads, not a fixed number.

A run plans without adaptive execution (each adaptive query stage would be a Spark job of
its own), so it sizes its shuffles up front: about one partition per `TARGET_BYTES` of what
it reads, and every core once each partition would still get `MIN_BYTES`.
"""
from __future__ import annotations

import math

TARGET_BYTES = 32 * 1024 * 1024
MIN_BYTES = 1024 * 1024


def shuffle_partitions(read_bytes: int, parallelism: int) -> int:
    """Partitions for the shuffles of a run that reads `read_bytes` on `parallelism` cores.

    >>> shuffle_partitions(10_000, 2), shuffle_partitions(5 * MIN_BYTES, 2), shuffle_partitions(10 * TARGET_BYTES, 2)
    (1, 2, 10)
    """
    by_size = math.ceil(read_bytes / TARGET_BYTES)
    by_cores = min(parallelism, read_bytes // MIN_BYTES)
    return max(1, by_size, by_cores)
