"""How often a run reads a table's Delta log: once per table while it plans (`delta_log.latest_once`), once
per version it pins (`delta_log.pinned_versions`), and how long a log gets between checkpoints."""
from __future__ import annotations

import os
from collections import Counter

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from pyspark.sql.types import LongType, StructField, StructType

from scenario import Scenario, insert

from streamjoin.api import version_of_run
from streamjoin.runtime import run as run_module
from streamjoin.storage import change_data, delta_log


def _loads(monkeypatch) -> list[str]:
    """The paths of every Delta table `delta_log` loads from now on."""
    loads: list[str] = []
    real = delta_log.DeltaTable

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, path, *args, **kwargs):
            loads.append(str(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(delta_log, "DeltaTable", Counted)
    return loads


def test_inside_latest_once_each_table_is_read_once_and_answers_as_of_that_read(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1]}))
    loads = _loads(monkeypatch)
    with delta_log.latest_once():
        assert delta_log.exists(path) and delta_log.version(path) == 0
        write_deltalake(path, pa.table({"x": [2]}), mode="append")  # a writer commits meanwhile
        assert delta_log.version(path) == 0 and delta_log.app_version(path, "streamjoin:m") is None
        assert not delta_log.exists(str(tmp_path / "none"))
    assert loads == [path]
    assert delta_log.version(path) == 1  # outside the block, every call reads the log again


def test_a_run_reads_each_tables_log_once_while_it_plans(spark, tmp_path, monkeypatch):
    m = Scenario(spark, tmp_path, "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k",
                 l=[("k", "int"), ("v", "int")], r=[("k", "int"), ("w", "int")])
    m.run(l=[insert(1, 10)], r=[insert(1, 100)])
    loads = _loads(monkeypatch)
    planned: list[str] = []
    original = run_module.Run.prepare

    def prepare(self):
        before = len(loads)
        out = original(self)
        planned.extend(loads[before:])
        return out

    monkeypatch.setattr(run_module.Run, "prepare", prepare)
    m.run(l=[insert(2, 20)], r=[insert(2, 200)])
    assert planned and len(planned) == len(set(planned)), planned  # every table and input, each read once
    assert m.report.status == "committed"


def test_commits_are_read_newest_first_in_growing_chunks_so_a_run_is_found_without_the_whole_log(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    for run in range(30):  # version v is run v's commit, but version 2 is a maintenance commit (no run)
        metadata = {} if run == 2 else {"streamjoin.run": str(run)}
        write_deltalake(path, pa.table({"x": [run]}), mode="append",
                        commit_properties=CommitProperties(custom_metadata=metadata))
    assert [e["version"] for e in delta_log.newest_commits(DeltaTable(path))] == list(range(29, -1, -1))
    limits: list[int | None] = []
    real = DeltaTable.history
    monkeypatch.setattr(DeltaTable, "history", lambda self, limit=None: limits.append(limit) or real(self, limit))
    assert version_of_run(path, 28) == 28 and limits == [4]
    limits.clear()
    assert version_of_run(path, 19) == 19 and limits == [4, 16]
    limits.clear()
    assert version_of_run(path, 1) == 2 and limits == [4, 16, 64], "a maintenance commit keeps the run before it"


def _commit(path: str, run: int, **kwargs) -> None:
    """Commit one bookkeeping file with one row, as run `run` of app `streamjoin:m`."""
    adds = delta_log.write_small(pa.table({"x": pa.array([run], pa.int64())}), path, tag=f"r{run}")
    delta_log.commit(path, adds, StructType([StructField("x", LongType())]), app_id="streamjoin:m", run_id=run,
                     metadata={}, **kwargs)


def test_inside_pinned_versions_a_version_is_opened_once_until_a_commit_moves_its_table(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _commit(path, 0)
    loads = _loads(monkeypatch)
    with delta_log.pinned_versions():
        latest = delta_log.table(path)
        assert delta_log.table(path, 0) is latest  # opened at its latest version, which is version 0
        assert [f.num_records for f in delta_log.data_files(path, 0)] == [1]
        assert loads == [path]
        _commit(path, 1, read_version=0)  # commits on the table opened at version 0
        assert delta_log.table(path, 0).version() == 0 and delta_log.table(path, 1).version() == 1
    assert delta_log.table(path, 0) is not delta_log.table(path, 0)  # outside the block, each call opens it


def test_a_run_opens_every_table_once(spark, tmp_path, monkeypatch):
    m = Scenario(spark, tmp_path, "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k",
                 l=[("k", "int"), ("v", "int")], r=[("k", "int"), ("w", "int")])
    m.run(l=[insert(1, 10)], r=[insert(1, 100)])
    loads = _loads(monkeypatch)
    run = run_module.Run.execute
    during: list[str] = []
    monkeypatch.setattr(run_module.Run, "execute", lambda self: (loads.clear(), run(self), during.extend(loads))[1])
    m.run(l=[insert(2, 20)], r=[insert(2, 200)])
    assert m.report.status == "committed" and m.result == Counter({(1, 10, 100): 1, (2, 20, 200): 1})
    opened = Counter(during)
    inputs = {spec.location for spec in m.plan.inputs.values()}
    own = {m.tables.result, m.tables.changelog, m.tables.runs, *m.tables.state_tables()}
    assert set(opened) == inputs | own, opened
    # each at planning (its latest version); the versions it pinned (what it reads of inputs, state
    # and result, the versions it commits on) are those same tables, and at commit a table no other
    # writer moved since is not opened again (`delta_log.committed_after`)
    assert all(n == 1 for n in opened.values()), opened


def test_committed_after_tells_whether_a_table_has_a_later_version(tmp_path):
    path = str(tmp_path / "t")
    _commit(path, 0)
    assert not delta_log.committed_after(path, 0)
    _commit(path, 1, read_version=0)
    assert delta_log.committed_after(path, 0) and not delta_log.committed_after(path, 1)
    for run in range(2, 12):  # past a checkpoint, whose version keeps its JSON commit as well
        _commit(path, run, read_version=run - 1)
    assert [delta_log.committed_after(path, v) for v in (9, 10, 11)] == [True, True, False]


def test_tables_streamjoin_makes_are_checkpointed_every_ten_versions(tmp_path):
    for name, changes in (("plain", None), ("with_feed", [])):
        path = str(tmp_path / name)
        for run in range(11):
            _commit(path, run, changes=changes)
        table = DeltaTable(path)
        assert table.version() == 10
        assert table.metadata().configuration[change_data.CHECKPOINT_INTERVAL_PROPERTY] == str(delta_log.CHECKPOINT_INTERVAL)
        checkpoints = [n for n in os.listdir(os.path.join(path, "_delta_log")) if ".checkpoint." in n]
        assert checkpoints, f"{name}: no checkpoint in 11 versions"
        assert sorted(table.to_pyarrow_table()["x"].to_pylist()) == list(range(11))
