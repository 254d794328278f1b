"""The generic tests of macros/tests.sql rendered as dbt renders them, for tests that run their SQL in Spark.

dbt turns `{% test x(model) %}` into a macro `test_x`, gives it `api.Relation`, `adapter`, `execute` and
`return`, and resolves `streamjoin.<macro>` in the package's own macros; the stand-ins here do the same,
with the adapter methods the tests call answered by Spark and streamjoin's API.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Mapping

import jinja2

from streamjoin.api import batch_views_agree
from streamjoin.storage.tables import ModelTables

MACROS = Path(__file__).resolve().parents[1] / "macros" / "tests.sql"


@dataclass(frozen=True)
class Relation:
    """What `api.Relation.create` gives a generic test in dbt: a schema-qualified name (or a bare one)."""

    schema: str | None
    identifier: str

    @classmethod
    def create(cls, *, schema: str | None, identifier: str) -> "Relation":
        return cls(schema, identifier)

    def render(self) -> str:
        return f"{self.schema}.{self.identifier}" if self.schema else self.identifier

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class SparkAdapter:
    """The adapter methods the generic tests call, answered as the streamjoin adapter answers them
    (`models`: the Delta tables of the streaming_join models, by relation)."""

    spark: object
    models: Mapping[str, ModelTables]

    def get_columns_in_relation(self, relation: Relation) -> list:
        return list(self.spark.table(str(relation)).schema.fields)

    @staticmethod
    def quote(name: str) -> str:
        return f"`{name}`"

    def streamjoin_batch_views_agree(self, relation: Relation) -> bool:
        tables = self.models.get(relation.render())
        return tables is not None and batch_views_agree(tables)


def generic_test_sql(spark, name: str, relation: Relation, models: Mapping[str, ModelTables] | None = None) -> str:
    """The SQL of the generic test `name` for `relation` (`models`: as `SparkAdapter` takes them)."""
    text = re.sub(r"{%-?\s*test\s+(\w+)\(", r"{% macro test_\1(", MACROS.read_text())
    text = re.sub(r"{%-?\s*endtest\s*-?%}", "{% endmacro %}", text)
    package = SimpleNamespace()
    template = jinja2.Environment(extensions=["jinja2.ext.do"]).from_string(
        text, globals={"adapter": SparkAdapter(spark, models or {}), "api": SimpleNamespace(Relation=Relation),
                       "execute": True, "return": lambda value: value, "streamjoin": package})
    package.__dict__.update({n: getattr(template.module, n) for n in dir(template.module) if not n.startswith("_")})
    return str(getattr(template.module, f"test_{name}")(model=relation))
