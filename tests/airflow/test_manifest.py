"""The manifest cache: which changes make a manifest stale, and a failed parse named with its fix (no dbt run)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin import ConfigError
from streamjoin_airflow.manifest import HASH_FILE, PLAN_MANIFEST, ensure_manifest, project_hash
from streamjoin_airflow.plan import DbtProject, load_plan

PROJECT_YML = 'name: shop\nversion: "1.0"\nconfig-version: 2\nprofile: shop\nmodel-paths: ["transforms"]\n'


@pytest.fixture()
def project(tmp_path: Path) -> DbtProject:
    (tmp_path / "dbt_project.yml").write_text(PROJECT_YML)
    (tmp_path / "transforms").mkdir()
    (tmp_path / "transforms" / "a.sql").write_text("select 1 as x")
    return DbtProject(tmp_path, state_root=str(tmp_path / ".state"), target_path=tmp_path / ".state" / "target",
                      env={"STREAMJOIN_LOCAL_DIR": str(tmp_path / ".state")})


def test_a_change_to_what_dbt_reads_changes_the_hash(project: DbtProject) -> None:
    root = Path(project.project_dir)
    before = project_hash(project)
    (root / "transforms" / "a.sql").write_text("select 2 as x")
    edited = project_hash(project)
    (root / "transforms" / "sub").mkdir()
    (root / "transforms" / "sub" / "b.sql").write_text("select 1 as y")
    added = project_hash(project)
    (root / "packages.yml").write_text("packages: []\n")
    assert len({before, edited, added, project_hash(project)}) == 4
    assert project_hash(DbtProject(root, state_root=project.state_root, target="prod")) != project_hash(
        DbtProject(root, state_root=project.state_root))


def test_state_outputs_and_unread_folders_leave_the_hash_alone(project: DbtProject) -> None:
    root = Path(project.project_dir)
    before = project_hash(project)
    for folder in (".state/target", "target", "logs", "models", "transforms/.hidden"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "x.sql").write_text("select 1")
    assert project_hash(project) == before


def test_a_fresh_manifest_is_read_without_running_dbt_from_the_dags_own_copy(project: DbtProject) -> None:
    target = Path(project.target_path)
    target.mkdir(parents=True)
    (target / PLAN_MANIFEST).write_text(json.dumps({"nodes": {}}))
    (target / HASH_FILE).write_text(project_hash(project) + "\n")
    (target / "manifest.json").write_text('{"nodes": {}, "half written')  # as a dbt run leaves it midway
    assert ensure_manifest(project, timeout=0.001) == target / PLAN_MANIFEST  # a parse would time out
    with pytest.raises(ConfigError, match="no model in project"):  # read the copy, not the half-written file
        load_plan(project)


def test_a_failed_parse_names_the_project_and_dbts_complaint(project: DbtProject) -> None:
    # no profiles.yml: dbt parse fails, and the stale manifest is not taken as fresh
    target = Path(project.target_path)
    target.mkdir(parents=True)
    (target / PLAN_MANIFEST).write_text(json.dumps({"nodes": {}}))
    (target / HASH_FILE).write_text("an older hash\n")
    with pytest.raises(ConfigError, match=r"dbt could not parse .* \(exit \d\); fix what dbt reports(.|\n)*shop"):
        ensure_manifest(project)
    assert (target / HASH_FILE).read_text() == "an older hash\n"
