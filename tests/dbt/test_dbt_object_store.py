"""A dbt project whose state root is a bucket (the S3 emulator), reached through the profile's
`storage_options`: sources, state, results and changelogs all live in the bucket, and the views a
model and its tests read (`ref()`, `__changelog`, `__batch`, the sources) read it too.

Two `dbt build` processes, one batch each: the model, `streamjoin.matches_batch` (its result view
against the batch view over the sources' snapshots), `streamjoin.changelog_consistent` and a
`not_null` test must pass, and the result in the bucket must be the hand-worked one.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dbt_process import REPO, dbt

pytestmark = pytest.mark.slow

MODEL = """{{ config(materialized='streaming_join', output_unique_key='order_id') }}
select o.order_id, o.qty, c.name
from {{ source('shop', 'orders') }} as o
left join {{ source('shop', 'customers') }} as c on o.customer_id = c.customer_id
"""
SCHEMA = """version: 2
sources:
  - name: shop
    schema: shop_s3
    tables:
      - name: orders
        meta: {streamjoin: {changelog_format: changelog, unique_key: [order_id]}}
      - name: customers
        meta: {streamjoin: {changelog_format: upsert, unique_key: [customer_id]}}
models:
  - name: orders_customers
    data_tests: [streamjoin.matches_batch, streamjoin.changelog_consistent]
    columns:
      - name: order_id
        data_tests: [not_null]
"""


def project(root: Path, state_root: str, options: dict[str, str]) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(
        "name: s3_project\nversion: '1.0'\nconfig-version: 2\nprofile: s3_project\nmodel-paths: [models]\n"
        "packages-install-path: \"{{ env_var('STREAMJOIN_LOCAL_DIR') }}/dbt_packages\"\n")
    (root / "packages.yml").write_text(f"packages:\n  - local: {REPO}\n")
    profile = {"s3_project": {"target": "local", "outputs": {"local": {
        "type": "streamjoin", "threads": 1, "local_dir": "{{ env_var('STREAMJOIN_LOCAL_DIR') }}",
        "state_root": state_root, "storage_options": options,
        "server_side_parameters": {"spark.sql.shuffle.partitions": "1"}}}}}
    (root / "profiles.yml").write_text(json.dumps(profile))  # JSON is YAML
    (root / "models" / "orders_customers.sql").write_text(MODEL)
    (root / "models" / "schema.yml").write_text(SCHEMA)
    return root


def orders(*rows: tuple[str, int, int, int]) -> pa.Table:
    return pa.table({"_row_kind": [r[0] for r in rows], "order_id": pa.array([r[1] for r in rows], pa.int64()),
                     "customer_id": pa.array([r[2] for r in rows], pa.int64()),
                     "qty": pa.array([r[3] for r in rows], pa.int32())})


def customers(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"customer_id": pa.array([r[0] for r in rows], pa.int64()), "name": [r[1] for r in rows]})


def test_a_project_whose_state_root_is_a_bucket_builds_and_tests_green(s3_lake, tmp_path: Path) -> None:
    state_root = f"{s3_lake.uri}/dbt-{uuid.uuid4().hex[:8]}"
    options = s3_lake.options
    root = project(tmp_path / "project", state_root, options)
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    assert dbt(["deps"], project=root, local_dir=local_dir).returncode == 0
    sources = {name: f"{state_root}/sources/shop/{name}" for name in ("orders", "customers")}

    write_deltalake(sources["orders"], orders(("+I", 1, 10, 2), ("+I", 2, 20, 1), ("+I", 3, 30, 5)), storage_options=options)
    write_deltalake(sources["customers"], customers((10, "ann"), (20, "bob")), storage_options=options)
    first = dbt(["build"], project=root, local_dir=local_dir)
    assert first.returncode == 0, first.output[-4000:]
    assert set(first.statuses().values()) == {"success", "pass"} and len(first.statuses()) == 4, first.statuses()

    write_deltalake(sources["orders"], orders(("-U", 1, 10, 2), ("+U", 1, 10, 7), ("-D", 2, 20, 1)),
                    storage_options=options, mode="append")
    write_deltalake(sources["customers"], customers((30, "cy"), (10, "ann b")), storage_options=options, mode="append")
    second = dbt(["build"], project=root, local_dir=local_dir)
    assert second.returncode == 0, second.output[-4000:]
    assert set(second.statuses().values()) == {"success", "pass"}, second.statuses()

    result = DeltaTable(f"{state_root}/models/orders_customers/result", storage_options=options).to_pyarrow_table()
    assert sorted(zip(*(result[c].to_pylist() for c in ("order_id", "qty", "name")))) == [(1, 7, "ann b"), (3, 5, "cy")]
    assert not (local_dir / "state").exists()  # nothing of the state root on the local disk
