"""State folds consolidated in Arrow by the write pass (`arrow_fold`), as Spark's aggregation consolidated them.

The same runs (duplicates, -0.0 beside 0.0, NaNs, NULL keys, rows retracted to nothing) fold every
run's level 0 once through Arrow and once through Spark (the path for types Arrow does not group as
Spark): both must store the same rows, and each Arrow-folded file one row per distinct row, sorted by
the join key.
"""
from __future__ import annotations

import doctest
import math
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from streamjoin.storage import arrow_fold, bucket_merge
from streamjoin.storage.arrow_fold import Folding, folded
from streamjoin.storage.write_specs import FoldSpec

from scenario import Scenario, compacting_at, delete, insert, runs_match_batch

INPUTS = {"l": [("k", "int"), ("x", "double"), ("s", "string")], "r": [("k", "int"), ("d", "double")]}
SQL = "SELECT l.k, l.x, l.s, r.d FROM l FULL JOIN r ON l.k <=> r.k"
NAN = math.nan
RUNS = [
    {"l": [insert(1, 0.0, "a"), insert(1, 0.0, "a"), insert(None, NAN, "n"), insert(2, 1.5, None)],
     "r": [insert(1, 1.0), insert(None, 2.0)]},
    {"l": [insert(1, -0.0, "a"), delete(2, 1.5, None), insert(None, -NAN, "n"), insert(3, None, "z")],
     "r": [delete(1, 1.0), insert(1, 3.0)]},
    {"l": [delete(1, 0.0, "a"), insert(2, 1.5, None), delete(3, None, "z")], "r": [insert(2, 1.0), insert(2, 1.0)]},
    {"l": [delete(None, NAN, "n"), insert(4, 2.5, "b")], "r": [delete(2, 1.0), delete(None, 2.0)]},
]


def shown(value: object) -> object:
    """A stored value as compared here: floats by their text, so -0.0 differs from 0.0 and NaN equals NaN."""
    return repr(value) if isinstance(value, float) else value


def folded_state(spark, root: Path) -> dict[str, list[list[dict]]]:
    """The runs' state tables after every run folded level 0: each table's files, each file's rows."""
    with compacting_at(2, 1):
        model = Scenario(spark, root, SQL, **INPUTS)
        runs_match_batch(model, SQL, INPUTS, RUNS, lambda rows: Counter({tuple(map(shown, r)): n
                                                                          for r, n in rows.items()}))
    return {Path(path).name: [pq.read_table(uri).to_pylist() for uri in DeltaTable(path).file_uris()]
            for path in model.tables.state_tables()}


def stored(tables: dict[str, list[list[dict]]]) -> dict[str, Counter]:
    """Each table's stored rows but their run time (`_updated`), which differs between two models' runs."""
    return {name: Counter(tuple((k, shown(v)) for k, v in row.items() if k != "_updated")
                          for rows in files for row in rows) for name, files in tables.items()}


def test_arrow_and_spark_folds_store_the_same_rows(spark, tmp_path, monkeypatch):
    arrow = folded_state(spark, tmp_path / "arrow")
    monkeypatch.setattr(bucket_merge, "mergeable", lambda schema: False)
    by_spark = folded_state(spark, tmp_path / "spark")
    assert stored(arrow) == stored(by_spark)
    assert all(arrow.values()), "every side holds rows after the runs"


def test_each_folded_file_holds_each_row_once_sorted_by_the_join_key(spark, tmp_path):
    for name, files in folded_state(spark, tmp_path).items():
        key = next(k for k in files[0][0] if k.endswith("__k"))
        for rows in files:
            data = [tuple(shown(v) for k, v in row.items() if not k.startswith("_")) for row in rows]
            assert len(set(data)) == len(data), (name, rows)
            assert all(row["_weight"] != 0 or row.get("_degree") for row in rows), (name, rows)
            keys = [row[key] for row in rows]
            assert keys == sorted(keys, key=lambda k: (k is not None, k)), (name, keys)
            assert "-0.0" not in {shown(v) for row in rows for v in row.values()}, "grouped as Spark: -0.0 is 0.0"


SPEC = FoldSpec(sums=("w",), latest="t", partition="b", expire_before=10, expiring=(2,))


def test_a_partition_arriving_in_several_batches_folds_once():
    batches = [pa.table({"k": [1, 1, 2], "b": [0, 0, 1], "w": [1, 1, 1], "t": [1, 2, 3]}),
               pa.table({"k": [2], "b": [1], "w": [1], "t": [4]}),
               pa.table({"k": [2, 3, 3], "b": [1, 2, 2], "w": [-2, 1, 1], "t": [5, 6, 20]}),
               pa.table({"k": [4], "b": [2], "w": [1], "t": [7]})]
    folding = Folding(SPEC)
    outputs = [out.to_pylist() for batch in batches for out in folding.add(batch)] + [
        out.to_pylist() for out in folding.finish()]
    assert outputs == [[{"k": 1, "b": 0, "w": 2, "t": 2}],  # partition 0, complete once partition 1 starts
                       [],  # partition 1, complete once 2 starts: k=2 sums to nothing
                       [{"k": 3, "b": 2, "w": 2, "t": 20}]]  # k=4 of expiring partition 2 idle since 7 < 10
    assert folded(pa.concat_tables(batches), SPEC).to_pylist() == [row for out in outputs for row in out]


def test_arrow_fold_examples():
    assert doctest.testmod(arrow_fold).failed == 0
