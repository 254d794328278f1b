"""Profile fields of `type: streamjoin`: zero-setup defaults and validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt_common.exceptions import DbtConfigError

from dbt.adapters.streamjoin import StreamjoinCredentials


def test_empty_profile_is_an_in_process_session() -> None:
    credentials = StreamjoinCredentials.from_dict({})
    assert credentials.method == "session"
    assert credentials.host == "localhost"
    assert credentials.schema == "default"
    assert credentials.type == "streamjoin"


def test_validation_names_every_bad_field_and_the_fix() -> None:
    with pytest.raises(DbtConfigError) as raised:
        StreamjoinCredentials.from_dict({"method": "thrift", "local_dir": "s3a://b/x", "state_root": " "})
    message = str(raised.value)
    assert "method: 'thrift'" in message and "method: session" in message
    assert "spark.master" in message
    assert "local_dir: 's3a://b/x'" in message
    assert "state_root: must not be empty" in message


def test_default_paths_live_under_the_project(tmp_path: Path) -> None:
    plan = StreamjoinCredentials.from_dict({}).session_plan(project_root=tmp_path, app_name="t")
    assert plan.local_dir == tmp_path / ".streamjoin"
    assert plan.state_root == str(tmp_path / ".streamjoin" / "state")
    assert plan.conf["spark.sql.warehouse.dir"] == str(tmp_path / ".streamjoin" / "warehouse")
    assert plan.local_dir == tmp_path / ".streamjoin" and plan.project_metastore  # its metastore_db lives there


def test_relative_paths_resolve_against_the_project_not_the_cwd(tmp_path: Path) -> None:
    credentials = StreamjoinCredentials.from_dict({"local_dir": "build/sj", "state_root": "state"})
    plan = credentials.session_plan(project_root=tmp_path, app_name="t")
    assert plan.local_dir == tmp_path / "build" / "sj"
    assert plan.state_root == str(tmp_path / "state")


def test_state_root_uri_is_kept_as_given(tmp_path: Path) -> None:
    credentials = StreamjoinCredentials.from_dict({"state_root": "s3a://bucket/streamjoin/state"})
    plan = credentials.session_plan(project_root=tmp_path, app_name="t")
    assert plan.state_root == "s3a://bucket/streamjoin/state"


def test_storage_options_are_registered_for_every_location_under_the_state_root(tmp_path: Path) -> None:
    from streamjoin.storage import filesystem

    options = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "conditional_put": "etag"}
    credentials = StreamjoinCredentials.from_dict({"state_root": "s3://profile-bucket/state", "storage_options": options})
    credentials.session_plan(project_root=tmp_path, app_name="t")
    assert filesystem.options_for("s3://profile-bucket/state/models/m/result") == options
    assert filesystem.options_for("s3://profile-bucket/elsewhere") == {}


def test_storage_options_must_map_names_to_values() -> None:
    with pytest.raises(DbtConfigError, match="storage_options: must map delta-rs option names to values"):
        StreamjoinCredentials.from_dict({"storage_options": {"AWS_REGION": {"name": "eu-west-1"}}})
    with pytest.raises(Exception, match="storage_options"):  # dbt's own check of the field's type
        StreamjoinCredentials.from_dict({"storage_options": ["AWS_REGION=eu-west-1"]})
