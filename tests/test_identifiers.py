"""Names and values are never spliced into SQL unescaped: a model over a column whose name holds a
quote, a double quote, a backtick and a line break, selected with `*` and under such an alias, with
string literals holding quotes, runs and keeps every name and value intact."""
from __future__ import annotations

from deltalake import DeltaTable

from scenario import Scenario, insert
from streamjoin.types import q

NAME = "we`i'rd\"\nc"
SQL = (f"SELECT l.*, r.w AS {q('w ' + NAME)} FROM l LEFT JOIN r "
       f"ON l.k = r.k AND l.{q(NAME)} <> 'x\\'y' AND l.{q(NAME)} <> \"`\"")


def test_hostile_names_and_values_survive_a_run(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, name="identifiers", l=[("k", "int"), (NAME, "string")], r=[("k", "int"), ("w", "int")])
    m.run(l=[insert(1, "a'b`c\nd"), insert(2, "x'y"), insert(3, "`")], r=[insert(1, 10), insert(2, 20), insert(3, 30)])
    assert m.changelog == {(1, "a'b`c\nd", 10): 1, (2, "x'y", None): 1, (3, "`", None): 1}
    assert DeltaTable(m.tables.result).schema().to_arrow().names[:3] == ["k", NAME, "w " + NAME]
