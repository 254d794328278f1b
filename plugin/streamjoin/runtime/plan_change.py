"""Whether a model's state still fits its plan, and what changed in the plan since its last run.

A run records two fingerprints in its manifest: its whole plan's (`plan`) and that of the part its
state depends on (`state`: the joins, what each input keeps, not the filters after the last join
nor the output columns). It records the plan's outline (`JoinPlan.explain`) in its run-log row
(metrics `plan_outline`). Against the last run's manifest, a plan is one of:

- the same plan: the run continues;
- a change of the projection only (`reprojects`): the run re-projects the result from the last
  join's state (`runtime.reprojection`), where that state holds every row the result is made of;
- any other change: the state must be rebuilt. The run refuses (`PlanChangedError`; under
  `on_plan_change='full_refresh'` the model is refreshed in full), and it, like
  `python -m streamjoin explain`, shows the difference line by line.
"""
from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any, Mapping

from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..errors import PlanChangedError
from ..spec import ROW_KIND_COLUMN, RUN_ID_COLUMN
from ..sql.plan import Join, JoinPlan, Scan
from ..storage import delta_log
from ..storage.tables import ModelTables
from ..types import Side

#: The run log's metrics key holding the outline of the plan that ran.
OUTLINE_KEY = "plan_outline"


def plan_fingerprint(plan: JoinPlan) -> str:
    """A hash of the whole plan (its outline) and its state's bucket count: equal, the run continues."""
    return _fingerprint(plan.explain(), plan)


def state_fingerprint(plan: JoinPlan) -> str:
    """A hash of what the state depends on (the plan without its projection)."""
    return _fingerprint(plan.state_outline(), plan)


def _fingerprint(outline: str, plan: JoinPlan) -> str:
    shape = f"{outline}\nbuckets={plan.config.state_buckets}"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def fits(plan: JoinPlan, last_manifest: Mapping[str, Any] | None) -> bool:
    """Whether the state the run of `last_manifest` left (none before a first run) fits `plan` as it is."""
    return not last_manifest or last_manifest.get("plan") == plan_fingerprint(plan)


def reprojection_blocker(plan: JoinPlan) -> str | None:
    """Why the model's result cannot be re-projected from its last join's state (None: it can).

    It can when that state holds every row the result was made of: a regular or multi-way last
    join, no `state_ttl`, and the rows its state does not keep (NULL join keys of a side it
    pads) coming straight from an input, whose snapshot holds them."""
    root = plan.root
    if plan.config.state_ttl is not None:
        return "state_ttl lets rows leave state that the result still holds"
    if isinstance(root, Join):
        if root.time_bound or root.temporal or root.window or root.asof:
            article = "an" if root.kind[0] in "aeiou" else "a"
            return f"the last join is {article} {root.kind} join, whose state does not keep every row its result was made of"
        if root.null_aware:
            return "the last join is NOT IN, whose state does not keep the subquery's NULL rows"
        padded = [child for child, side in ((root.left, Side.LEFT), (root.right, Side.RIGHT))
                  if root.join_type.preserves(side) and not isinstance(child, Scan)]
        if padded:
            return (f"the last join pads the rows of join {padded[0].id} with a NULL key, which its state does not "
                    "keep")
    return None


def reprojects(plan: JoinPlan, last_manifest: Mapping[str, Any] | None, tables: ModelTables) -> bool:
    """True when only the projection changed since the last run (the run re-projects the result),
    False when the plan is the same; raises `PlanChangedError` when the state must be rebuilt."""
    if fits(plan, last_manifest):
        return False
    assert last_manifest is not None
    same_state = last_manifest.get("state") == state_fingerprint(plan)
    why = reprojection_blocker(plan) if same_state else None
    if same_state and why is None:
        return True
    what = (f"only its projection changed, but the result cannot be re-projected from state: {why}" if same_state
            else "the change reaches its joins or what they keep, so its state no longer fits")
    raise PlanChangedError(what, outline_diff(tables, plan), model=plan.model)


def changelog_columns(plan: JoinPlan, tables: ModelTables, output: StructType, held: StructType, *,
                      change: str) -> StructType | None:
    """None when the output's columns (names and types, in any order: Delta reads columns by name)
    are those of the result (`held`, `results.result_columns`). Else
    the columns of this run's changelog rows: every data column the changelog table holds, in its
    order, then the output's new ones (the changelog gains them; a column the output drops stays,
    NULL in later rows). The result is then replaced whole, with the output's columns.

    Raises `PlanChangedError`, which no rebuild mends, for an output column whose type differs from
    that of the changelog's column of the same name: a Delta table keeps a column's type. `change`
    says what else changed."""
    if {f.name: f.dataType for f in held.fields} == {f.name: f.dataType for f in output.fields}:
        return None
    logged = list(held.fields)
    if delta_log.exists(tables.changelog):
        logged = [f for f in from_arrow_schema(delta_log.table_schema(tables.changelog)).fields
                  if f.name not in (ROW_KIND_COLUMN, RUN_ID_COLUMN)]
    by_name = {f.name.lower(): f for f in logged}
    clashes = [f"{f.name} {by_name[f.name.lower()].dataType.simpleString()} before, {f.dataType.simpleString()} now"
               for f in output.fields if f.name.lower() in by_name and by_name[f.name.lower()].dataType != f.dataType]
    if clashes:
        raise PlanChangedError(f"{change}, but so did the type of output column(s) {'; '.join(clashes)}, which its "
                               "changelog table keeps", outline_diff(tables, plan), model=plan.model, rebuildable=False)
    return StructType(logged + [f for f in output.fields if f.name.lower() not in by_name])


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
