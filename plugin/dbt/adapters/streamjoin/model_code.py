"""Turn a ``streaming_join`` model and its dbt inputs into the Python code that runs it.

The ``streaming_join`` materialization hands this module the model node and, for each node it
depends on, the graph node and its rendered relation. Out comes readable PySpark code that
calls :func:`streamjoin.api.run_model` with plain dicts; dbt writes it to ``target/run/`` and
the adapter executes it in-process (see ``python_submission``). Declarations are passed on as
written: validating them is streamjoin's job, so every problem surfaces as one dbt error.

Input declarations in dbt YAML (sources, or models used as inputs)::

    sources:
      - name: shop
        tables:
          - name: orders
            meta:
              streamjoin:
                changelog_format: changelog   # or append, cdf, debezium, upsert
                unique_key: [order_id]        # required for upsert
                event_time: ordered_at        # or the source's config.event_time
                watermark_delay: 5 seconds
                op_column: _row_kind          # changelog (default _row_kind), debezium (default op)
                delete_column: is_deleted     # upsert: a true flag deletes the key
                sequence_column: updated_seq  # upsert: orders a key's versions within a run
                location: path/to/delta       # default <state_root>/sources/<source>/<table>
            columns:                          # optional: else read from the Delta table
              - name: order_id
                data_type: bigint
"""

from __future__ import annotations

import dataclasses
import os
import pprint
import re
from typing import Any, Dict, FrozenSet, List, Mapping, Optional

from dbt.adapters.spark.impl import SparkConfig
from dbt.artifacts.resources import ModelConfig as DbtModelConfig

#: The key under a node's ``meta`` holding its streamjoin declaration.
META_KEY = "streamjoin"
#: Folder (under the adapter's state root) of every model's tables.
MODELS_FOLDER = "models"
#: Folder (under the adapter's state root) of source tables without a declared location.
SOURCES_FOLDER = "sources"
MATERIALIZATION = "streaming_join"


def dbt_config_keys() -> FrozenSet[str]:
    """Config keys that belong to dbt or dbt-spark, so streamjoin's validation skips them."""
    keys = {"submission_method", "python_version"}
    for cls in (DbtModelConfig, SparkConfig):
        for f in dataclasses.fields(cls):
            keys.add(f.name)
            keys.add(f.metadata.get("alias") or f.name)
    return frozenset(keys)


def streamjoin_meta(node: Mapping[str, Any]) -> Dict[str, Any]:
    """The node's streamjoin declaration (source-level, table-level and config meta merged)."""
    merged: Dict[str, Any] = {}
    config = node.get("config") or {}
    for meta in (node.get("source_meta"), node.get("meta"), config.get("meta")):
        declared = (meta or {}).get(META_KEY)
        if declared:
            merged.update(declared)
    return merged


