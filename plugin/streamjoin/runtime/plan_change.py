"""Whether a model's state still fits its plan, and what changed in the plan since its last run.

A run records its plan's fingerprint (a hash of what state depends on) in its manifest, and its
plan's outline (`JoinPlan.explain`) in its run-log row (metrics `plan_outline`). When a model's SQL
or configuration changes what its state depends on, the run that refuses to continue (or, under
`on_plan_change='full_refresh'`, rebuilds), and `python -m streamjoin explain`, show the difference
line by line.
"""
from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any, Mapping

from ..sql.plan import JoinPlan
from ..storage import delta_log
from ..storage.tables import ModelTables

#: The run log's metrics key holding the outline of the plan that ran.
OUTLINE_KEY = "plan_outline"


def plan_fingerprint(plan: JoinPlan) -> str:
    """A hash of what state depends on; a change means state must be rebuilt."""
    shape = f"{plan.explain()}\nbuckets={plan.config.state_buckets}"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def fits(plan: JoinPlan, last_manifest: Mapping[str, Any] | None) -> bool:
    """Whether the state the run of `last_manifest` left (none before a first run) fits `plan`."""
    return not last_manifest or last_manifest.get("plan") == plan_fingerprint(plan)


def last_outline(tables: ModelTables) -> str | None:
    """The plan outline the model's last run recorded (None before the first run, or for a run
    older than this record)."""
    if not delta_log.exists(tables.runs):
        return None
    log = delta_log.table(tables.runs).to_pyarrow_table(columns=["run_id", "metrics"]).to_pylist()
    if not log:
        return None
    last = max(log, key=lambda row: row["run_id"])
    return json.loads(last["metrics"] or "{}").get(OUTLINE_KEY)


def outline_diff(tables: ModelTables, plan: JoinPlan) -> str:
    """The lines of the plan's outline that differ from the last run's, as a unified diff."""
    before = last_outline(tables)
    if before is None:
        return "(the last run did not record its plan: it ran before this version of streamjoin)"
    lines = difflib.unified_diff(before.splitlines(), plan.explain().splitlines(), "plan of the last run",
                                 "plan now", lineterm="", n=1)
    return "\n".join(lines) or "(the outlines are equal: the state's bucket count changed)"
