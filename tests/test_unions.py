"""`unions.union_by_name`: one n-ary union with the rows and columns of a chain of `unionByName`."""
from __future__ import annotations

from functools import reduce

import pytest
from pyspark.errors import AnalysisException

from streamjoin.unions import union_by_name


def test_an_n_ary_union_equals_the_chain_of_binary_unions(spark):
    frames = [spark.range(3).selectExpr(f"{i} AS t", f"id AS c{i % 3}") for i in range(7)]
    chain = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    union = union_by_name(frames, allow_missing=True)
    assert union.schema == chain.schema
    assert sorted(map(tuple, union.collect()), key=repr) == sorted(map(tuple, chain.collect()), key=repr)


def test_a_column_one_frame_lacks_fails_unless_missing_columns_are_allowed(spark):
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN_AMONG_FIELD_NAMES"):
        union_by_name([spark.range(1), spark.range(1).selectExpr("id AS x")])
