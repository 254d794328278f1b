"""A model's `output_unique_key` is checked where it is declared: a run that would leave two rows
for one key fails, naming the model, the key, a row and the fix, and commits nothing."""
from __future__ import annotations

import pytest

from scenario import Scenario, delete, insert
from streamjoin import InputError

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
