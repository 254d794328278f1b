"""What streamjoin knows about a catalog relation without Spark: the dbt node behind it and its columns.

A relation a project names is one of: a source (a Delta changelog, declared in YAML), a
``streaming_join`` model's result, ``<model>__changelog``, ``<model>__batch`` or
``<model>__batch_on_time`` (views over the model's Delta tables), or anything else (Spark's
catalog alone knows it). For all but the last the columns are read from the declaration or the
Delta log with delta-rs, so ``dbt compile`` (a generic test that lists a model's columns, a unit
test's fixtures) needs no SparkSession.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from pyspark.sql.pandas.types import from_arrow_type
from streamjoin.storage import delta_log
from streamjoin.storage.tables import ModelTables

from dbt.adapters.streamjoin.model_code import MATERIALIZATION, MODELS_FOLDER

#: Suffixes of the views published next to a model's result, and the model table each reads.
_MODEL_VIEWS = {"": "result", "__changelog": "changelog", "__batch": "result", "__batch_on_time": "result"}
#: Columns of a model's Delta tables its views do not show.
_HIDDEN = ("_bucket",)

Columns = List[Tuple[str, str]]


def _key(schema: Optional[str], identifier: Optional[str]) -> Tuple[str, str]:
    return ((schema or "").lower(), (identifier or "").lower())


def find_source(manifest: Any, schema: Optional[str], identifier: Optional[str]) -> Optional[Dict[str, Any]]:
    """The manifest's source node published as ``schema.identifier``, if any."""
    wanted = _key(schema, identifier)
    for source in (getattr(manifest, "sources", None) or {}).values():
        if _key(source.schema, source.identifier) == wanted:
            return source.to_dict()
    return None


def model_tables(manifest: Any, schema: Optional[str], identifier: Optional[str], *,
                 state_root: str) -> Optional[Tuple[ModelTables, str]]:
    """The Delta tables of the ``streaming_join`` model whose result, ``__changelog``, ``__batch`` or
    ``__batch_on_time`` view is ``schema.identifier``, and which of them (the view's suffix)."""
    nodes = [n for n in (getattr(manifest, "nodes", None) or {}).values()
             if n.resource_type == "model" and n.config.materialized == MATERIALIZATION]
    for suffix in _MODEL_VIEWS:
        for node in nodes:
            if _key(node.schema, f"{node.alias}{suffix}") == _key(schema, identifier):
                return ModelTables(os.path.join(state_root, MODELS_FOLDER), node.name), suffix
    return None


def model_table(manifest: Any, schema: Optional[str], identifier: Optional[str], *,
                state_root: str) -> Optional[str]:
    """The Delta table behind a ``streaming_join`` model's result or one of its views."""
    found = model_tables(manifest, schema, identifier, state_root=state_root)
    return None if found is None else getattr(found[0], _MODEL_VIEWS[found[1]])


def delta_columns(path: str) -> Columns:
    """A model table's columns (Spark SQL types) as its views show them; none when it does not exist yet."""
    if not delta_log.exists(path):
        return []
    schema = delta_log.table_schema(path)
    return [(f.name, from_arrow_type(f.type).simpleString()) for f in schema if f.name not in _HIDDEN]

