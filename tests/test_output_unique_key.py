"""A model's `output_unique_key` is checked where it is declared: a run that would leave two rows
for one key fails, naming the model, the key, a row and the fix, and commits nothing."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle import batch_result
from scenario import Scenario, delete, insert
from streamjoin import InputError
from test_regular_properties import changelog_runs

SQL = "SELECT o.id, o.item, s.sid FROM o JOIN s ON o.id = s.oid"


def test_a_key_with_two_rows_fails_the_declaring_model_and_commits_nothing(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, name="shipped", config={"output_unique_key": ["id"]},
                 o=[("id", "int"), ("item", "string")], s=[("sid", "int"), ("oid", "int")])
    m.run(o=[insert(1, "pen"), insert(2, "ink")], s=[insert(10, 1)])
    assert m.result == {(1, "pen", 10): 1}
    before = m.versions()

    # order 1 already has a row; two more shipments would give it 3 (order 2's first row is fine)
    with pytest.raises(InputError) as err:
        m.run(s=[insert(11, 1), insert(12, 1), insert(20, 2)])
    message = str(err.value)
    assert message.startswith("model 'shipped': output_unique_key (id) is not unique"), message
    assert 'key {"id":1} would have 3 rows in the result, e.g. {"id":1,"item":"pen","sid":1' in message, message
    assert "drop output_unique_key" in message and "nothing was committed" in message
    assert m.versions() == before, "a failed run must leave every table at its version"

    # the extra shipments are withdrawn and order 1's shipment replaced: one row per key again
    m.run(s=[delete(11, 1), delete(12, 1), delete(10, 1), insert(13, 1)])
    assert m.result == {(1, "pen", 13): 1, (2, "ink", 20): 1}


KEYED = "SELECT l.k, l.s, r.w FROM l LEFT JOIN r ON l.k = r.k"
KEYED_INPUTS = {"l": [("k", "int"), ("s", "string")], "r": [("k", "int"), ("w", "int")]}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=changelog_runs(runs=3, rows={
    "l": st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, "a", "b"])),
    "r": st.tuples(st.sampled_from([None, 1, 2]), st.integers(0, 1))}))
def test_a_run_fails_exactly_when_the_batch_result_repeats_a_key(spark, tmp_path_factory, runs):
    """The check reads the result's rows of the keys a run adds rows to (NULL parts included: NULL-safe
    equality); a row it missed would let a repeated key through."""
    m = Scenario(spark, tmp_path_factory.mktemp("uk"), KEYED, config={"output_unique_key": ["k", "s"]}, **KEYED_INPUTS)
    seen: dict[str, list] = {"l": [], "r": []}
    for i, run in enumerate(runs):
        for name, rows in run.items():
            seen[name] += rows
        expected = batch_result(spark, KEYED, KEYED_INPUTS, seen)
        per_key = Counter()
        for (k, s, _), n in expected.items():
            per_key[(k, s)] += n
        if max(per_key.values(), default=0) > 1:
            with pytest.raises(InputError, match="output_unique_key \\(k, s\\) is not unique"):
                m.run(**run)
            return
        m.run(**run)
        assert m.result == expected, f"run {i}"
        if m.report.status == "committed":  # (a run without changes commits nothing)
            assert m.report.metrics["spark_jobs"] == 1, "the keyed read of the result joins in the run's one job"
