"""What a scheduled run of a dbt project's streaming joins does, as plain data (no Airflow).

A :class:`RunPlan` lists the models to run once per interval, in dependency order, each
with the Delta tables it writes, and the dbt tests to run after them. It is read from
dbt's ``manifest.json`` (parsed when missing or stale, see :mod:`streamjoin_airflow.manifest`); turning it
into a DAG is :mod:`streamjoin_airflow.dag`'s job.

>>> manifest = {"metadata": {"project_name": "shop"}, "nodes": {
...     "model.shop.a": {"resource_type": "model", "name": "a", "config": {"materialized": "streaming_join"},
...                      "depends_on": {"nodes": ["source.shop.s.orders"]}},
...     "model.shop.b": {"resource_type": "model", "name": "b", "config": {"materialized": "streaming_join"},
...                      "depends_on": {"nodes": ["model.shop.a"]}}}}
>>> plan = build_plan(manifest, state_root="/data/state")
>>> [(m.name, m.upstream) for m in plan.models]
[('a', ()), ('b', ('a',))]
>>> plan.models[1].changelog_uri
'file:///data/state/models/b/changelog'
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any, Mapping, Sequence

from streamjoin.errors import ConfigError

#: Where the adapter keeps a model's tables: ``<state_root>/models/<model>/<table>``.
MODELS_FOLDER = "models"


@dataclass(frozen=True)
class DbtProject:
    """A dbt project and where its streamjoin state lives.

    Attributes:
        project_dir: Folder holding ``dbt_project.yml``.
        state_root: The profile's streamjoin state root (``<local_dir>/state`` by default):
            a model's tables are ``<state_root>/models/<model>/{result,changelog}``.
        profiles_dir: Folder holding ``profiles.yml``; default ``project_dir``.
        target_path: dbt's target folder (``manifest.json``, run results); default
            ``<project_dir>/target``.
        target: The profile target to run against; default the profile's own default.
        env: Environment variables dbt runs with (e.g. ones the profile reads with ``env_var``).
    """

    project_dir: Path
    state_root: str
    profiles_dir: Path | None = None
    target_path: Path | None = None
    target: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if not (Path(self.project_dir) / "dbt_project.yml").is_file():
            problems.append(f"project_dir: no dbt_project.yml in {str(self.project_dir)!r}; "
                            "point it at the dbt project's root folder")
        if not str(self.state_root).strip():
            problems.append("state_root: must not be empty; give the profile's state root, e.g. <local_dir>/state")
        if problems:
            raise ConfigError(problems)

    @property
    def manifest_path(self) -> Path:
        return Path(self.target_path or Path(self.project_dir) / "target") / "manifest.json"


@dataclass(frozen=True)
class ModelStep:
    """One model's incremental run: what it reads from the plan, and the tables it writes."""

    name: str
    unique_id: str
    upstream: tuple[str, ...]
    result_uri: str
    changelog_uri: str


@dataclass(frozen=True)
class RunPlan:
    """The models to run once per interval, in dependency order, then the tests over them."""

    project: str
    models: tuple[ModelStep, ...]
    tests: tuple[str, ...]

    @property
    def model_names(self) -> list[str]:
        return [m.name for m in self.models]


def table_uri(state_root: str, model: str, table: str) -> str:
    """The URI of one of a model's tables (a local path becomes a ``file://`` URI)."""
    if "://" in state_root:
        return f"{state_root.rstrip('/')}/{MODELS_FOLDER}/{model}/{table}"
    return Path(os.path.abspath(state_root), MODELS_FOLDER, model, table).as_uri()


