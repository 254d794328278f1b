"""Property: a batch of valid changes with malformed rows mixed in fails the run with a message that
names the model, the input and what is wrong, and leaves every table at its version.

Malformations: unknown and NULL row kinds, retractions (-D, -U) of rows never inserted or of more
copies than held, values of the wrong type, a value too large for the declared type, a missing column.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from scenario import Scenario, insert
from streamjoin import InputError
from streamjoin.runtime.run import run_once

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
HELD = {"l": [(1, 10), (2, 20)], "r": [(1, 100)]}
VALID = st.lists(st.tuples(st.sampled_from(["+I"]), st.integers(1, 4), st.integers(0, 99)), max_size=4)

ROW_KINDS = st.sampled_from(["+X", "", "I", None, "-u"])


def arrow_rows(rows: list[tuple]) -> pa.Table:
    """(row kind, k, v) tuples as a batch of input l."""
    return pa.table({"k": pa.array([r[1] for r in rows], pa.int32()), "v": pa.array([r[2] for r in rows], pa.int32()),
                     "_row_kind": pa.array([r[0] for r in rows], pa.string())})


@st.composite
def hostile_batch(draw) -> tuple[str, pa.Table, list[str]]:
    """(what is wrong, the batch for input l, fragments the error must contain). A Delta column has
    one type, so a wrong type, a too large value or a missing column rewrites the table's schema."""
    valid = draw(VALID)
    what = draw(st.sampled_from(["row kind", "never inserted", "too many copies", "wrong type", "too large",
                                 "missing column"]))
    if what == "row kind":
        kind = draw(ROW_KINDS)
        bad = [(kind, 3, 30)]
        return what, arrow_rows(valid + bad), ["row kind", "null" if kind is None else f'"{kind}"']
    if what == "never inserted":
        kind = draw(st.sampled_from(["-D", "-U"]))
        bad = [(kind, 7, draw(st.integers(0, 99)))]
        return what, arrow_rows(valid + bad), ["never held", '"k":7']
    if what == "too many copies":
        kind = draw(st.sampled_from(["-D", "-U"]))
        return what, arrow_rows(valid + [(kind, 2, 20), (kind, 2, 20)]), ["retracted 2 time(s), held 1"]
    rows = valid + [("+I", 3, 30)]
    if what == "wrong type":
        table = arrow_rows(rows).set_column(1, "v", pa.array([str(r[2]) for r in rows], pa.string()))
        return what, table, ["column 'v'", "--full-refresh"]
    if what == "too large":
        table = arrow_rows(rows).set_column(1, "v", pa.array([2 ** 40 + r[2] for r in rows], pa.int64()))
        return what, table, ["column 'v'", "--full-refresh"]
    return what, arrow_rows(rows).drop_columns(["v"]), ["column 'v'", "--full-refresh"]


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=hostile_batch())
def test_a_hostile_batch_fails_cleanly(spark, tmp_path_factory, batch):
    what, table, fragments = batch
    note(f"{what}: {table.to_pylist()}")
    m = Scenario(spark, tmp_path_factory.mktemp("hostile"), SQL, name="hostile_model", **INPUTS)
    m.run(l=[insert(*r) for r in HELD["l"]], r=[insert(*r) for r in HELD["r"]])
    before = m.versions()
    rewrites_schema = table.schema != arrow_rows([]).schema
    write_deltalake(m.runner.specs["l"].location, table, mode="overwrite" if rewrites_schema else "append",
                    schema_mode="overwrite" if rewrites_schema else None)
    with pytest.raises(InputError) as err:
        run_once(spark, m.plan, m.tables)
    message = str(err.value)
    assert "model 'hostile_model'" in message and "input 'l'" in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert m.versions() == before, "a failed run must leave every table at its version"
