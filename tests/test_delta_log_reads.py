"""How often a run reads a table's Delta log: once per table while it plans (`delta_log.latest_once`)."""
from __future__ import annotations

import pyarrow as pa
from deltalake import write_deltalake

from scenario import Scenario, insert

from streamjoin.runtime import run as run_module
from streamjoin.storage import delta_log


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
