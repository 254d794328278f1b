"""Declaration errors name the misspelt key and the key it most likely means (no Spark needed)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from streamjoin.api import compile_model
from streamjoin.errors import ConfigError
from streamjoin.spec import InputSpec, ModelConfig

SQL = "SELECT o.id, o.item FROM shop.orders o"


@pytest.fixture
def events(tmp_path) -> str:
    """An insert-only event table: no row kind column."""
    path = str(tmp_path / "orders")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64()), "item": ["book"]}))
    return path


def test_a_misspelt_changelog_format_is_named_before_what_it_causes(events):
    inputs = {"orders": {"relation": "shop.orders", "location": events, "changelog_fromat": "append"}}
    with pytest.raises(ConfigError) as err:
        compile_model(name="order_items", sql=SQL, inputs=inputs, config={})
    assert err.value.problems[0] == \
        "input 'orders': unknown key 'changelog_fromat': did you mean 'changelog_format'?", err.value.problems
    message = str(err.value)
    assert "model 'order_items'" in message
    # the missing `_row_kind` column is only what the typo caused (the default format): not reported
    assert "_row_kind" not in message, message


def test_a_misspelt_key_is_reported_with_the_other_problems(events):
    inputs = {"orders": {"relation": "shop.orders", "location": events, "changelog_format": "append",
                         "uniqe_key": ["id"], "event_time": "ordered_at"}}
    with pytest.raises(ConfigError) as err:
        compile_model(name="order_items", sql=SQL, inputs=inputs, config={"join_stratgy": "multi"})
    assert err.value.problems == [
        "input 'orders': unknown key 'uniqe_key': did you mean 'unique_key'?",
        "input 'orders': event_time column 'ordered_at' is not one of its columns",
        "unknown config key 'join_stratgy': did you mean 'join_strategy'?",
    ]


def test_an_unknown_key_like_no_known_one_lists_the_known_keys():
    with pytest.raises(ConfigError) as err:
        InputSpec.from_dict("orders", {"columns": [["id", "int"]], "owner": "shop team"})
    assert err.value.problems == ["input 'orders': unknown key 'owner': known: columns, unique_key, event_time, "
                                  "watermark_delay, location, changelog_format, op_column, delete_column, "
                                  "sequence_column, proc_time, storage_options"]
    with pytest.raises(ConfigError, match="unknown config key 'statettl': did you mean 'state_ttl'"):
        ModelConfig.from_dict({"statettl": "1 hour"})
