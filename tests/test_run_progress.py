"""A long run logs its progress at INFO on the `streamjoin` logger (phase, rows, seconds elapsed);
a short one logs only its summary. "Long" is `run.PROGRESS_AT` changes (1M), lowered here."""
from __future__ import annotations

import logging
import re

from scenario import Scenario, insert
from streamjoin.runtime import run


def test_runs_from_progress_at_changes_log_each_phase(spark, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(run, "PROGRESS_AT", 4)
    m = Scenario(spark, tmp_path, "SELECT l.k, r.w FROM l JOIN r ON l.k = r.k", name="progress",
                 l=[("k", "int")], r=[("k", "int"), ("w", "int")])
    with caplog.at_level(logging.INFO, logger="streamjoin"):
        m.run(l=[insert(1)], r=[insert(1, 10)])  # 2 changes: short
        short = [r.getMessage() for r in caplog.records if r.name == "streamjoin"]
        caplog.clear()
        m.run(l=[insert(2), insert(3)], r=[insert(2, 20), insert(3, 30)])  # 4 changes: long
        long = [r.getMessage() for r in caplog.records if r.name == "streamjoin"]
    assert len(short) == 1 and short[0].startswith("streamjoin progress run 1: committed"), short
    phases = [re.match(r"streamjoin progress run 2: (\w+) done: (.*); (\d+\.\d)s elapsed$", line) for line in long[:-1]]
    assert all(phases), long
    assert [p.group(1) for p in phases] == ["read", "join", "write", "count", "commit"]
    assert phases[0].group(2) == "4 changes in (l 2, r 2)"
    assert phases[3].group(2) == "rows out +2, -0"
    elapsed = [float(p.group(3)) for p in phases]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= m.report.seconds + 0.1
    assert long[-1].startswith("streamjoin progress run 2: committed")
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "streamjoin")
