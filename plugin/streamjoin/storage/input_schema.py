"""An input's Delta table against its declaration: every column its format reads, with the declared type."""
from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from ..errors import InputError
from ..spec import InputSpec
from . import delta_log, formats


def check_input_schema(spec: InputSpec, model: str) -> None:
    """The input table must still hold every column its format reads, with the declared type
    (added columns are fine: they are carried along unread)."""
    actual = {f.name.lower(): f.type for f in pa.schema(DeltaTable(spec.location).schema().to_arrow())}
    problems = []
    for f in delta_log.arrow_schema(formats.file_schema(spec)):
        have = actual.get(f.name.lower())
        if have is None:
            problems.append(f"column '{f.name}' is missing")
        elif not _compatible(have, f.type):
            problems.append(f"column '{f.name}' is {have}, declared {f.type}")
    if problems:
        raise InputError("the input's schema no longer matches its declaration: " + "; ".join(problems)
                         + ". Fix the declaration, then run with --full-refresh to rebuild state",
                         model=model, input_name=spec.name)


def _compatible(have: pa.DataType, want: pa.DataType) -> bool:
    if have == want:
        return True
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return True
    if pa.types.is_string(have) or pa.types.is_large_string(have) or pa.types.is_string_view(have):
        return pa.types.is_string(want) or pa.types.is_large_string(want)
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        fields = {have.field(i).name.lower(): have.field(i).type for i in range(have.num_fields)}
        return all(want.field(i).name.lower() in fields and _compatible(fields[want.field(i).name.lower()], want.field(i).type)
                   for i in range(want.num_fields))
    return False
