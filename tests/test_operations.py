"""Operating a model: `python -m streamjoin status` and `python -m streamjoin maintain`."""
from __future__ import annotations

import json
import os
import socket
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from scenario import Scenario, delete, insert
from streamjoin import ModelBusyError
from streamjoin.errors import StreamJoinError
from streamjoin.storage import delta_log
from streamjoin.runtime import lease
from streamjoin.__main__ import main
from streamjoin.maintain import maintain
from streamjoin.storage.results import stage_result
from streamjoin.runtime.run import app_id, run_once

SQL = "SELECT l.k, l.v, r.w FROM l JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
HISTORY = [
    {"l": [insert(1, 10), insert(2, 20)], "r": [insert(1, 100)]},
    {"l": [insert(3, 30)], "r": [insert(2, 200), insert(3, 300)]},
    {"l": [delete(1, 10)], "r": [insert(2, 201)]},
]
RESULT = {(2, 20, 200): 1, (2, 20, 201): 1, (3, 30, 300): 1}


@pytest.fixture(scope="module")
def model(spark, tmp_path_factory) -> Scenario:
    m = Scenario(spark, tmp_path_factory.mktemp("ops"), SQL, name="orders_enriched", **INPUTS)
    for changes in HISTORY:
        m.run(**changes)
    return m


def files(path: str) -> int:
    return len(DeltaTable(path).file_uris())


