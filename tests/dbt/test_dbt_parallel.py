"""Several dbt processes of one project at once, as parallel Airflow tasks or a manual `dbt run` beside a
DAG run: they share the project's catalog (its metastore service, streamjoin.metastore), so runs of
different models all commit, and of two runs of the same model exactly one commits while the other fails
with ConcurrentRunError in one line and changes nothing.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from deltalake import DeltaTable

from dbt_process import EXAMPLE, REPO, Invocation, dbt, dbt_command
from example_results import EXPECTED, rows
from streamjoin import metastore

pytestmark = pytest.mark.slow

sys.path.insert(0, str(REPO / "scripts"))
import load_batch  # noqa: E402

BARRIER_SCRIPT = Path(__file__).with_name("dbt_at_a_barrier.py")
MODEL = "orders_prices_left"


def at_once(commands: Sequence[List[str]], *, local_dir: Path) -> List[Invocation]:
    """The dbt invocations, each in its own process, all started before any is waited for."""
    started = [subprocess.Popen(command, cwd=local_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) for command, env in commands]
    return [Invocation(p.wait(timeout=900), p.stdout.read(), {}) for p in started]


def commits(local_dir: Path, model: str) -> int:
    """The number of runs committed to the model's run log."""
    return DeltaTable(str(local_dir / "state" / "models" / model / "runs")).to_pyarrow_table().num_rows


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory: pytest.TempPathFactory):
    local_dir = tmp_path_factory.mktemp("parallel")
    assert dbt(["deps"], project=EXAMPLE, local_dir=local_dir).returncode == 0
    yield local_dir
    metastore.stop(local_dir)


@pytest.fixture(scope="module")
def different_models(local_dir: Path) -> Dict[str, Invocation]:
    load_batch.load(1, local_dir / "state")
    models = [MODEL, "stock_orders"]
    done = at_once([dbt_command(["run", "--select", m], project=EXAMPLE, local_dir=local_dir, name=m)
                    for m in models], local_dir=local_dir)
    return dict(zip(models, done))


def test_runs_of_different_models_in_parallel_processes_all_commit(local_dir: Path,
                                                                   different_models: Dict[str, Invocation]) -> None:
    for model, invocation in different_models.items():
        assert invocation.returncode == 0, invocation.output[-4000:]
        assert "XSDB6" not in invocation.output and "Derby" not in invocation.output
        assert commits(local_dir, model) == 1
    result = local_dir / "state" / "models" / MODEL / "result"
    assert rows(result) == sorted(EXPECTED[MODEL][0], key=repr)


def test_of_two_runs_of_one_model_one_commits_and_the_other_fails_in_one_line(
        local_dir: Path, different_models: Dict[str, Invocation], tmp_path: Path) -> None:
    load_batch.load(2, local_dir / "state")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racing = []
    for name in ("first", "second"):
        command, env = dbt_command(["run", "--select", MODEL], project=EXAMPLE, local_dir=local_dir, name=name)
        racing.append(([sys.executable, str(BARRIER_SCRIPT), str(barrier), "2", *command[1:]], env))
    done = at_once(racing, local_dir=local_dir)

    assert len(os.listdir(barrier)) == 2  # both planned and computed the run, and got to their first commit
    [winner] = [d for d in done if d.returncode == 0]
    [loser] = [d for d in done if d.returncode != 0]
    errors = [line for line in loser.output.splitlines() if "ConcurrentRunError" in line]
    assert errors, loser.output[-4000:]
    assert f"streamjoin model model.streamjoin_example.{MODEL} failed: ConcurrentRunError: another run of the " \
           "same model committed" in errors[0]
    assert "Traceback" not in loser.output and "\tat org." not in loser.output
    assert commits(local_dir, MODEL) == 2  # batch 1's run and the winner's
    assert rows(local_dir / "state" / "models" / MODEL / "result") == sorted(EXPECTED[MODEL][1], key=repr)

    rerun = dbt(["run", "--select", MODEL], project=EXAMPLE, local_dir=local_dir)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert commits(local_dir, MODEL) == 2  # the loser's rerun found nothing left to do
