"""The example project through real dbt, Spark and Delta on the standalone cluster: two batches, one
`dbt build` process each, its profile's `server_side_parameters` naming the cluster's master.

Before each build, `scripts/load_batch.py` appends the next batch of every input's changelog
(`example/seeds/changelogs/*.csv`). After each build the tests check every model and dbt test passed
(including `streamjoin.matches_batch`: Spark's batch evaluation of each model agrees), the
result tables against hand-worked expectations (`example_results`), the changelog each run emitted,
and that the master ran each build as an application whose executors on both workers did the work.
Each later build is each model's next run in a new process: state carried over on disk. Then, in
one more dbt process, `dbt show` and `dbt docs generate`, and `python -m streamjoin explain`. (The
Airflow demo, tests/airflow/test_dag_end_to_end.py, runs the same project for all three batches on
local Spark, the third one included; tests/dbt has the dbt CLI's failure, parallel and object-store cases.)
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

from example_results import EXPECTED, rows
from jvm_options import SHORT_LIVED
from streamjoin.local_cluster import LocalCluster, get_json

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dbt"))
from dbt_process import EXAMPLE, REPO, Invocation, dbt, dbt_command, dbt_session  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import load_batch  # noqa: E402

BATCHES = 2  # the second is every model's next run, on state a first process left (the third: the Airflow demo)
MODELS = ["orders_prices_inner", "orders_prices_left", "orders_prices_full", "stock_orders", "students_scores",
          "orders_shipped_within_4h", "order_facts", "customer_orders", "orders_shipped_same_shift",
          "invoices_in_eur", "invoices_latest_rate"]


@dataclass(frozen=True)
class Build:
    """One batch's build: the dbt invocation, then each model's result and changelog rows."""

    dbt: Invocation
    results: Dict[str, List[tuple]]
    changelogs: Dict[str, List[tuple]]
    local_dir: Path


def cluster_profile(folder: Path, master_url: str) -> Path:
    """The example's profile with `server_side_parameters` pointing at the cluster."""
    folder.mkdir()
    profile = {"streamjoin_example": {"target": "cluster", "outputs": {"cluster": {
        "type": "streamjoin", "threads": 2, "local_dir": "{{ env_var('STREAMJOIN_LOCAL_DIR') }}",
        "server_side_parameters": {"spark.master": master_url, "spark.sql.shuffle.partitions": "1",
                                   "spark.executor.extraJavaOptions": SHORT_LIVED}}}}}
    (folder / "profiles.yml").write_text(json.dumps(profile))  # JSON is YAML
    return folder


