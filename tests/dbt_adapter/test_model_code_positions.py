"""A compile error's line is the model file's, also below a `{{ config(...) }}` at the top.

dbt renders `{{ config(...) }}` to nothing: a one-line config leaves an empty first line, a
config over three lines leaves one empty line for three. The generated run code keeps the
leading blank lines and puts back the swallowed ones (`model_code.file_lines`); the same model
through real dbt is in tests/dbt/test_dbt_failures.py.
"""
from __future__ import annotations

import pytest

from dbt.adapters.streamjoin.model_code import model_code
from streamjoin import api
from streamjoin.errors import CompileError

RAW = ("{{ config(\n"
       "    materialized='streaming_join'\n"
       ") }}\n"
       "\n"
       "select o.id, count(*) as n\n"
       "from {{ source('shop', 'orders') }} o join {{ source('shop', 'prices') }} p on o.id = p.id\n"
       "group by o.id\n")
# what dbt compiles RAW to: the config is gone, the sources are relation names
COMPILED = ("\n"
            "\n"
            "select o.id, count(*) as n\n"
            "from `shop`.`orders` o join `shop`.`prices` p on o.id = p.id\n"
            "group by o.id\n")


def source(name: str, *columns: str) -> dict:
    node = {"name": name, "resource_type": "source", "source_name": "shop", "config": {},
            "meta": {"streamjoin": {"location": f"/nonexistent/{name}"}},
            "columns": {c: {"name": c, "data_type": "int"} for c in columns}}
    return {"node": node, "relation": f"`shop`.`{name}`"}


def test_group_by_is_reported_on_its_line_of_the_model_file(monkeypatch):
    model = {"unique_id": "model.p.totals", "name": "totals", "raw_code": RAW, "compiled_code": COMPILED,
             "config": {"materialized": "streaming_join"}}
    code = model_code(model, [source("orders", "id", "amount"), source("prices", "id", "price")],
                      state_root="/tmp/state", project_root="/p", relation="`db`.`totals`", full_refresh=False)
    seen = {}

    def run_model(spark, **kwargs):  # compile as the run does, without Spark
        seen.update(kwargs)
        api.compile_model(name=kwargs["name"], sql=kwargs["sql"], inputs=kwargs["inputs"], config=kwargs["config"])

    monkeypatch.setattr(api, "run_model", run_model)
    with pytest.raises(CompileError) as err:
        exec(compile(code, "<model code>", "exec"), {"spark": None})
    assert RAW.splitlines()[6].startswith("group by o.id")  # line 7 of the file, `o` in column 10
    assert "GROUP BY is not supported in a streaming join at line 7, column 10" in str(err.value), str(err.value)
    assert seen["sql"].splitlines()[6] == "group by o.id"
