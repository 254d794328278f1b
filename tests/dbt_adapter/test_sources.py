"""Which sources are published in Spark's catalog (the cases decided before Spark is asked)."""

from __future__ import annotations

from pathlib import Path

from dbt.adapters.streamjoin.sources import publish_sources


def node(name: str, meta: dict | None = None) -> dict:
    return {"name": name, "source_name": "crm", "resource_type": "source", "meta": meta or {}, "config": {}}


def test_a_source_without_declaration_or_delta_table_is_left_to_the_catalog(tmp_path: Path) -> None:
    skipped = publish_sources(None, [(node("users"), "crm.users")], state_root=str(tmp_path),
                              project_root=str(tmp_path))
    assert skipped == {"crm.users": "not a streamjoin input (no meta.streamjoin, no Delta table at its location)"}
