"""The generated run code embeds project text (names, SQL, declarations) only as escaped literals:
names with quotes, backticks, backslashes and line breaks reach `api.run_model` unchanged and
cannot add a statement to the code."""
from __future__ import annotations

import ast

import pytest

from dbt.adapters.streamjoin.model_code import model_code
from streamjoin import api

HOSTILE = "we'ird \"name\" `tick` \\ back\nline\r\x0bstill \u2028 here\"\"\" ''' #)"


def source(name: str, column: str) -> dict:
    node = {"name": name, "resource_type": "source", "source_name": "raw'\n`src`", "config": {},
            "columns": {column: {"name": column, "data_type": "int"}}}
    return {"node": node, "relation": f"`raw``\n`.`{name.replace('`', '``')}`"}


@pytest.fixture
def code_and_inputs():
    inputs = [source(HOSTILE, f"col{HOSTILE}"), source("plain", "k")]
    sql = f"SELECT a.`col{HOSTILE.replace('`', '``')}` FROM `{HOSTILE.replace('`', '``')}` a\n-- {HOSTILE}\nJOIN plain p ON 1 = 1"
    model = {"unique_id": f"model.p.{HOSTILE}", "name": HOSTILE, "compiled_code": sql,
             "config": {"materialized": "streaming_join", "note": HOSTILE}}
    code = model_code(model, inputs, state_root=f"/tmp/{HOSTILE}", project_root="/p", relation=f"`db`.`{HOSTILE}`",
                      full_refresh=False)
    return code, model, inputs


def test_generated_code_has_only_its_own_statements(code_and_inputs):
    code, _, _ = code_and_inputs
    tree = ast.parse(code)
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds == ["ImportFrom", "Assign", "Assign", "Assign", "Assign"], kinds  # no print: dbt's OK line has the summary
    assigned = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets]
    assert assigned == ["SQL", "INPUTS", "CONFIG", "streamjoin_report"]


def test_project_text_reaches_run_model_unchanged(code_and_inputs, monkeypatch):
    code, model, inputs = code_and_inputs
    seen = {}

    class Report:
        def summary(self) -> str:
            return "ok"

    def run_model(spark, **kwargs):
        seen.update(kwargs, spark=spark)
        return Report()

    monkeypatch.setattr(api, "run_model", run_model)
    exec(compile(code, "<model code>", "exec"), {"spark": "SESSION"})
    assert seen["spark"] == "SESSION"
    assert seen["name"] == HOSTILE
    assert seen["sql"] == model["compiled_code"]
    assert seen["relation"] == f"`db`.`{HOSTILE}`"
    assert seen["root"].startswith(f"/tmp/{HOSTILE}")
    assert seen["config"]["note"] == HOSTILE
    declared = seen["inputs"][HOSTILE]
    assert declared["relation"] == inputs[0]["relation"]
    assert declared["columns"] == [{"name": f"col{HOSTILE}", "type": "int"}]