def _columns(node: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The node's YAML columns when they declare the schema (every one has a data_type).

    Columns listed without types are documentation (or tests) only: the schema then comes
    from the input's Delta table.
    """
    columns = list((node.get("columns") or {}).values())
    if not columns or not all(c.get("data_type") for c in columns):
        return []
    return [{"name": c["name"], "type": c["data_type"]} for c in columns]


def input_name(node: Mapping[str, Any], taken: FrozenSet[str]) -> str:
    """The name an input goes by: the table or model name, the source's name added on a clash."""
    name = node["name"]
    if name.lower() in taken and node["resource_type"] == "source":
        name = f"{node['source_name']}_{name}"
    return name


def input_declaration(node: Mapping[str, Any], relation: str, *, state_root: str,
                      project_root: str) -> Dict[str, Any]:
    """What streamjoin needs to know about one input, from its dbt node."""
    declared = streamjoin_meta(node)
    columns = _columns(node)
    decl: Dict[str, Any] = {"relation": relation}
    if node["resource_type"] == "source":
        decl["kind"] = "source"
        default = os.path.join(state_root, SOURCES_FOLDER, node["source_name"], node["name"])
        event_time = (node.get("config") or {}).get("event_time")
        if event_time and "event_time" not in declared:
            decl["event_time"] = event_time
    else:
        config = node.get("config") or {}
        materialized = config.get("materialized")
        decl["kind"] = "streaming_join" if materialized == MATERIALIZATION else "model"
        default = os.path.join(state_root, MODELS_FOLDER, node["name"], "changelog")
        if materialized == MATERIALIZATION:
            decl["changelog_format"] = "changelog"
            key = config.get("output_unique_key")
            if key:
                decl["unique_key"] = [key] if isinstance(key, str) else list(key)
        elif "location" not in declared:
            default = ""  # streamjoin reports the missing location, naming the input
    if columns:
        decl["columns"] = columns
    decl.update(declared)
    location = decl.get("location") or default
    if location and not ("://" in location or os.path.isabs(location)):
        location = os.path.normpath(os.path.join(project_root, location))
    decl["location"] = location
    return decl


def run_arguments(model: Mapping[str, Any], inputs: List[Mapping[str, Any]], *, state_root: str,
                  project_root: str, relation: str, full_refresh: bool) -> Dict[str, Any]:
    """The arguments of :func:`streamjoin.api.run_model` for one run of a ``streaming_join`` model."""
    declarations: Dict[str, Dict[str, Any]] = {}
    for item in inputs:
        name = input_name(item["node"], frozenset(n.lower() for n in declarations))
        declarations[name] = input_declaration(item["node"], item["relation"], state_root=state_root,
                                               project_root=project_root)
    own_keys = dbt_config_keys()
    config = {k: v for k, v in (model.get("config") or {}).items() if k not in own_keys}
    return {
        "name": model["name"],
        "sql": file_lines(model.get("raw_code") or "", model.get("compiled_code") or ""),
        "inputs": declarations,
        "config": config,
        "root": os.path.join(state_root, MODELS_FOLDER),
        "relation": relation,
        "full_refresh": bool(full_refresh),
    }


def model_code(model: Mapping[str, Any], inputs: List[Mapping[str, Any]], *, state_root: str,
               project_root: str, relation: str, full_refresh: bool) -> str:
    """The Python code of one incremental run of a ``streaming_join`` model."""
    args = run_arguments(model, inputs, state_root=state_root, project_root=project_root, relation=relation,
                         full_refresh=full_refresh)
    return _render(model, args, _explain(args))


def explain(model: Mapping[str, Any], inputs: List[Mapping[str, Any]], *, state_root: str, project_root: str,
            relation: str) -> str:
    """What the model computes and keeps, its state's figures after the last run, and whether its
    current SQL and configuration still fit that state (see ``streamjoin.explain``)."""
    from streamjoin.explain import describe
    from streamjoin.storage.tables import ModelTables

    args = run_arguments(model, inputs, state_root=state_root, project_root=project_root, relation=relation,
                         full_refresh=False)
    return describe(_plan(args), ModelTables(args["root"], args["name"]))


#: Jinja at the top of a model file that renders to nothing: `{{ config(...) }}`, `{# ... #}`,
#: `{% set ... %}` and `{% do ... %}` (with or without whitespace control).
_SILENT_HEAD = re.compile(r"\s*(?:\{\{-?\s*config\s*\(.*?\)\s*-?\}\}|\{#.*?#\}|\{%-?\s*(?:set|do)\b.*?-?%\})", re.S)


def file_lines(raw: str, compiled: str) -> str:
    r"""The compiled SQL with the lines the model file has above it, so a compile error's line is the
    file's: trailing blanks go; leading blank lines stay, and the lines a multi-line (or
    whitespace-controlled) ``{{ config(...) }}`` at the top of the file swallowed come back as
    blank lines.

    >>> raw = "{{ config(\n    materialized='streaming_join'\n) }}\n\nselect 1\n"
    >>> file_lines(raw, "\n\nselect 1\n")
    '\n\n\n\nselect 1'
    >>> file_lines("select 1", "select 1  \n")
    'select 1'
    """
    head = 0
    while True:
        found = _SILENT_HEAD.match(raw, head)
        if not found:
            break
        head = found.end()
    head += len(raw[head:]) - len(raw[head:].lstrip())
    body = compiled.rstrip()
    blank = body[:len(body) - len(body.lstrip())]
    kept = blank.count("\n")
    text = body[blank.rfind("\n") + 1:]  # the first line of SQL keeps its indentation (its columns)
    return "\n" * max(raw.count("\n", 0, head), kept) + text if text else ""


def _explain(args: Mapping[str, Any]) -> Optional[str]:
    """The plan outline and what the model keeps, or None when the model does not compile (the run
    reports why)."""
    from streamjoin.errors import StreamJoinError
    from streamjoin.explain import describe

    try:
        return describe(_plan(args))
    except StreamJoinError:
        return None


def _plan(args: Mapping[str, Any]) -> Any:
    """The join plan of the run `args` describe (see ``run_arguments``)."""
    from streamjoin.api import compile_model

    return compile_model(name=args["name"], sql=args["sql"], inputs=args["inputs"], config=args["config"])


def _literal(value: Any, indent: int) -> str:
    text = pprint.pformat(value, indent=1, width=100, sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


def _string_lines(text: str, indent: int) -> str:
    """A string as adjacent Python literals, one per source line (readable, and escaped by repr)."""
    lines = text.splitlines(keepends=True) or [""]
    return ("\n" + " " * indent).join(repr(line) for line in lines)


def _render(model: Mapping[str, Any], args: Mapping[str, Any], plan: Optional[str]) -> str:
    """The run's code. Every value from the project (names, SQL, declarations) enters as a Python
    literal made by repr/pprint; comments get it only with line breaks escaped."""
    comment = repr(model["unique_id"])
    # splitlines breaks at every character Python ends a comment at, so no line escapes its `#`
    plan_lines = "\n".join(f"#   {line}" for line in (plan or "(does not compile; the run reports why)").splitlines())
    return f'''# streamjoin: one incremental run of model {comment} (materialized: streaming_join).
# Generated by dbt-streamjoin; dbt runs it in its own process with `spark` bound to its SparkSession.
#
# Join plan and what it keeps (`python -m streamjoin explain` adds the state's figures):
{plan_lines}
from streamjoin import api

SQL = (
    {_string_lines(args["sql"], 4)}
)

INPUTS = {_literal(args["inputs"], 9)}

CONFIG = {_literal(args["config"], 9)}

streamjoin_report = api.run_model(
    spark,
    name={args["name"]!r},
    sql=SQL,
    inputs=INPUTS,
    config=CONFIG,
    root={args["root"]!r},
    relation={args["relation"]!r},
    full_refresh={args["full_refresh"]!r},
)
'''
