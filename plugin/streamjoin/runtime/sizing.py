"""How a run's plans are sized: from the bytes the run reads, not fixed numbers.

A run plans without adaptive execution (each adaptive query stage would be a Spark job of
its own), so it sizes its shuffles up front: about one partition per `TARGET_BYTES` of what
it reads, and every core once each partition would still get `MIN_BYTES`. A run interprets its
operators and their expressions while its changes stay under `CODEGEN_MIN_CHANGE_BYTES` and the
total it reads (changes and state) under `CODEGEN_MIN_BYTES`: generating (and, the first time,
compiling) Java code for each stage and each projection, predicate and ordering costs more than it
saves on a few rows. The rows a run's operators handle grow with its changes (of its state mostly
the touched keys' rows reach Spark), so a megabyte of changes compiles: a 50k-change temporal join
run's job took about 30% less time compiled, a window join's about 50%. A run whose changes are under
`ONE_PARTITION_CHANGE_BYTES` and that reads no more than `ONE_PARTITION_READ_BYTES` is planned in one
partition (`one_partition`): its stages cost more than a second core would save, since of the state
it reads mostly the touched keys' rows reach Spark (the rest stays in the Arrow task that reads the
files). A 1k-change LEFT join run with 100 retractions took 2.6–2.9 s so on a 5M-change state (110 MB
of state), against 3.8–4.1 s in 30 stages on both cores, and 3.5–3.9 s on a 10M-change one (220 MB),
against 5.2–5.7 s; the result buckets it rewrites still go to every core (`bucket_merge.SPREAD_BYTES`).
Larger changes keep their file scans and the write pass on every core.
"""
from __future__ import annotations

import math

TARGET_BYTES = 32 * 1024 * 1024
MIN_BYTES = 1024 * 1024
CODEGEN_MIN_BYTES = 8 * MIN_BYTES
CODEGEN_MIN_CHANGE_BYTES = MIN_BYTES
ONE_PARTITION_CHANGE_BYTES = MIN_BYTES // 4
ONE_PARTITION_READ_BYTES = 8 * TARGET_BYTES


def shuffle_partitions(read_bytes: int, parallelism: int) -> int:
    """Partitions for the shuffles of a run that reads `read_bytes` on `parallelism` cores.

    >>> shuffle_partitions(10_000, 2), shuffle_partitions(5 * MIN_BYTES, 2), shuffle_partitions(10 * TARGET_BYTES, 2)
    (1, 2, 10)
    """
    by_size = math.ceil(read_bytes / TARGET_BYTES)
    by_cores = min(parallelism, read_bytes // MIN_BYTES)
    return max(1, by_size, by_cores)


def compiled_to_java(change_bytes: int, read_bytes: int) -> bool:
    """Whether a run whose changes are `change_bytes` of the `read_bytes` it reads (with its state)
    compiles its stages and expressions to Java (Spark's whole-stage and expression codegen) rather
    than interpreting them.

    >>> compiled_to_java(10_000, 20_000), compiled_to_java(MIN_BYTES, MIN_BYTES)
    (False, True)
    >>> compiled_to_java(10_000, CODEGEN_MIN_BYTES)
    True
    """
    return change_bytes >= CODEGEN_MIN_CHANGE_BYTES or read_bytes >= CODEGEN_MIN_BYTES


def in_one_partition(change_bytes: int, read_bytes: int) -> bool:
    """Whether a run whose changes are `change_bytes` of the `read_bytes` it reads (with its state)
    is planned in one partition.

    >>> in_one_partition(30_000, 8 * MIN_BYTES), in_one_partition(1_500_000, 1_900_000), in_one_partition(30_000, 9 * TARGET_BYTES)
    (True, False, False)
    """
    return change_bytes < ONE_PARTITION_CHANGE_BYTES and read_bytes <= ONE_PARTITION_READ_BYTES
