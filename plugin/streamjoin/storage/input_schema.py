"""An input's Delta table against its declaration: every column its format reads, with the declared type."""
from __future__ import annotations

import pyarrow as pa

from ..errors import InputError
from ..spec import InputSpec
from . import delta_log, formats


def check_input_schema(spec: InputSpec, model: str, *, has_state: bool | None = None,
                       version: int | None = None) -> None:
    """The input table (at `version`, else its latest) must hold every column its format reads, with
    the declared type (added columns are fine: they are carried along unread); a struct column must
    hold every declared field.

    `has_state` says whether the model has read this input before: then the table changed under
    it, and its state must be rebuilt (`--full-refresh`); on a first run the declaration is wrong
    (or the table is); None when the caller cannot tell.
    """
    actual = {f.name.lower(): f.type for f in delta_log.table_schema(spec.location, version)}
    problems = []
    for f in delta_log.arrow_schema(formats.file_schema(spec)):
        have = actual.get(f.name.lower())
        if have is None:
            problems.append(f"column '{f.name}' is missing")
        else:
            problems += differences(f.name, have, f.type)
    if not problems:
        return
    found = "; ".join(problems)
    if has_state:
        message = (f"the input's schema no longer matches its declaration: {found}. Fix the declaration, then run "
                   "the model with --full-refresh to rebuild its state from the input")
    else:
        message = (f"the input's Delta table at {spec.location} does not match its declaration: {found}. Fix the "
                   "declaration (or the table), then rerun")
        if has_state is None:
            message += "; if the model has run before, rerun it with --full-refresh to rebuild its state"
    raise InputError(message, model=model, input_name=spec.name)


def differences(path: str, have: pa.DataType, want: pa.DataType) -> list[str]:
    """How a column (or struct field) of type `have` falls short of the declared `want`, each
    problem naming the field by its path (`customer.email`)."""
    if _same(have, want):
        return []
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        fields = {have.field(i).name.lower(): have.field(i).type for i in range(have.num_fields)}
        problems = []
        for i in range(want.num_fields):
            field = want.field(i)
            inner = f"{path}.{field.name}"
            if field.name.lower() not in fields:
                problems.append(f"struct field '{inner}' is missing")
            else:
                problems += differences(inner, fields[field.name.lower()], field.type)
        return problems
    if _is_list(have) and _is_list(want):
        return differences(f"{path}[]", have.value_type, want.value_type)
    what = "column" if "." not in path and "[]" not in path else "struct field"
    return [f"{what} '{path}' is {_shown(have)}, declared {_shown(want)}"]


def _same(have: pa.DataType, want: pa.DataType) -> bool:
    if have == want:
        return True
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return True
    if pa.types.is_string(have) or pa.types.is_large_string(have) or pa.types.is_string_view(have):
        return pa.types.is_string(want) or pa.types.is_large_string(want)
    return False


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t)


def _shown(t: pa.DataType) -> str:
    """A type as Spark SQL names it (what a declaration's data_type says), else as Arrow does."""
    from pyspark.sql.pandas.types import from_arrow_type

    try:
        return from_arrow_type(t).simpleString()
    except (TypeError, NotImplementedError):
        return str(t)
