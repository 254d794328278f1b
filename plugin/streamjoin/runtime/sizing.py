"""How a run's plans are sized: from the bytes the run reads, not fixed numbers.

A run plans without adaptive execution (each adaptive query stage would be a Spark job of
its own), so it sizes its shuffles up front: about one partition per `TARGET_BYTES` of what
it reads, and every core once each partition would still get `MIN_BYTES`. A run that reads
less than `CODEGEN_MIN_BYTES` runs its operators interpreted: generating and compiling each
stage's Java code costs more than it saves on a few rows.
"""
from __future__ import annotations

import math

TARGET_BYTES = 32 * 1024 * 1024
MIN_BYTES = 1024 * 1024
CODEGEN_MIN_BYTES = 8 * MIN_BYTES


def shuffle_partitions(read_bytes: int, parallelism: int) -> int:
    """Partitions for the shuffles of a run that reads `read_bytes` on `parallelism` cores.

    >>> shuffle_partitions(10_000, 2), shuffle_partitions(5 * MIN_BYTES, 2), shuffle_partitions(10 * TARGET_BYTES, 2)
    (1, 2, 10)
    """
    by_size = math.ceil(read_bytes / TARGET_BYTES)
    by_cores = min(parallelism, read_bytes // MIN_BYTES)
    return max(1, by_size, by_cores)


def whole_stage_codegen(read_bytes: int) -> bool:
    """Whether a run that reads `read_bytes` compiles its stages to Java (Spark's whole-stage codegen).

    >>> whole_stage_codegen(10_000), whole_stage_codegen(CODEGEN_MIN_BYTES)
    (False, True)
    """
    return read_bytes >= CODEGEN_MIN_BYTES
