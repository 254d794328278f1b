"""A Z-set's rows consolidated in Arrow by the write pass's tasks, as they are written (a state fold).

A run that folds a state table's level 0 into its buckets (`state.StateTable.stage`) hands Spark the
rows to consolidate sorted by bucket, each bucket in one task. The task sums each distinct row's
weights in Arrow, one bucket at a time, and writes what is left: Spark does not aggregate them (a fold
of 940k rows: Spark's two hash aggregations took 3.2 s of its 4.7 s task, Arrow groups them in 0.25 s).

Rows are told apart as Spark's grouping tells them apart (`bucket_merge.normalized`), and a table
folds here only where `bucket_merge.mergeable` says Arrow groups its columns as Spark does.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from .bucket_merge import normalized
from .write_specs import FoldSpec


def folded(rows: pa.Table, spec: FoldSpec) -> pa.Table:
    """One row per distinct row of `rows` (all columns but `spec`'s sums and latest), its sums summed and
    its latest the largest; rows whose sums are all 0 dropped, and the expiring partitions' rows whose
    latest is before `spec.expire_before`. Rows keep the order of their first occurrence.

    >>> spec = FoldSpec(sums=("w",), latest="t", partition="b")
    >>> rows = pa.table({"x": [1.0, -0.0, 0.0, 1.0], "b": [0, 0, 0, 0], "w": [1, 1, 1, -1], "t": [5, 6, 7, 8]})
    >>> folded(rows, spec).to_pylist()
    [{'x': 0.0, 'b': 0, 'w': 2, 't': 7}]
    """
    names = rows.column_names
    groups = [n for n in names if n not in spec.sums and n != spec.latest]
    keyed = pa.table([normalized(rows[n]) if n in groups else rows[n] for n in names], names=names)
    summed = keyed.group_by(groups, use_threads=False).aggregate(
        [(s, "sum") for s in spec.sums] + [(spec.latest, "max")])
    renamed = {f"{s}_sum": s for s in spec.sums} | {f"{spec.latest}_max": spec.latest}
    out = summed.rename_columns([renamed.get(n, n) for n in summed.column_names]).select(names)
    keep = None
    for s in spec.sums:
        nonzero = pc.not_equal(out[s], 0)
        keep = nonzero if keep is None else pc.or_kleene(keep, nonzero)
    if spec.expire_before is not None and spec.expiring:
        partition = out[spec.partition]
        expiring = pc.is_in(partition, value_set=pa.array(spec.expiring, partition.type))
        keep = pc.and_kleene(keep, pc.or_kleene(pc.greater_equal(out[spec.latest], spec.expire_before),
                                                pc.invert(expiring)))
    return out.filter(keep).cast(rows.schema)  # (with its columns' nullability, which grouping drops)


class Folding:
    """A task's rows of one folded target, in the order they arrive (each partition's rows one after
    another), consolidated a partition at a time: no more than a partition's rows are held at once."""

    def __init__(self, spec: FoldSpec) -> None:
        self.spec = spec
        self.pending: list[pa.Table] = []

    def add(self, rows: pa.Table) -> Iterator[pa.Table]:
        """Take the next rows; yield the folded rows of the partitions they complete."""
        if not rows.num_rows:
            return
        values = rows[self.spec.partition]
        last = pc.index(values, values[-1]).as_py()  # where the last partition's rows start: it may go on
        if last:
            yield folded(pa.concat_tables([*self.pending, rows.slice(0, last)]), self.spec)
            self.pending = []
        self.pending.append(rows.slice(last))

    def finish(self) -> Iterator[pa.Table]:
        """The folded rows of the partitions still held."""
        if self.pending:
            yield folded(pa.concat_tables(self.pending), self.spec)
            self.pending = []