def build_plan(manifest: Mapping[str, Any], *, state_root: str,
               materializations: Sequence[str] = ("streaming_join",), select: Sequence[str] = ()) -> RunPlan:
    """The plan for every model materialized as one of `materializations` in `manifest`, or for
    those of them that `select` names (model names, or ``tag:<tag>`` for the models with that tag).

    A model's upstream are the planned models it reads, directly or through models that
    are not planned (a view between two streaming joins). Tests are those whose models
    are all planned (dbt's "cautious" indirect selection).

    >>> manifest = {"nodes": {f"model.p.{n}": {"resource_type": "model", "name": n, "tags": tags, "config": {
    ...     "materialized": "streaming_join"}} for n, tags in (("a", ["hourly"]), ("b", []), ("c", []))}}
    >>> build_plan(manifest, state_root="/s", select=["tag:hourly", "c"]).model_names
    ['a', 'c']
    """
    nodes = manifest.get("nodes", {})
    planned = {uid: n for uid, n in nodes.items()
               if n.get("resource_type") == "model" and n.get("config", {}).get("materialized") in materializations}
    if not planned:
        raise ConfigError(f"no model in project '{manifest.get('metadata', {}).get('project_name')}' is "
                          f"materialized as {' or '.join(materializations)}; set `materialized` in the models' "
                          "config, or pass the materializations to plan")
    if select:
        planned = _selected(planned, select)

    def upstream(uid: str, seen: set[str]) -> set[str]:
        found = set()
        for parent in nodes.get(uid, {}).get("depends_on", {}).get("nodes", []):
            if parent in planned:
                found.add(parent)
            elif parent in nodes and parent not in seen:
                seen.add(parent)
                found |= upstream(parent, seen)
        return found

    graph = {uid: sorted(upstream(uid, set())) for uid in sorted(planned)}
    order = TopologicalSorter(graph).static_order()
    name = {uid: planned[uid]["name"] for uid in planned}
    models = tuple(ModelStep(name=name[uid], unique_id=uid, upstream=tuple(name[p] for p in graph[uid]),
                             result_uri=table_uri(state_root, name[uid], "result"),
                             changelog_uri=table_uri(state_root, name[uid], "changelog"))
                   for uid in order)
    tests = tuple(sorted(n["name"] for n in nodes.values() if n.get("resource_type") == "test"
                         and _models_of(n, nodes) and _models_of(n, nodes) <= planned.keys()))
    return RunPlan(project=manifest.get("metadata", {}).get("project_name", ""), models=models, tests=tests)


def _selected(planned: dict[str, Any], select: Sequence[str]) -> dict[str, Any]:
    """The planned models that `select` names, by name or by ``tag:<tag>``; every selector must name one."""
    def matches(selector: str, node: Mapping[str, Any]) -> bool:
        if selector.startswith("tag:"):
            return selector[4:] in node.get("tags", [])  # (the manifest's list: config's tags and the node's)
        return node["name"] == selector

    unmatched = [s for s in select if not any(matches(s, n) for n in planned.values())]
    if unmatched:
        raise ConfigError(f"select: {', '.join(map(repr, unmatched))} names no model the plan can run (its models: "
                          f"{', '.join(sorted(n['name'] for n in planned.values()))}); give model names or tag:<tag>")
    return {uid: n for uid, n in planned.items() if any(matches(s, n) for s in select)}


def _models_of(test: Mapping[str, Any], nodes: Mapping[str, Any]) -> set[str]:
    return {p for p in test.get("depends_on", {}).get("nodes", []) if nodes.get(p, {}).get("resource_type") == "model"}


def load_plan(project: DbtProject, *, materializations: Sequence[str] = ("streaming_join",),
              parse: bool = True, select: Sequence[str] = ()) -> RunPlan:
    """The plan from the project's manifest (of the models `select` names, if given: see `build_plan`).

    With `parse` (the default) the manifest is parsed first when it is missing or stale, and read
    from the copy :func:`streamjoin_airflow.manifest.ensure_manifest` keeps; without, the project's
    ``manifest.json`` must exist.
    """
    if parse:
        from .manifest import ensure_manifest

        path = ensure_manifest(project)
    else:
        path = project.manifest_path
    if not path.is_file():
        raise ConfigError(f"no dbt manifest at {str(path)!r}: run `dbt parse --project-dir {project.project_dir} "
                          f"--target-path {path.parent}`, or load the plan with parse=True")
    return build_plan(json.loads(path.read_text()), state_root=project.state_root,
                      materializations=materializations, select=select)
