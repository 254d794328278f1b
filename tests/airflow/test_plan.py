"""The plan: which models run per interval, in what order, writing which tables; no Airflow, no dbt."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin import ConfigError
from streamjoin_airflow.plan import DbtProject, build_plan, load_plan, table_uri

REPO = Path(__file__).resolve().parents[2]


def model(name: str, materialized: str, *parents: str) -> tuple[str, dict]:
    return f"model.p.{name}", {"resource_type": "model", "name": name, "config": {"materialized": materialized},
                               "depends_on": {"nodes": list(parents)}}


def data_test(name: str, *parents: str) -> tuple[str, dict]:
    return f"test.p.{name}", {"resource_type": "test", "name": name, "config": {}, "depends_on": {"nodes": list(parents)}}


MANIFEST = {"metadata": {"project_name": "p"}, "nodes": dict([
    model("totals", "streaming_join", "model.p.enriched_view"),
    model("enriched_view", "view", "model.p.orders_prices"),
    model("orders_prices", "streaming_join", "source.p.shop.orders", "source.p.shop.prices"),
    model("customers", "streaming_join", "source.p.shop.customers"),
    model("report", "table", "model.p.totals"),
    data_test("unique_totals_id", "model.p.totals"),
    data_test("relationships_totals_orders", "model.p.totals", "model.p.orders_prices"),
    data_test("not_null_report_id", "model.p.report"),
    data_test("relationships_report_totals", "model.p.report", "model.p.totals"),
])}


def test_streaming_join_models_in_dependency_order_through_other_models() -> None:
    plan = build_plan(MANIFEST, state_root="/srv/state")
    assert plan.project == "p"
    assert plan.model_names.index("orders_prices") < plan.model_names.index("totals")
    assert sorted(plan.model_names) == ["customers", "orders_prices", "totals"]
    upstream = {m.name: m.upstream for m in plan.models}
    assert upstream == {"customers": (), "orders_prices": (), "totals": ("orders_prices",)}


def test_each_model_writes_its_result_and_changelog_tables() -> None:
    totals = next(m for m in build_plan(MANIFEST, state_root="/srv/state").models if m.name == "totals")
    assert (totals.unique_id, totals.result_uri, totals.changelog_uri) == (
        "model.p.totals", "file:///srv/state/models/totals/result", "file:///srv/state/models/totals/changelog")
    assert table_uri("s3://bucket/state/", "totals", "result") == "s3://bucket/state/models/totals/result"


def test_tests_are_those_whose_models_are_all_planned() -> None:
    plan = build_plan(MANIFEST, state_root="/srv/state")
    assert plan.tests == ("relationships_totals_orders", "unique_totals_id")
    wider = build_plan(MANIFEST, state_root="/srv/state", materializations=("streaming_join", "table"))
    assert "report" in wider.model_names and len(wider.tests) == 4


def test_a_selection_plans_the_models_it_names_and_their_tests_alone() -> None:
    tagged = {**MANIFEST, "nodes": {**MANIFEST["nodes"], "model.p.customers": {
        **MANIFEST["nodes"]["model.p.customers"], "tags": ["daily"]}}}
    plan = build_plan(tagged, state_root="/srv/state", select=["totals", "tag:daily"])
    assert sorted(plan.model_names) == ["customers", "totals"]
    assert {m.name: m.upstream for m in plan.models}["totals"] == ()  # orders_prices is not run here
    assert plan.tests == ("unique_totals_id",)  # the other one needs orders_prices too
    with pytest.raises(ConfigError, match="select: 'report', 'tag:hourly' names no model the plan can run"):
        build_plan(tagged, state_root="/srv/state", select=["totals", "report", "tag:hourly"])


def test_a_project_without_streaming_joins_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="materialized as streaming_join; set `materialized`"):
        build_plan({"metadata": {"project_name": "q"}, "nodes": dict([model("v", "view")])}, state_root="/s")


def test_missing_manifest_and_bad_project_name_the_fix(tmp_path: Path) -> None:
    project = DbtProject(REPO, state_root=str(tmp_path / "state"), target_path=tmp_path / "target")
    with pytest.raises(ConfigError, match="no dbt manifest at .*run `dbt parse.*or load the plan with parse=True"):
        load_plan(project, parse=False)
    with pytest.raises(ConfigError) as error:
        DbtProject(tmp_path, state_root=" ")
    assert len(error.value.problems) == 2 and "no dbt_project.yml" in str(error.value)


def test_load_plan_reads_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "manifest.json").write_text(json.dumps(MANIFEST))
    project = DbtProject(REPO, state_root=str(tmp_path / "state"), target_path=tmp_path / "target")
    assert load_plan(project, parse=False) == build_plan(MANIFEST, state_root=str(tmp_path / "state"))
