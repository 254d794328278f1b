"""A small run planned in one partition: every leaf of its plans (file scans, the driver's listings,
kept results) is read into a single partition, so Spark's planner needs no shuffle anywhere above it.

A run sized to one shuffle partition (`runtime.sizing`) still paid a stage per shuffle: each join
and each consolidation exchanged its few rows into that one partition, and every stage costs its
scheduling, its task and its shuffle files whatever it carries. A leaf read into one partition
reports Spark's `SinglePartition`, which satisfies every distribution a join or an aggregate asks
for; unions of such leaves stay one partition; and with `spark.sql.maxSinglePartitionBytes` above
any estimate (the run's settings), a join of two of them is planned in place. The run's one job
then has a stage or two instead of a score.

The run that decides it opens a `scope` and decides in it; the code that makes a leaf, or aggregates a
union Spark sees as partitioned otherwise, asks for the frame `gathered`. The scope is a context
variable: dbt runs models in threads of one process, each with its own.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

from pyspark.sql import Column, DataFrame

_ACTIVE: ContextVar[bool] = ContextVar("streamjoin_one_partition", default=False)


@contextmanager
def scope() -> Iterator[Callable[[bool], None]]:
    """A block whose plans read their leaves into one partition from when it decides so: it gets
    the function to call with that decision, which holds until the block ends."""
    token = _ACTIVE.set(False)
    try:
        yield _ACTIVE.set
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    """Whether plans made now read their leaves into one partition."""
    return _ACTIVE.get()


def gathered(df: DataFrame) -> DataFrame:
    """`df` in one partition while a small run plans, else as it is: for a plan leaf, and for the
    input of an aggregation where Spark cannot tell it is one partition already (a union of a join's
    output, which claims its two sides' partitionings, with anything else)."""
    return df.coalesce(1) if _ACTIVE.get() else df


def clustered(df: DataFrame, *columns: Column, spread: bool = False) -> DataFrame:
    """`df` with rows of equal `columns` in the same partition: in its one partition while a small run
    plans (a union of one-partition frames may still claim two), else shuffled by them.

    `spread` shuffles them by the columns in a small run too: for rows that go to heavy tasks, one per
    group of equal `columns` (a bucket merge that rewrites large files), which the shuffle, one stage
    more, puts on every core."""
    return gathered(df) if _ACTIVE.get() and not spread else df.repartition(*columns)
