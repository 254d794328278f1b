"""A model's changelog as Spark Declarative Pipelines' Auto CDC (SCD type 1) reads it.

With an `output_unique_key`, a run writes at most one changelog row per key besides `-U` rows (the
old row of a `+U`): an insert or update carries the key's new row, a `-D` deletes it. So the
changelog without its `-U` rows, keyed by the unique key and sequenced by `_run_id`, is an Auto CDC
source whose target replays to the model's result:

    dp.create_auto_cdc_flow(target="orders", source="orders_changes", **auto_cdc_flow_arguments(plan))

with `orders_changes` a streaming view of `auto_cdc_source(<the changelog>)`.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from .errors import ConfigError
from .spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from .sql.plan import JoinPlan
from .types import RowKind, q, text


def auto_cdc_flow_arguments(plan: JoinPlan) -> dict[str, Any]:
    """`create_auto_cdc_flow`'s keys, sequencing, deletes and excluded columns for the model."""
    if not plan.config.output_unique_key:
        raise ConfigError("a changelog maps onto Auto CDC by its output_unique_key: declare one (a model without "
                          "it holds counted duplicate rows, which SCD type 1 cannot represent)", model=plan.model)
    return {"keys": list(plan.config.output_unique_key), "sequence_by": RUN_ID_COLUMN,
            "apply_as_deletes": f"{q(ROW_KIND_COLUMN)} = {text(RowKind.DELETE.value)}",
            "except_column_list": [ROW_KIND_COLUMN, RUN_ID_COLUMN]}


def auto_cdc_source(changelog: DataFrame) -> DataFrame:
    """The changelog rows Auto CDC reads: every row but the `-U` ones."""
    return changelog.where(f"{q(ROW_KIND_COLUMN)} <> {text(RowKind.UPDATE_BEFORE.value)}")
