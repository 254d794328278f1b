"""A model's result as a Delta change data feed (`change_data_feed=true`, `storage.change_data`):
delta-rs's CDF reader, an independent reader of the Delta protocol, reads each run's version as
exactly that run's changelog (`_change_type` for `_row_kind`), even where the run rewrote whole
result files, and the feed replays to the result after every run."""
from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from scenario import Scenario, compacting_at, delete, insert, update_after, update_before
from pyspark.sql.types import IntegerType, StructField, StructType

from streamjoin.errors import ConcurrentRunError, ConfigError
from streamjoin.maintain import maintain
from streamjoin.storage import change_data, delta_log, filesystem
from test_exactly_once import InjectedCrash

SQL = "SELECT o.id, o.item, p.price FROM o LEFT JOIN p ON o.pid = p.pid"
INPUTS = {"o": [("id", "int"), ("item", "string"), ("pid", "int")], "p": [("pid", "int"), ("price", "int")]}
COLUMNS = ["id", "item", "price"]
KINDS = {v: k for k, v in change_data.CHANGE_TYPES.items()}
RUNS = [
    {"o": [insert(1, "pen", 10), insert(2, "ink", 20)], "p": [insert(10, 5)]},
    {"o": [delete(1, "pen", 10), insert(3, "cap", 10), insert(4, "nib", None)], "p": [insert(20, 7)]},
    {"o": [update_before(3, "cap", 10), update_after(3, "cap2", 20)], "p": [delete(10, 5)]},
    {"o": [insert(1, "pen", 20), delete(2, "ink", 20)], "p": [insert(10, 9), update_before(20, 7), update_after(20, 8)]},
    {"o": [], "p": [delete(20, 8)]},
]


def feed(path: str, version: int) -> list[tuple[str, tuple]]:
    """The rows delta-rs's CDF reader gives for one version of a table: (row kind, output row)."""
    rows = feed_rows(path, version)
    assert {r["_commit_version"] for r in rows} <= {version}
    return sorted((KINDS[r["_change_type"]], tuple(r[c] for c in COLUMNS)) for r in rows)


def replayed(path: str, since: int = 0, onto: Counter | None = None) -> Counter:
    """The feed from version `since`, replayed onto `onto`: +1 per insert or post-image, -1 per delete or pre-image."""
    out: Counter = Counter(onto or {})
    for r in pa.table(DeltaTable(path).load_cdf(starting_version=since).read_all()).to_pylist():
        out[tuple(r[c] for c in COLUMNS)] += 1 if KINDS[r["_change_type"]].startswith("+") else -1
    return Counter({k: v for k, v in out.items() if v})


@pytest.mark.parametrize("unique_key", [["id"], None], ids=["output unique key", "counted rows"])
def test_each_runs_version_of_the_result_reads_as_its_changelog_and_the_feed_replays_to_the_result(
        spark, tmp_path, unique_key):
    config = {"change_data_feed": True, **({"output_unique_key": unique_key} if unique_key else {})}
    m = Scenario(spark, tmp_path, SQL, config=config, unique_keys={"o": ["id"], "p": ["pid"]} if unique_key else None,
                 **INPUTS)
    kinds = set()
    with compacting_at(bucket_files=2, level0_files=2):  # runs fold level 0 and rewrite buckets: whole files change
        for i, changes in enumerate(RUNS):
            duplicates = [] if unique_key or i else [insert(5, "dup", 20)] * 2  # a row the join makes twice
            m.run(**{**changes, "o": changes["o"] + duplicates})
            result = m.tables.result
            version = delta_log.version(result)
            assert feed(result, version) == m.row_kinds
            assert replayed(result) == m.result
            kinds |= {k for k, _ in m.row_kinds}
    assert kinds == ({"+I", "-U", "+U", "-D"} if unique_key else {"+I", "-D"})
    last_run = delta_log.version(m.tables.result)
    maintain(m.tables, vacuum_hours=0)  # compaction and vacuum: versions that change no data
    assert delta_log.version(m.tables.result) > last_run
    assert pa.table(DeltaTable(m.tables.result).load_cdf(starting_version=last_run + 1).read_all()).num_rows == 0
    assert DeltaTable(m.tables.result).metadata().configuration[change_data.FEED_PROPERTY] == "true"
    assert m.result == Counter({(1, "pen", None): 1, (3, "cap2", None): 1, (4, "nib", None): 1,
                                **({} if unique_key else {(5, "dup", None): 2})})


def test_a_model_that_turns_the_feed_on_later_has_its_versions_exact_from_then_on(spark, tmp_path):
    plain = Scenario(spark, tmp_path, SQL, **INPUTS)
    plain.run(**RUNS[0]).run(**RUNS[1])
    assert change_data.FEED_PROPERTY not in DeltaTable(plain.tables.result).metadata().configuration
    before, since = plain.result, delta_log.version(plain.tables.result) + 1
    m = Scenario(spark, tmp_path, SQL, config={"change_data_feed": True}, **INPUTS)  # same tables, feed on
    m.runs = plain.runs
    with compacting_at(bucket_files=2, level0_files=2):
        for changes in RUNS[2:]:
            m.run(**changes)
            assert feed(m.tables.result, delta_log.version(m.tables.result)) == m.row_kinds
    assert DeltaTable(m.tables.result).protocol().min_writer_version >= 4
    assert replayed(m.tables.result, since, onto=before) == m.result != before


