"""Relations streamjoin knows without Spark: the node behind a catalog name, and its columns."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
from deltalake import write_deltalake

from dbt.adapters.streamjoin import relations


def model(name: str, materialized: str = "streaming_join", alias: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(resource_type="model", name=name, alias=alias or name, schema="analytics",
                           config=SimpleNamespace(materialized=materialized))


def source(name: str) -> SimpleNamespace:
    return SimpleNamespace(schema="shop", identifier=name, to_dict=lambda: {"name": name})


MANIFEST = SimpleNamespace(
    nodes={"model.p.joined": model("joined", alias="joined_v2"), "model.p.plain": model("plain", "table")},
    sources={"source.p.shop.orders": source("orders")},
)


def test_a_models_three_views_map_to_its_delta_tables(tmp_path: Path) -> None:
    root = str(tmp_path)
    home = tmp_path / "models" / "joined"
    assert relations.model_table(MANIFEST, "analytics", "joined_v2", state_root=root) == str(home / "result")
    assert relations.model_table(MANIFEST, "ANALYTICS", "joined_v2__changelog", state_root=root) == str(home / "changelog")
    assert relations.model_table(MANIFEST, "analytics", "joined_v2__batch", state_root=root) == str(home / "result")
    assert relations.model_table(MANIFEST, "analytics", "joined", state_root=root) is None  # its alias names it
    assert relations.model_table(MANIFEST, "analytics", "plain", state_root=root) is None  # not a streaming_join


def test_sources_are_found_by_schema_and_identifier() -> None:
    assert relations.find_source(MANIFEST, "SHOP", "orders") == {"name": "orders"}
    assert relations.find_source(MANIFEST, "analytics", "orders") is None


def test_columns_come_from_the_delta_log_without_the_bucket(tmp_path: Path) -> None:
    path = str(tmp_path / "result")
    assert relations.delta_columns(path) == []  # never ran: no columns, no error
    write_deltalake(path, pa.table({"order_id": pa.array([1], pa.int64()), "price": pa.array([2.5]),
                                    "_bucket": pa.array([3], pa.int32())}))
    assert relations.delta_columns(path) == [("order_id", "bigint"), ("price", "double")]
