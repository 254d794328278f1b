"""Two runs of one model at once (two DAG runs, or a DAG run and a manual `dbt run`): one commits.

Both runs plan against the same table versions (a barrier holds each at its first commit
until the other got there too); Delta's conflict check lets exactly one commit and fails the
other with ConcurrentRunError before it wrote anything. The tables then equal those of a
single run, and the loser's rerun finds nothing left to do.
"""
from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from streamjoin import ConcurrentRunError
from streamjoin.storage import delta_log
from streamjoin.conformance import CaseRunner
from streamjoin.runtime.run import Run, run_once

CASE = {
    "name": "orders_prices",
    "sql": "SELECT o.id, o.product, p.price FROM orders AS o JOIN prices AS p ON o.product = p.product",
    "inputs": {"orders": {"columns": [["id", "bigint"], ["product", "bigint"]]},
               "prices": {"columns": [["product", "bigint"], ["price", "bigint"]]}},
    "runs": [],
}
BATCHES = [
    {"orders": [("+I", [1, 10]), ("+I", [2, 11])], "prices": [("+I", [10, 999])]},
    {"orders": [("-D", [1, 10]), ("+I", [3, 11])], "prices": [("+I", [11, 2500])]},
]


def tables_of(runner: CaseRunner, run_id: int) -> dict[str, Counter]:
    runs = delta_log.data_files(runner.tables.runs, delta_log.version(runner.tables.runs))
    return {"result": Counter(runner.result()), "changelog": Counter(runner.changelog(run_id)),
            "run log files": len(runs)}


def race(runner: CaseRunner, monkeypatch: pytest.MonkeyPatch, *, one_after_the_other: bool) -> list[object]:
    """Two concurrent run_once calls on the same model; each one's report or error.

    Both plan and compute before either commits. Side by side, they then make their Delta commits
    together (Delta's conflict check decides); one after the other, the first to get there
    commits all its tables before the other starts committing (it finds them taken)."""
    barrier = threading.Barrier(2, timeout=300)
    waited: set[int] = set()
    arrived: list[int] = []
    first_done = threading.Event()
    held = (Run, "commit") if one_after_the_other else (delta_log, "commit")
    original = getattr(*held)

    def hold(*args, **kwargs):
        me = threading.get_ident()
        if me not in waited:
            waited.add(me)
            barrier.wait()
            arrived.append(me)
            if one_after_the_other and arrived[0] != me:
                first_done.wait(300)
        return original(*args, **kwargs)

    monkeypatch.setattr(*held, hold)
    outcomes: list[object] = [None, None]

    def attempt(i: int) -> None:
        try:
            outcomes[i] = run_once(runner.spark, runner.plan, runner.tables)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcomes[i] = exc
        finally:
            if arrived and arrived[0] == threading.get_ident():
                first_done.set()

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(*held, original)
    return outcomes


@pytest.mark.parametrize("one_after_the_other", [False, True], ids=["side by side", "one after the other"])
@pytest.mark.parametrize("runs_before", [0, 1], ids=["first run", "later run"])
def test_two_concurrent_runs_one_commits_the_other_fails_and_changes_nothing(spark, tmp_path: Path, runs_before: int,
                                                                              one_after_the_other: bool,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    raced = CaseRunner(spark, CASE, str(tmp_path / "raced"))
    single = CaseRunner(spark, CASE, str(tmp_path / "single"))
    for index in range(runs_before + 1):
        for runner in (raced, single):
            runner.append_changes(index, BATCHES[index])
        if index < runs_before:
            run_once(spark, raced.plan, raced.tables)
            run_once(spark, single.plan, single.tables)
    expected = run_once(spark, single.plan, single.tables)

    outcomes = race(raced, monkeypatch, one_after_the_other=one_after_the_other)

    errors = [o for o in outcomes if isinstance(o, BaseException)]
    reports = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(errors) == 1 and len(reports) == 1, outcomes
    assert isinstance(errors[0], ConcurrentRunError), repr(errors[0])
    assert "another run of the same model committed" in str(errors[0])
    assert reports[0].status == "committed" and reports[0].run_id == expected.run_id
    assert reports[0].changes_in == expected.changes_in
    assert tables_of(raced, expected.run_id) == tables_of(single, expected.run_id)

    versions = raced.versions()
    rerun = run_once(spark, raced.plan, raced.tables)
    assert rerun.status == "no changes" and raced.versions() == versions