@pytest.fixture(scope="module")
def profiles(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cluster_profile(tmp_path_factory.mktemp("cluster-profile") / "profiles", cluster.master_url)


@pytest.fixture(scope="module")
def builds(profiles: Path, tmp_path_factory: pytest.TempPathFactory) -> List[Build]:
    local_dir = tmp_path_factory.mktemp("example-on-cluster")
    models = local_dir / "state" / "models"
    deps = dbt(["deps"], project=EXAMPLE, local_dir=local_dir, profiles_dir=profiles)
    assert deps.returncode == 0, deps.output
    out = []
    for batch in range(1, BATCHES + 1):
        load_batch.load(batch, local_dir / "state")
        invocation = dbt(["build"], project=EXAMPLE, local_dir=local_dir, profiles_dir=profiles)
        out.append(Build(invocation,
                         {m: rows(models / m / "result") for m in MODELS},
                         {m: rows(models / m / "changelog") for m in MODELS}, local_dir))
    return out


@pytest.fixture(scope="module")
def other_commands(builds: List[Build], profiles: Path) -> List[dict]:
    """After the last build, in one new dbt process: `dbt show` of a model and of every relation
    kind a model or test can name, then `dbt docs generate`."""
    relations = ("select (select count(*) from {{ source('shop', 'orders') }}) as source_rows, "
                 "(select count(*) from {{ ref('orders_prices_left') }}) as result_rows, "
                 "(select count(*) from {{ ref('orders_prices_left') }}__changelog) as changelog_rows, "
                 "(select count(*) from {{ ref('orders_prices_left') }}__batch) as batch_rows")
    return dbt_session([["show", "--select", "orders_prices_left"], ["show", "--inline", relations],
                        ["docs", "generate"]], project=EXAMPLE, local_dir=builds[-1].local_dir, profiles_dir=profiles)


@pytest.fixture(scope="module")
def explained(builds: List[Build], profiles: Path) -> Dict[str, subprocess.CompletedProcess]:
    """`python -m streamjoin explain` after the last build: of a model, and of a name the project lacks."""
    out = {}
    for model in ("stock_orders", "no_such_model"):
        _, env = dbt_command(["run"], project=EXAMPLE, local_dir=builds[-1].local_dir)
        out[model] = subprocess.run([sys.executable, "-m", "streamjoin", "explain", str(EXAMPLE), "--select", model,
                                     "--target-path", str(builds[-1].local_dir / "target"), "--profiles-dir",
                                     str(profiles)],
                                    cwd=builds[-1].local_dir, env=env, capture_output=True, text=True, timeout=600)
    return out


def test_explain_shows_the_state_after_the_last_build_and_that_the_model_still_fits_it(
        builds: List[Build], explained: Dict[str, subprocess.CompletedProcess]) -> None:
    done = explained["stock_orders"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("model stock_orders\n"), done.stdout
    state = builds[-1].local_dir / "state" / "models" / "stock_orders" / "state"
    for side in ("left", "right"):
        count = len(rows(state / f"j1_{side}", drop=()))
        assert f"state j1_{side}: " in done.stdout and f"[after the last run: {count} rows in " in done.stdout
    assert f"state: built by this plan (last run {BATCHES}, " in done.stdout
    assert "Running with dbt" not in done.stdout  # dbt's own log lines stay out of it


def test_explain_of_a_model_the_project_lacks_says_so(explained: Dict[str, subprocess.CompletedProcess]) -> None:
    done = explained["no_such_model"]
    assert done.returncode == 2
    assert "the project has no model named 'no_such_model'" in done.stdout + done.stderr


def test_dbt_show_of_a_model_evaluates_its_sql_over_its_sources(other_commands: List[dict]) -> None:
    show = other_commands[0]
    assert show["success"], show["error"]
    assert sorted(map(tuple, show["rows"]["orders_prices_left"]), key=repr) == \
        sorted(EXPECTED["orders_prices_left"][BATCHES - 1], key=repr)


def test_sources_results_changelogs_and_batch_views_resolve_in_a_new_dbt_process(other_commands: List[dict]) -> None:
    show = other_commands[1]
    assert show["success"], show["error"]
    [[source_rows, result_rows, changelog_rows, batch_rows]] = show["rows"]["inline_query"]
    orders = len(EXPECTED["orders_prices_left"][BATCHES - 1])  # a left join keeps each order once
    assert (source_rows, result_rows, batch_rows) == (orders, orders, orders)
    assert changelog_rows > result_rows


def test_docs_generate_lists_the_sources_with_their_columns(builds: List[Build], other_commands: List[dict]) -> None:
    assert other_commands[2]["success"], other_commands[2]["error"]
    catalog = json.loads((builds[-1].local_dir / "target" / "catalog.json").read_text())
    assert len(catalog["sources"]) == len(load_batch.inputs())
    orders = catalog["sources"]["source.streamjoin_example.shop.orders"]["columns"]
    assert list(orders) == ["order_id", "customer_id", "product_id", "qty", "ordered_at"]
    assert {f"model.streamjoin_example.{m}" for m in MODELS} <= set(catalog["nodes"])


def test_every_model_and_every_dbt_test_passes_in_every_build(builds: List[Build]) -> None:
    for batch, build in enumerate(builds, start=1):
        failed = {name: r["status"] for name, r in build.dbt.results.items() if r["status"] not in ("success", "pass")}
        assert not failed, f"batch {batch}: {failed}\n{build.dbt.output[-6000:]}"
        assert build.dbt.returncode == 0
        # the unit test's column lookup of its sources is answered from their declarations: no expected
        # miss (a failed DESCRIBE, which PySpark logs at ERROR with the Java stack trace) in output or log
        assert "TABLE_OR_VIEW_NOT_FOUND" not in build.dbt.output
        tests = [name for name in build.dbt.results if name.startswith("streamjoin_matches_batch_")]
        assert len(tests) == len(MODELS)
        # a dbt unit test of a streaming_join model's SQL, its source inputs known only by declaration
        assert build.dbt.results["orders_prices_left.orders_without_a_price_are_padded"]["status"] == "pass"
    assert "TABLE_OR_VIEW_NOT_FOUND" not in (builds[-1].local_dir / "logs" / "dbt.log").read_text()


def test_each_run_reports_what_it_consumed(builds: List[Build]) -> None:
    message = builds[1].dbt.results["stock_orders"]["adapter_response"]["_message"]
    assert message.startswith("streamjoin stock_orders run 2: committed; changes in: ")
    assert "stock=2" in message and "orders=4" in message


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_results_after_each_batch(builds: List[Build], model: str) -> None:
    got = [build.results[model] for build in builds]
    assert got == [sorted(e, key=repr) for e in EXPECTED[model][:len(builds)]]


def test_changelogs_are_append_only_and_tagged_with_their_run(builds: List[Build]) -> None:
    for model in MODELS:
        before: Counter = Counter()
        for run_id, build in enumerate(builds, start=1):
            now = Counter(build.changelogs[model])
            assert not before - now, f"{model}: run {run_id} removed changelog rows"
            assert {r[-1] for r in (now - before).elements()} <= {run_id}, model
            before = now


def test_stock_orders_changelog_of_the_cancellation_run(builds: List[Build]) -> None:
    run2 = Counter((r[-2], r[:-2]) for r in builds[1].changelogs["stock_orders"] if r[-1] == 2)
    assert run2 == Counter({
        ("-D", ("north", 10, 5, 1, 2)): 2,  # order 1 cancelled, matched by both copies of the stock line
        ("-D", ("south", 11, 2, 2, 1)): 1,  # order 2's quantity changed
        ("+I", ("south", 11, 2, 2, 3)): 1,
        ("+I", ("north", 10, 5, 4, 1)): 1,  # new order 4 meets the one copy left of the stock line
        ("+I", ("north", 12, 7, 3, 5)): 1,  # new stock line for order 3
    })


def test_output_unique_key_turns_changes_into_updates(builds: List[Build]) -> None:
    run2 = sorted((r[-2], r[0]) for r in builds[1].changelogs["orders_prices_left"] if r[-1] == 2)
    assert run2 == [("+I", 4), ("+U", 2), ("-D", 1), ("-U", 2)]


HAND_WRITTEN = {  # the SQL each macro-written model would be by hand
    "students_scores": """
        select st.student_id, st.name, sc.course, sc.score
        from school.students st left join school.scores sc on st.student_id = sc.student_id""",
    "orders_shipped_within_4h": """
        select o.order_id, o.placed_at, s.shipment_id, s.shipped_at
        from shop.order_placements o join shop.shipments s
          on o.order_id = s.order_id and s.shipped_at between o.placed_at and o.placed_at + interval 4 hours""",
    "order_facts": """
        select o.order_id, o.qty, p.payment_id, p.amount_cents, s.shipment_id
        from shop.orders o join shop.payments p on o.order_id = p.order_id
        left join shop.shipments s on s.order_id = o.order_id""",
    "orders_shipped_same_shift": """
        select o.order_id, s.shipment_id, o.window_start
        from table(tumble(table shop.order_placements, descriptor(placed_at), interval '4' hours)) o
        left join table(tumble(table shop.shipments, descriptor(shipped_at), interval '4' hours)) s
          on o.order_id = s.order_id and o.window_start = s.window_start and o.window_end = s.window_end""",
    "invoices_in_eur": """
        select i.invoice_id, i.currency, i.amount_cents, r.eur_milli
        from shop.invoices i left join shop.fx_rates for system_time as of i.issued_at as r on i.currency = r.currency""",
    "invoices_latest_rate": """
        select i.invoice_id, i.currency, i.amount_cents, r.eur_milli
        from shop.invoices i left asof join shop.fx_rates r match_condition(i.issued_at >= r.valid_from)
          on i.currency = r.currency""",
}


@pytest.mark.parametrize("model", sorted(HAND_WRITTEN))
def test_macro_written_models_compile_to_the_plan_of_their_sql(builds: List[Build], model: str) -> None:
    from streamjoin.api import compile_model

    local_dir = builds[0].local_dir
    compiled = (local_dir / "target" / "compiled" / "streamjoin_example" / "models" / f"{model}.sql").read_text()
    inputs = {}
    for name, spec in load_batch.inputs().items():
        inputs[name] = {"relation": f"{spec['source']}.{name}",
                        "location": str(local_dir / "state" / "sources" / spec["source"] / name),
                        "columns": [{"name": c, "type": t} for c, t in spec["types"].items()],
                        **spec["declaration"]}
    config = {"join_strategy": "multi"} if model == "order_facts" else {}
    from_macro = compile_model(name=model, sql=compiled, inputs=inputs, config=config)
    by_hand = compile_model(name=model, sql=HAND_WRITTEN[model], inputs=inputs, config=config)
    assert from_macro.root == by_hand.root
    assert from_macro.outputs == by_hand.outputs


def test_the_master_ran_each_build_on_both_workers(cluster: LocalCluster, builds: List[Build]) -> None:
    apps = {app["id"] for app in cluster.status()["completedapps"] if app["name"].startswith("dbt-streamjoin")}
    assert len(apps) >= BATCHES, cluster.status()["completedapps"]  # (and `other_commands`' process, if it ran)
    for worker in cluster.alive_workers():
        # the last build's executors may not have finished yet: the worker kills them after its driver left
        state = get_json(f"{worker['webuiaddress']}/json/")
        ran = {e["appid"] for e in state["executors"] + state["finishedexecutors"]}
        assert apps <= ran, f"worker {worker['id']} ran no executor of {apps - ran}"
