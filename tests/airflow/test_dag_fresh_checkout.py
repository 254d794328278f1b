"""The example DAG file loads in a fresh checkout (no .streamjoin/, no manifest) with nobody running dbt first.

The files git tracks for the example (dags/, example/, the root package's macros) are copied to
a temporary folder and STREAMJOIN_LOCAL_DIR is unset, so the DAG uses its defaults, as Airflow
would on a fresh clone. Loading it parses the project once; loading it again reads the cached
manifest; a new model makes the manifest stale and the next load sees it.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tracked = subprocess.run(["git", "ls-files", "dags", "example", "macros", "dbt_project.yml"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        if (REPO / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tmp_path / name)
    monkeypatch.delenv("STREAMJOIN_LOCAL_DIR", raising=False)
    return tmp_path


def load(checkout: Path):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(checkout / "dags"))


def test_the_dag_file_parses_the_project_when_its_manifest_is_missing_or_stale(checkout: Path) -> None:
    local_dir = checkout / "example" / ".streamjoin"
    assert not local_dir.exists()

    first = load(checkout)
    assert first.import_errors == {}
    assert set(first.dag_ids) == {"streamjoin_example", "streamjoin_example_full_refresh"}
    manifest = local_dir / "target" / "manifest.json"
    parsed_at = manifest.stat().st_mtime_ns

    again = load(checkout)
    assert again.import_errors == {} and manifest.stat().st_mtime_ns == parsed_at  # read from the cache

    models = checkout / "example" / "models"
    (models / "orders_prices_again.sql").write_text((models / "orders_prices_inner.sql").read_text())
    stale = load(checkout)
    assert stale.import_errors == {}
    assert "orders_prices_again" in stale.dags["streamjoin_example"].task_dict
    assert manifest.stat().st_mtime_ns != parsed_at
