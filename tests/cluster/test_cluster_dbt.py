"""The example project built with dbt on the standalone cluster: three batches, one `dbt build`
process each, its profile's `server_side_parameters` naming the cluster's master. Every model and
dbt test passes after every batch, the results are the hand-worked ones, and the master ran each
build as an application whose executors on both workers did the work."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from example_results import EXPECTED, rows
from streamjoin.local_cluster import LocalCluster, get_json

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dbt"))
from dbt_process import EXAMPLE, REPO, Invocation, dbt  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import load_batch  # noqa: E402

BATCHES = 3


def cluster_profile(folder: Path, master_url: str) -> Path:
    """The example's profile with `server_side_parameters` pointing at the cluster."""
    folder.mkdir()
    profile = {"streamjoin_example": {"target": "cluster", "outputs": {"cluster": {
        "type": "streamjoin", "threads": 2, "local_dir": "{{ env_var('STREAMJOIN_LOCAL_DIR') }}",
        "server_side_parameters": {"spark.master": master_url, "spark.sql.shuffle.partitions": "1"}}}}}
    (folder / "profiles.yml").write_text(json.dumps(profile))  # JSON is YAML
    return folder


@pytest.fixture(scope="module")
def builds(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Invocation, dict]]:
    local_dir = tmp_path_factory.mktemp("example-on-cluster")
    profiles = cluster_profile(local_dir / "profiles", cluster.master_url)
    deps = dbt(["deps"], project=EXAMPLE, local_dir=local_dir, profiles_dir=profiles)
    assert deps.returncode == 0, deps.output
    out = []
    for batch in range(1, BATCHES + 1):
        load_batch.load(batch, local_dir / "state")
        invocation = dbt(["build"], project=EXAMPLE, local_dir=local_dir, profiles_dir=profiles)
        out.append((invocation, {m: rows(local_dir / "state" / "models" / m / "result") for m in EXPECTED}))
    return out


def test_every_model_and_dbt_test_passes_after_every_batch(builds) -> None:
    for batch, (invocation, _) in enumerate(builds, start=1):
        failed = {name: r["status"] for name, r in invocation.results.items() if r["status"] not in ("success", "pass")}
        assert not failed and invocation.returncode == 0, f"batch {batch}: {failed}\n{invocation.output[-6000:]}"
        assert any(name.startswith("streamjoin_matches_batch_") for name in invocation.results)


def test_results_after_each_batch_are_the_hand_worked_ones(builds) -> None:
    for model, expected in EXPECTED.items():
        assert [results[model] for _, results in builds] == [sorted(e, key=repr) for e in expected[:BATCHES]], model


def test_the_master_ran_each_build_on_both_workers(cluster: LocalCluster, builds) -> None:
    apps = {app["id"] for app in cluster.status()["completedapps"] if app["name"].startswith("dbt-streamjoin")}
    assert len(apps) == BATCHES, cluster.status()["completedapps"]
    for worker in cluster.alive_workers():
        ran = {e["appid"] for e in get_json(f"{worker['webuiaddress']}/json/")["finishedexecutors"]}
        assert apps <= ran, f"worker {worker['id']} ran no executor of {apps - ran}"
