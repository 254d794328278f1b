"""A binary join's ON condition as a Spark column, for operators that join two frames with Spark's own join."""
from __future__ import annotations

from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..sql.plan import Join


def on_condition(node: Join) -> Column:
    """The join's keys (`=`, or `<=>` where null-safe) and its residual, over both sides' internal names."""
    conds = [F.expr(k.left).eqNullSafe(F.expr(k.right)) if k.null_safe else F.expr(k.left) == F.expr(k.right)
             for k in node.keys]
    if node.residual:
        conds.append(F.expr(node.residual))
    return reduce(lambda a, b: a & b, conds)
