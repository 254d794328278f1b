"""streamjoin as a dbt package in a user's project: it adds macros only, and `dbt compile` starts no Spark.

The user's project has a model named like one of the examples (`customer_orders`, with its own
schema.yml entry), and a streaming_join model over two declared sources with streamjoin's generic
tests. `dbt deps` then `dbt compile`: neither runs a statement, so no
SparkSession (no metastore, no `Starting SparkSession` in dbt's log).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbt_process import REPO, Invocation, dbt
from streamjoin.api import rename_relations
from streamjoin.spec import InputSpec
from streamjoin.sql.compiler import compile_sql

PROJECT_YML = """
name: shop
version: "1.0"
config-version: 2
profile: shop
"""
PACKAGES_YML = f"""
packages:
  - local: "{REPO}"
"""
PROFILES_YML = """
shop:
  target: local
  outputs:
    local:
      type: streamjoin
      local_dir: "{{ env_var('STREAMJOIN_LOCAL_DIR') }}"
"""
SCHEMA_YML = """
version: 2
sources:
  - name: crm
    schema: crm
    tables:
      - name: accounts
        meta: {streamjoin: {unique_key: [account_id]}}
        columns:
          - {name: account_id, data_type: bigint}
          - {name: region, data_type: string}
      - name: orders
        meta: {streamjoin: {changelog_format: append}}
        columns:
          - {name: order_id, data_type: bigint}
          - {name: account_id, data_type: bigint}
models:
  - name: customer_orders  # named like an example model of the package
    columns:
      - name: order_id
        data_tests: [not_null]
  - name: orders_by_region
    data_tests: [streamjoin.matches_batch, streamjoin.changelog_consistent]
"""
MODELS = {
    "customer_orders": "{{ config(materialized='view') }}\nselect 1 as order_id",
    "orders_by_region": "{{ config(materialized='streaming_join') }}\n"
                        "select o.order_id, a.region from {{ source('crm', 'orders') }} o "
                        "left join {{ source('crm', 'accounts') }} a on o.account_id = a.account_id",
    "orders_windows": "{{ config(materialized='streaming_join') }}\n"
                      "{{ streamjoin.window_join(source('crm', 'orders'), source('crm', 'accounts'), on='account_id', "
                      "time='ts', window='hop', size='10 minutes', slide='5 minutes', offset='-1 minute', join_type='left', "
                      "columns=['orders.order_id', 'accounts.region', 'orders.window_end']) }}",
    "orders_asof": "{{ config(materialized='streaming_join') }}\n"
                   "{{ streamjoin.asof_join(source('crm', 'orders'), source('crm', 'accounts'), on='account_id', "
                   "left_time='ts', right_time='ts', join_type='left', columns=['orders.order_id', 'accounts.region']) }}",
}


@dataclass(frozen=True)
class Compiled:
    deps: Invocation
    compile: Invocation
    local_dir: Path

    def manifest(self) -> dict:
        return json.loads((self.local_dir / "target" / "manifest.json").read_text())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    project = tmp_path_factory.mktemp("user_project")
    (project / "models").mkdir()
    for name, text in {"dbt_project.yml": PROJECT_YML, "packages.yml": PACKAGES_YML,
                       "profiles.yml": PROFILES_YML, "models/schema.yml": SCHEMA_YML}.items():
        (project / name).write_text(text)
    for name, sql in MODELS.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    local_dir = project / ".streamjoin"
    local_dir.mkdir()
    deps = dbt(["deps"], project=project, local_dir=local_dir)
    return Compiled(deps, dbt(["compile"], project=project, local_dir=local_dir), local_dir)


def test_the_package_adds_only_macros_to_the_users_project(compiled: Compiled) -> None:
    assert compiled.deps.returncode == 0, compiled.deps.output
    assert compiled.compile.returncode == 0, compiled.compile.output[-4000:]
    manifest = compiled.manifest()
    resources = [*manifest["nodes"].values(), *manifest["sources"].values(), *manifest["unit_tests"].values()]
    assert {r["package_name"] for r in resources} == {"shop"}
    materialization = [m for m in manifest["macros"].values() if m["name"] == "materialization_streaming_join_streamjoin"]
    assert [m["package_name"] for m in materialization] == ["streamjoin"]
    assert manifest["nodes"]["model.shop.customer_orders"]["config"]["materialized"] == "view"


def test_compile_renders_every_node_without_starting_spark(compiled: Compiled) -> None:
    results = compiled.compile.results
    assert len(results) == 7 and {r["status"] for r in results.values()} == {"success"}
    assert "left join crm.accounts a" in results["orders_by_region"]["compiled_code"]
    assert not (compiled.local_dir / "metastore_db").exists()
    assert "Starting SparkSession" not in (compiled.local_dir / "logs" / "dbt.log").read_text()


def test_the_window_join_macro_renders_flinks_window_table_functions(compiled: Compiled) -> None:
    code = compiled.compile.results["orders_windows"]["compiled_code"]
    hop = "table(hop(table crm.{}, descriptor(ts), INTERVAL '5' MINUTE, INTERVAL '10' MINUTE, INTERVAL '-1' MINUTE))"
    assert f"from {hop.format('orders')} as orders" in code and f"left join {hop.format('accounts')} as accounts" in code
    sql = code[code.index("select"):code.rindex("window_end") + len("window_end")]
    specs = {name: InputSpec.from_dict(name, {"columns": [["account_id", "bigint"], [column, "string"], ["ts", "timestamp"]],
                                             "event_time": "ts"})
             for name, column in (("orders", "order_id"), ("accounts", "region"))}
    plan = compile_sql("orders_windows", rename_relations("orders_windows", sql, {"orders": "crm.orders",
                                                                                   "accounts": "crm.accounts"}), specs)
    assert "left window join j1 ON `orders__account_id` = `accounts__account_id`" in plan.explain()
    assert str(plan.root.window) == "per window HOP(ts, size 600s, slide 300s, offset -60s), fired at its end"


def test_the_asof_join_macro_renders_a_match_condition(compiled: Compiled) -> None:
    code = compiled.compile.results["orders_asof"]["compiled_code"]
    assert "left asof join crm.accounts as accounts\n  match_condition(orders.ts >= accounts.ts)" in code
    sql = code[code.index("select"):code.rindex("accounts.account_id") + len("accounts.account_id")]
    specs = {name: InputSpec.from_dict(name, {"columns": [["account_id", "bigint"], [column, "string"], ["ts", "timestamp"]]})
             for name, column in (("orders", "order_id"), ("accounts", "region"))}
    plan = compile_sql("orders_asof", rename_relations("orders_asof", sql, {"orders": "crm.orders",
                                                                             "accounts": "crm.accounts"}), specs)
    assert str(plan.root.asof) == "MATCH_CONDITION(`orders__ts` >= `accounts__ts`)"
