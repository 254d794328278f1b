"""Exactly once across all of a model's tables.

A run interrupted at any boundary between its commits (an injected failure) or killed outright
(SIGKILL of a real process) and then run again leaves every table with exactly the rows of an
uninterrupted run: nothing lost, nothing duplicated. Running again after a complete run is a no-op.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from scenario import Scenario, delete, insert, update_after, update_before
from streamjoin.storage import delta_log
from streamjoin.runtime.run import run_once
from streamjoin.storage.state import UPDATED

SQL = "SELECT l.k, l.v, r.w FROM l FULL JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
FIRST = {"l": [insert(1, 10), insert(2, 20), insert(2, 20)], "r": [insert(1, 100), insert(4, 400)]}
SECOND = {"l": [delete(1, 10), update_before(2, 20), update_after(2, 21), insert(3, 30)],
          "r": [insert(2, 200), insert(3, 300), delete(4, 400)]}
CHILD = Path(__file__).with_name("run_one_model.py")


class InjectedCrash(Exception):
    """Stands for the process dying between two commits."""


def model(spark, root: Path) -> Scenario:
    return Scenario(spark, root, SQL, name="exactly_once", **INPUTS)


def contents(m: Scenario) -> dict[str, Counter]:
    """Every table of the model as a multiset of rows, read by delta-rs (not by the code under test).

    Run times differ between two models, so a state row's write time and the run log's manifest
    (which holds the start time) are left out."""
    out = {}
    for path in m.tables.all_tables():
        rows = DeltaTable(path).to_pyarrow_table()
        names = [n for n in rows.column_names if n != UPDATED]
        if path == m.tables.runs:
            names = ["run_id", "changes_in", "rows_out"]
        out[os.path.relpath(path, m.tables.home)] = Counter(tuple(r.values()) for r in rows.select(names).to_pylist())
    return out


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory) -> dict[str, Counter]:
    m = model(spark, tmp_path_factory.mktemp("uninterrupted"))
    m.run(**FIRST).run(**SECOND)
    return contents(m)


def crash_after(monkeypatch, commits: int) -> list[str]:
    """Make the run's `commits`+1-th commit fail (after `commits` went through); returns the committed paths."""
    real, done = delta_log.commit, []

    def commit(path, *args, **kwargs):
        if len(done) == commits:
            raise InjectedCrash(f"crash after {commits} commit(s)")
        real(path, *args, **kwargs)
        done.append(path)

    monkeypatch.setattr(delta_log, "commit", commit)
    return done


def test_a_crash_at_every_commit_boundary_is_repaired_by_the_next_run(spark, tmp_path, monkeypatch, uninterrupted):
    m = model(spark, tmp_path)
    m.run(**FIRST)
    m.runner.append_changes(1, SECOND)
    tables = len(m.tables.all_tables())
    crashed_at: list[list[str]] = []
    for boundary in range(tables):  # attempt i dies after its first commit; the run has one commit per table
        with monkeypatch.context() as patch:
            done = crash_after(patch, 0 if boundary == 0 else 1)
            with pytest.raises(InjectedCrash):
                run_once(spark, m.plan, m.tables)
        crashed_at.append(done)
    assert [len(d) for d in crashed_at] == [0] + [1] * (tables - 1), "every attempt commits one more table"
    assert sorted(p for d in crashed_at for p in d) == sorted(m.tables.all_tables()[:-1])
    report = run_once(spark, m.plan, m.tables)
    assert report.run_id == 2 and report.status == "committed"
    assert contents(m) == uninterrupted


def test_a_crash_after_the_last_commit_leaves_a_complete_run(spark, tmp_path, monkeypatch, uninterrupted):
    m = model(spark, tmp_path)
    m.run(**FIRST)
    m.runner.append_changes(1, SECOND)
    real = delta_log.commit

    def commit(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if path == m.tables.runs:
            raise InjectedCrash("crash after the run log commit")

    with monkeypatch.context() as patch:
        patch.setattr(delta_log, "commit", commit)
        with pytest.raises(InjectedCrash):
            run_once(spark, m.plan, m.tables)
    versions = m.versions()
    assert run_once(spark, m.plan, m.tables).status == "no changes"
    assert m.versions() == versions, "running again after a complete run changes nothing"
    assert contents(m) == uninterrupted


@pytest.mark.parametrize("moment", ["while computing", "between commits"])
def test_a_killed_run_process_is_repaired_by_the_next_run(spark, tmp_path, uninterrupted, moment):
    """SIGKILL a real run process at a random moment of its computation, or as soon as its first commit lands."""
    m = model(spark, tmp_path)
    m.run(**FIRST)
    m.runner.append_changes(1, SECOND)
    before = {p: delta_log.version(p) for p in m.tables.all_tables()}
    hold = ["--hold-after-first-commit"] if moment == "between commits" else []
    child = subprocess.Popen([sys.executable, str(CHILD), json.dumps(m.runner.case), str(tmp_path), *hold],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "running"
        if moment == "while computing":
            time.sleep(random.Random(os.getpid()).uniform(0.0, 2.0))
        else:
            assert child.stdout.readline().strip() == "committed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    committed = [p for p, v in before.items() if delta_log.version(p) != v]
    assert m.tables.runs not in committed, "the kill should land before the run completed"
    if moment == "between commits":
        assert committed, "the kill should land after the first commit"
    report = run_once(spark, m.plan, m.tables)
    assert report.run_id == 2 and report.status == "committed"
    assert contents(m) == uninterrupted
