"""Bad input found inside a Spark job, raised on the driver as an `InputError`.

A run checks its rows where they flow (no job of its own for it): `fail_when` is a filter
condition that fails the job on the first offending row with a message built from that row.
The message travels through Spark's error text, encoded; `raised` finds it in the failure
and gives back the `InputError` naming the model, the input, the row and the fix.

>>> import base64, json
>>> body = json.dumps({"model": "m", "input": "orders", "message": "a bad row: {\\"id\\":1}"})
>>> text = "Job aborted ... [USER_RAISED_EXCEPTION] " + START + base64.b64encode(body.encode()).decode() + END
>>> str(raised(Exception(text)))
'model \\'m\\', input \\'orders\\': a bad row: {"id":1}'
"""
from __future__ import annotations

import base64
import json
import re
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .errors import InputError
from .types import RowKind

START, END = "streamjoin-input-error[", "]"
_ENCODED = re.compile(re.escape(START) + r"([A-Za-z0-9+/=\s]+)" + re.escape(END))


def user_struct(columns: Sequence[str]) -> Column:
    """A struct of internal columns (`<input>__<name>`) under the names the user wrote, for messages."""
    return F.struct(*[F.col(c).alias(c.split("__", 1)[-1]) for c in columns])


def retraction_examples(rows: DataFrame, columns: Sequence[str]) -> str:
    """Up to three of the rows whose row kind (`_kind`) is not an insertion, as "kind {row}" text for
    an error saying an input must be append-only (one small job, on that failure path only)."""
    shown = rows.where(F.col("_kind") != RowKind.INSERT.value).limit(3).select(
        F.col("_kind").alias("kind"), F.to_json(user_struct(columns)).alias("row")).collect()
    return "; ".join(f"{r['kind']} {r['row']}" for r in shown)


def fail_when(test: Column, message: Column, *, model: str, input_name: Column | str) -> Column:
    """True for every row; fails the Spark job at the first row where `test` holds, with `message`."""
    source = F.lit(input_name) if isinstance(input_name, str) else input_name
    body = F.to_json(F.struct(F.lit(model).alias("model"), source.alias("input"), message.alias("message")))
    failure = F.raise_error(F.concat(F.lit(START), F.base64(F.encode(body, "UTF-8")), F.lit(END)))
    return F.when(test, failure.isNull()).otherwise(F.lit(True))


def raised(exc: BaseException) -> InputError | None:
    """The InputError that `fail_when` raised inside the Spark job `exc` reports, if any."""
    found = _ENCODED.search(str(exc))
    if not found:
        return None
    body = json.loads(base64.b64decode(re.sub(r"\s", "", found.group(1))).decode("utf-8"))
    return InputError(body["message"], model=body["model"], input_name=body["input"])