def test_a_run_cut_short_after_its_result_commit_leaves_one_version_of_its_changes(spark, tmp_path, monkeypatch):
    m = Scenario(spark, tmp_path, SQL, config={"change_data_feed": True}, **INPUTS)
    m.run(**RUNS[0])
    real = delta_log.commit

    def commit(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if path == m.tables.result:
            raise InjectedCrash("crash after the result's commit")

    monkeypatch.setattr(delta_log, "commit", commit)
    with pytest.raises(InjectedCrash):
        m.run(**RUNS[1])
    monkeypatch.undo()
    version = delta_log.version(m.tables.result)
    m.run()  # the rerun completes the run: its other tables, not the result again
    assert delta_log.version(m.tables.result) == version
    assert feed(m.tables.result, version) == m.row_kinds and m.row_kinds
    assert replayed(m.tables.result) == m.result


def test_a_version_that_changes_files_but_no_rows_reads_as_no_change_and_only_one_commit_takes_a_version(tmp_path):
    path = str(tmp_path / "t")
    schema = StructType([StructField("a", IntegerType())])
    rows = pa.table({"a": pa.array([1], pa.int32())})

    def commit(run_id: int, read_version: int | None) -> None:
        delta_log.commit(path, delta_log.write_small(rows, path, tag=f"r{run_id}"), schema, app_id="a", run_id=run_id,
                         metadata={}, read_version=read_version, changes=[])

    commit(1, None)
    commit(2, 0)  # adds a file and names no change data: the version names an empty change data file
    with pytest.raises(ConcurrentRunError):
        commit(3, 0)
    assert delta_log.version(path) == 1 and delta_log.app_version(path, "a") == 2
    assert feed_rows(path, 1) == [] and len(delta_log.data_files(path, 1)) == 2
    assert [r["a"] for r in feed_rows(path, 0)] == [1]


def feed_rows(path: str, version: int) -> list[dict]:
    return pa.table(DeltaTable(path).load_cdf(starting_version=version, ending_version=version).read_all()).to_pylist()


def test_a_model_on_an_object_store_refuses_the_feed_before_writing(spark, s3_lake):
    root = filesystem.join(s3_lake.uri, f"cdf-{uuid.uuid4().hex[:8]}")
    m = Scenario(spark, root, SQL, config={"change_data_feed": True}, **INPUTS)
    with pytest.raises(ConfigError, match="change_data_feed=true needs the model's tables on a filesystem .* or, if "
                                          "one writer at a time writes there, say so with the storage option "
                                          "AWS_S3_ALLOW_UNSAFE_RENAME=true"):
        m.run(**RUNS[0])
    assert all(delta_log.version(p) is None for p in m.tables.all_tables())


def test_a_model_on_an_object_store_with_a_single_writer_keeps_the_feed(spark, s3_lake):
    root = filesystem.join(s3_lake.uri, f"cdf-single-{uuid.uuid4().hex[:8]}")
    filesystem.register(root, {**s3_lake.options, filesystem.SINGLE_WRITER_OPTION: "true"})
    m = Scenario(spark, root, SQL, config={"change_data_feed": True, "output_unique_key": ["id"]},
                 unique_keys={"o": ["id"], "p": ["pid"]}, **INPUTS)
    with compacting_at(bucket_files=2, level0_files=2):
        for changes in RUNS:
            m.run(**changes)
            result = delta_log.table(m.tables.result)
            rows = pa.table(result.load_cdf(starting_version=result.version(), ending_version=result.version())
                            .read_all()).to_pylist()
            assert sorted((KINDS[r["_change_type"]], tuple(r[c] for c in COLUMNS)) for r in rows) == m.row_kinds
    log_file = filesystem.join(m.tables.result, "_delta_log", f"{delta_log.version(m.tables.result):020d}.json")
    assert not filesystem.create_new(log_file, b"{}") and b'"cdc"' in filesystem.read_bytes(log_file)


def test_the_config_key_takes_true_or_false():
    from streamjoin.spec import ModelConfig

    assert ModelConfig.from_dict({"change_data_feed": True}).change_data_feed
    with pytest.raises(ConfigError, match="change_data_feed 'yes' must be true or false"):
        ModelConfig.from_dict({"change_data_feed": "yes"})


def test_a_rebuilt_model_swapped_in_reads_as_the_net_change_of_its_result(spark, tmp_path):
    m = Scenario(spark, tmp_path, SQL, config={"change_data_feed": True, "output_unique_key": ["id"]},
                 unique_keys={"o": ["id"], "p": ["pid"]}, **INPUTS)
    for changes in RUNS[:3]:
        m.run(**changes)
    before = m.result
    edited = Scenario(spark, tmp_path, SQL.replace("LEFT JOIN", "JOIN"), config={"change_data_feed": True,
                      "output_unique_key": ["id"]}, unique_keys={"o": ["id"], "p": ["pid"]}, **INPUTS)
    edited.runs = m.runs
    edited.run()  # the plan changed: rebuilt side by side, then swapped in
    assert edited.report.metrics.get("swapped_in")
    assert feed(m.tables.result, delta_log.version(m.tables.result)) == edited.row_kinds
    assert edited.result == Counter({k: v for k, v in before.items() if k[2] is not None}) != before
    assert replayed(m.tables.result) == edited.result
