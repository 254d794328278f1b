"""The plugin loads the way dbt loads it: namespace packages, AdapterPlugin, macros."""

from __future__ import annotations

from pathlib import Path

from dbt.adapters.streamjoin import Plugin, StreamjoinAdapter, StreamjoinCredentials
from dbt.adapters.streamjoin.__version__ import version


def test_plugin_extends_spark() -> None:
    assert Plugin.adapter is StreamjoinAdapter
    assert Plugin.credentials is StreamjoinCredentials
    assert Plugin.dependencies == ["spark"]
    assert StreamjoinAdapter.type() == "streamjoin"


def test_include_path_holds_project_and_macros() -> None:
    include = Path(Plugin.include_path)
    assert (include / "dbt_project.yml").is_file()
    assert (include / "profile_template.yml").is_file()
    assert "streamjoin__create_table_as" in (include / "macros" / "python_model.sql").read_text()


def test_version_is_the_distributions() -> None:
    assert version.count(".") >= 2


def test_dbt_namespaces_are_not_shadowed() -> None:
    import dbt.adapters.spark
    import dbt.include.spark

    assert Path(dbt.adapters.spark.__file__).parent.name == "spark"
    assert Path(dbt.include.spark.PACKAGE_PATH).is_dir()
