"""A run's own values (its id, its clock, its watermarks) in the Spark plans it builds, kept out of
the Java code Spark generates for them.

Spark writes an integer or timestamp literal into the source of the code it generates for a stage,
and caches compiled code by its source: a plan that differs from the last run's only by such a value
compiles every stage again (Janino), and the JVM compiles the new classes' hot methods again. A
decimal literal is passed to the generated code as an object instead, so a value made as a decimal
and cast to a long leaves the source the same run after run, as long as the optimizer does not fold
the cast into a long literal: a run's plans are optimized without `ConstantFolding` (`runtime.run.sized`).
"""
from __future__ import annotations

from decimal import Decimal

from pyspark.sql import Column
from pyspark.sql import functions as F

#: The optimizer rule that would fold a run value back into a literal of its type.
CONSTANT_FOLDING = "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"


def run_value(value: int) -> Column:
    """`value` as a long column whose generated code reads it from the plan's objects."""
    return F.lit(Decimal(value)).cast("long")