def test_help_says_what_the_command_line_is_for_and_what_its_exit_statuses_mean(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "streamjoin's command line: the state, upkeep and plan of streaming_join models." in text
    for command in ("status", "maintain", "explain", "class-archive"):
        assert command in text
    assert "Exit status: 0 done; 1 no model found; 2 an error stopped the command; 3 (maintain)" in text


def test_status_shows_recent_runs_and_table_sizes(model, capsys):
    assert main(["status", str(model.tables.root), "--runs", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"model orders_enriched ({model.tables.home})"
    runs = lines[lines.index("recent runs:") + 3:lines.index("tables:") - 1]
    assert [line.split()[0] for line in runs] == ["3", "2"], out
    assert "l=1, r=1" in runs[0] and "+1, -1" in runs[0], out  # run 3: (1,10,100) retracted, (2,20,201) added
    log = {r["run_id"]: json.loads(r["metrics"]) for r in DeltaTable(model.tables.runs).to_pyarrow_table().to_pylist()}
    stored = {name: sum(a["num_records"] for a in pa.table(DeltaTable(model.tables.state(name))
                                                            .get_add_actions(flatten=True)).to_pylist())
              for name in ("j1_left", "j1_right")}
    assert log[3]["state_rows"] == stored, "the run log records the rows each state table stores after the run"
    assert log[3]["j1"]["touched_keys"] == 2  # keys 1 (left delete) and 2 (right insert)
    table_rows = {line.split()[0]: line.split() for line in lines[lines.index("tables:") + 3:]}
    assert set(table_rows) == {"state/j1_left", "state/j1_right", "changelog", "result", "runs"}
    assert int(table_rows["result"][3]) == sum(RESULT.values())
    assert int(table_rows["runs"][3]) == 3


def test_status_of_a_folder_without_models_says_so_on_stderr_and_exits_1(model, tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"no streamjoin model tables under {tmp_path}\n"
    # one folder with models and one without: the models' status, the other named, exit 0
    assert main(["status", str(model.tables.root), str(tmp_path / "nothing")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("model orders_enriched") and err == f"no streamjoin model tables under {tmp_path / 'nothing'}\n"


def test_explain_says_why_dbt_could_not_start(tmp_path, capsys):
    assert main(["explain", str(tmp_path), "--select", "m"]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path} is not a dbt project (it has no dbt_project.yml): pass the "
                                       "folder of the project whose model to explain\n")
    (tmp_path / "dbt_project.yml").write_text('name: p\nversion: "1"\nprofile: p\n')
    missing = tmp_path / "no_profiles"
    assert main(["explain", str(tmp_path), "--select", "m", "--profiles-dir", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: Path '{missing}' does not exist.\n"  # dbt refused it, printing nothing


def test_maintain_and_status_refuse_options_out_of_range_and_touch_nothing(model, capsys):
    versions = {p: DeltaTable(p).version() for p in model.tables.all_tables()}
    home = str(model.tables.home)
    assert main(["maintain", home, "--vacuum-hours", "-1", "--changelog-keep-runs", "-2"]) == 2
    assert capsys.readouterr().err == (
        "error: maintain: vacuum_hours must be a finite number, 0 or more "
        "(hours of versions whose files to keep), not -1.0; "
        "changelog_keep_runs must be 0 or more (runs whose changes to keep as they are), not -2\n")
    assert {p: DeltaTable(p).version() for p in model.tables.all_tables()} == versions
    for hours in (float("nan"), float("inf")):
        with pytest.raises(StreamJoinError, match="vacuum_hours must be a finite number, 0 or more"):
            maintain(model.tables, vacuum_hours=hours)
    with pytest.raises(SystemExit) as done:
        main(["status", home, "--runs", "0"])
    assert done.value.code == 2 and "--runs must be 1 or more, not 0" in capsys.readouterr().err


def test_maintain_keeps_the_files_of_a_fraction_of_an_hour(spark, tmp_path):
    """delta-rs vacuums by whole hours: half an hour keeps what an hour keeps, not what 0 hours keeps."""
    fresh = Scenario(spark, tmp_path, SQL, name="fresh", **INPUTS)
    for changes in HISTORY:
        fresh.run(**changes)
    done = maintain(fresh.tables, vacuum_hours=0.5)  # compaction has just removed files: none is vacuumed
    assert sum(t.files_compacted for t in done) > 0 and sum(t.files_vacuumed for t in done) == 0
    assert sum(t.files_vacuumed for t in maintain(fresh.tables, vacuum_hours=0)) > 0


def test_runs_write_no_checksum_files_beside_their_data_files(model):
    """Each table's Delta log is its record; Hadoop's `.crc` twin of every local file is not written."""
    written = [name for _, _, names in os.walk(model.tables.home) for name in names]
    assert any(name.endswith(".parquet") for name in written)
    assert not [name for name in written if name.endswith(".crc")]


def test_maintain_compacts_trims_and_the_model_keeps_running(model, capsys):
    before = {p: files(p) for p in model.tables.all_tables()}
    changelog_version = delta_log.version(model.tables.changelog)
    assert main(["maintain", str(model.tables.home), "--changelog-keep-runs", "1", "--vacuum-hours", "0"]) == 0
    assert "changelog" in capsys.readouterr().out
    assert files(model.tables.runs) == 1 < before[model.tables.runs]
    assert files(model.tables.result) <= before[model.tables.result]
    live = DeltaTable(model.tables.changelog).to_pyarrow_table().to_pylist()
    assert {r["_run_id"] for r in live} == {2, 3}, "the last run's changes are kept, runs 1-2 as their net change"
    assert sorted((r["k"], r["v"], r["w"]) for r in live if r["_run_id"] == 2) == [(1, 10, 100), (2, 20, 200), (3, 30, 300)]
    assert {r["_row_kind"] for r in live if r["_run_id"] == 2} == {"+I"}
    replayed = Counter()
    for r in live:
        replayed[(r["k"], r["v"], r["w"])] += 1 if r["_row_kind"] in ("+I", "+U") else -1
    assert +replayed == RESULT, "the changelog still replays to the result"
    # a reader of this changelog skips retention and compaction: no change in the new versions
    assert delta_log.added_between(model.tables.changelog, changelog_version,
                                   delta_log.version(model.tables.changelog), what="changelog") == []
    assert model.result == RESULT
    model.run(l=[insert(2, 21)], r=[delete(3, 300)])
    assert model.changelog == {(2, 21, 200): 1, (2, 21, 201): 1, (3, 30, 300): -1}
    assert model.result == {(2, 20, 200): 1, (2, 20, 201): 1, (2, 21, 200): 1, (2, 21, 201): 1}


def test_maintain_refuses_while_a_run_holds_the_model_and_a_run_refuses_during_maintenance(model):
    versions = model.versions()
    with lease.holding(model.tables, "run", exclusive_of=("maintain",)):
        with pytest.raises(ModelBusyError, match=r"model 'orders_enriched' is held by a run \(pid"):
            maintain(model.tables)
    assert model.versions() == versions
    with lease.holding(model.tables, "maintain", exclusive_of=("run", "maintain")):
        with pytest.raises(ModelBusyError, match="held by a maintain"):
            run_once(model.runner.spark, model.plan, model.tables)
    assert model.versions() == versions


def test_a_marker_of_a_dead_process_does_not_hold_the_model(model):
    folder = os.path.join(model.tables.home, lease.FOLDER)
    dead = {"what": "run", "host": socket.gethostname(), "pid": 2 ** 22 + 1, "started": 0}
    with open(os.path.join(folder, "run-dead.json"), "w") as fh:
        json.dump(dead, fh)
    maintain(model.tables)
    assert os.listdir(folder) == []


def test_maintain_refuses_an_incomplete_run(spark, tmp_path, monkeypatch):
    m = Scenario(spark, tmp_path, SQL, name="half_done", **INPUTS)
    m.run(**HISTORY[0])
    m.runner.append_changes(1, HISTORY[1])
    real = delta_log.commit

    def first_commit_only(path, *args, **kwargs):
        real(path, *args, **kwargs)
        raise RuntimeError("crash after the first commit")

    with monkeypatch.context() as patch:
        patch.setattr(delta_log, "commit", first_commit_only)
        with pytest.raises(RuntimeError):
            run_once(spark, m.plan, m.tables)
    versions = m.versions()
    with pytest.raises(ModelBusyError, match="run 2 is incomplete"):
        maintain(m.tables)
    assert m.versions() == versions


def test_an_insert_only_run_counts_its_result_rows_and_refuses_a_retraction(spark, tmp_path):
    """An insert-only run appends its result with no merge and counts the rows from the written files;
    a negative weight reaching that append (a bug, not bad input) stops the run before its commits
    instead of vanishing."""
    from streamjoin.storage.writes import RunWriter

    m = Scenario(spark, tmp_path, SQL, **INPUTS).run(l=[insert(1, 10), insert(1, 10)], r=[insert(1, 100), insert(2, 200)])
    assert m.report.rows_out == {"+": 2, "-": 0}
    assert m.result == {(1, 10, 100): 2}
    retracting = spark.createDataFrame([(1, 10, 100, -1), (3, 30, 300, 1)], "k int, v int, w int, _weight long")
    versions = {m.tables.result: delta_log.version(m.tables.result)}
    writer = RunWriter(tag="r2", parallelism=1)
    staged = stage_result(spark, retracting, m.plan, m.tables, versions, writer, inserts_only=True)
    writer.run()
    with pytest.raises(StreamJoinError, match=r"streamjoin bug: model .* insert only, yet its change retracts a row: \{\"k\":1,\"v\":10,\"w\":100\} \(1 row\(s\) retracted\)"):
        staged.verify()
    assert delta_log.version(m.tables.result) == versions[m.tables.result]


def test_a_run_with_no_new_changes_says_since_which_run(model):
    last = delta_log.app_version(model.tables.runs, app_id(model.tables.model))
    versions = model.versions()
    report = run_once(model.runner.spark, model.plan, model.tables)
    assert report.status == "no changes" and model.versions() == versions
    assert report.summary() == f"streamjoin orders_enriched: no new changes since run {last} on any input; nothing written"


def test_maintain_skips_a_model_a_run_holds_maintains_the_rest_and_fails(spark, model, tmp_path, capsys):
    held = Scenario(spark, tmp_path, SQL, name="held_model", **INPUTS).run(**HISTORY[0])
    versions = held.versions()
    with lease.holding(held.tables, "run", exclusive_of=("maintain",)):
        code = main(["maintain", str(held.tables.root), str(model.tables.home), "--vacuum-hours", "0"])
    out, err = capsys.readouterr()
    assert code == 3, (out, err)
    assert "skipped: model 'held_model' is held by a run (pid" in err, err
    assert "error: 1 of 2 model(s) not maintained (held_model): rerun maintain once they are free" in err, err
    assert held.versions() == versions
    maintained = out.splitlines()
    assert maintained[0] == "model orders_enriched:", out  # the model after the held one was maintained
    assert {line.split()[0] for line in maintained[3:]} == {"state/j1_left", "state/j1_right", "changelog", "result",
                                                             "runs"}, out


def write_manifest(project, *models: tuple[str, str]) -> None:
    """A dbt manifest listing `models` as (name, materialized), as `dbt parse` writes it (the fields read)."""
    os.makedirs(project / "target", exist_ok=True)
    nodes = {f"model.shop.{name}": {"resource_type": "model", "name": name, "config": {"materialized": how, "enabled": True}}
             for name, how in models}
    nodes["seed.shop.orders"] = {"resource_type": "seed", "name": "orders_enriched", "config": {"enabled": True}}
    (project / "target" / "manifest.json").write_text(json.dumps({"nodes": nodes}))


def test_status_marks_models_the_project_no_longer_has_as_orphaned(model, tmp_path, capsys):
    project = tmp_path / "shop"
    write_manifest(project, ("orders_enriched_v2", "streaming_join"), ("orders_enriched", "table"))
    assert main(["status", str(model.tables.root), "--project-dir", str(project)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"model orders_enriched ({model.tables.home})"
    assert lines[1].startswith("ORPHANED: the project has no streaming_join model 'orders_enriched' (renamed or "
                               "removed?), so nothing runs it."), lines[1]
    assert f"delete its tables with `rm -r {model.tables.home}`" in lines[1]
    assert lines[-1] == "1 orphaned model(s), not in the project: orders_enriched"

    write_manifest(project, ("orders_enriched", "streaming_join"))
    assert main(["status", str(model.tables.root), "--project-dir", str(project)]) == 0
    assert "ORPHANED" not in capsys.readouterr().out


def test_status_of_a_project_without_a_manifest_says_how_to_get_one(model, tmp_path, capsys):
    assert main(["status", str(model.tables.root), "--project-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no dbt manifest at {tmp_path / 'target' / 'manifest.json'}: run `dbt parse` in {tmp_path}" in err, err
