"""What a model computes and keeps: `python -m streamjoin explain`, and the outline in the code dbt writes.

`describe(plan)` adds to the plan's outline (`JoinPlan.explain`) what a user needs to know to
operate the model: each join's operator and the state it keeps (tables, layout, keys, buckets),
the inputs that must be append-only, what the watermark depends on and what leaves state when.
Given the model's tables, it adds the state's size after the last run and whether the current
plan still fits that state (or a run would need a rebuild). Everything comes from the plan and
the Delta logs: no Spark.
"""
from __future__ import annotations

import datetime as dt
import posixpath

from .errors import PlanChangedError
from .operators.lookup import EMITTED, dimension_keys
from .runtime.plan_change import outline_diff, reprojects
from .runtime.run import manifest_of
from .sql.plan import Join, JoinPlan, MultiJoin, Node, Scan, keeps_emitted, scans
from .sql.strategy import user_text
from .sql.windows import padded_windows_joined
from .status import table_size
from .storage import delta_log
from .storage.state import StateLayout
from .storage.tables import ModelTables
from .types import Side, duration_text


def append_only_inputs(plan: JoinPlan) -> dict[str, str]:
    """The inputs whose changes must all be insertions, each with the join that needs it so."""
    out: dict[str, str] = {}
    for node in plan.nodes():  # interval and window joins need insertions; temporal and lookup joins do not (Flink)
        if not isinstance(node, Join) or not (node.time_bound or node.window):
            continue
        # of a temporal join's rows, only its probes must be insertions
        needing = [scan for side in (node.left, node.right)
                   for scan in scans(side.left if isinstance(side, Join) and side.temporal else side)]
        why = f"the {'interval' if node.time_bound else 'window'} join {node.id} reads it"
        for scan in needing:
            out.setdefault(scan.input, why)
    return out


def _side_label(node: Node) -> str:
    if isinstance(node, Scan):
        return f"{node.input} AS {node.alias}"
    return f"the rows of {node.id}"


def _regular_sides(plan: JoinPlan, node: Join) -> list[tuple[str, str]]:
    out = []
    for s in Side:
        child = node.left if s is Side.LEFT else node.right
        exprs = [k.left if s is Side.LEFT else k.right for k in node.keys]
        layout = StateLayout.choose(plan.unique_key(child), exprs)
        rows = {StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY: "at most one row per join key",
                StateLayout.UNIQUE_KEY: f"one row per unique key ({', '.join(plan.unique_key(child))})",
                StateLayout.NO_UNIQUE_KEY: "every live row, counted (no unique key declared)"}[layout]
        degree = ", with its match count (its unmatched rows are padded)" if node.join_type.preserves(s) else ""
        keyed = (f"keyed by {user_text(', '.join(exprs))} in {plan.config.state_buckets} buckets"
                 if not node.single_group else
                 "in one key group (the join has no equality: a change reads the other side's whole state)")
        out.append((f"{node.id}_{s.value}", f"{_side_label(child)}: {rows}{degree}; {keyed}"))
    return out


def operator_state(plan: JoinPlan, node: Join | MultiJoin) -> tuple[str, list[tuple[str, str]]]:
    """What runs a join (and why), and its state tables with what each holds."""
    if isinstance(node, MultiJoin):
        return ("multi-way operator: one pass over every input's state per touched key, no intermediate state",
                [(f"{node.id}_{i}", f"{scan.input} AS {scan.alias}: every live row, keyed by the common key "
                                    f"in {plan.config.state_buckets} buckets") for i, scan in enumerate(node.inputs)])
    left, right = _side_label(node.left), _side_label(node.right)
    if node.time_bound:
        return (f"interval operator (Flink's RowTimeIntervalJoin): pairs with {user_text(str(node.time_bound))}",
                [(f"{node.id}_{s.value}", f"{label}: rows that a future row of the other side can still match, "
                                          "in slices of event time") for s, label in zip(Side, (left, right))])
    if node.temporal and node.temporal.processing_time:
        keys = [name for _, name in dimension_keys(node, node.right)] if isinstance(node.right, Scan) else []
        looked_up = (f"consolidates only the rows whose {', '.join(keys)} its probe rows look up" if keys else
                     "consolidates all of them (no ON key compares with a dimension column as declared)")
        emitted = [(f"{node.id}_{EMITTED}", f"{left}: per probe row and run, the rows its insertions emitted, "
                                            "which its retractions retract (its probe side may retract)")]
        return (f"lookup operator: each run reads the dimension at the version the run reads to and {looked_up}",
                emitted if keeps_emitted(plan.inputs, node) else [])
    if node.temporal:
        return ("event-time temporal operator (Flink's TemporalRowTimeJoinOperator)",
                [(f"{node.id}_probes", f"{left}: probes the watermark has not passed yet"),
                 (f"{node.id}_versions", f"{right}: per key, the versions a future probe can still select")])
    if node.window:
        return ("window operator (Flink's WindowJoinOperator)",
                [(f"{node.id}_{s.value}", f"{label}: rows of windows the watermark has not fired yet")
                 for s, label in zip(Side, (left, right))])
    if node.asof:
        return ("ASOF operator: the touched keys recomputed from both sides' state",
                [(f"{node.id}_{s.value}", f"{label}: every live row") for s, label in zip(Side, (left, right))])
    padded = padded_windows_joined(node)
    why = (f"; not a window join: it joins {node.left.id}'s rows by the windows of {padded}, which {node.left.id} may "
           "pad with NULL (Flink plans a window join there, which drops a row whose windows are NULL as late); join by "
           f"the windows of a side {node.left.id} never pads to make it one") if padded else ""
    return f"binary operator (Flink's StreamingJoinOperator){why}", _regular_sides(plan, node)


def watermark(plan: JoinPlan) -> str:
    """What the model's watermark is made of, or why it has none."""
    timed = [n for n in plan.nodes() if isinstance(n, Join) and n.time_based]
    if not timed:
        return "none: no join of this model waits for event time"
    parts = []
    for name in plan.watermark_inputs:
        spec = plan.inputs[name]
        delay = f" - {duration_text(spec.watermark_delay)}" if spec.watermark_delay else ""
        parts.append(f"{name}.{spec.event_time}{delay}")
    lateness = f"; rows up to allowed_lateness {duration_text(plan.config.allowed_lateness)} behind it still count" \
        if plan.config.allowed_lateness else ""
    return (f"the smallest of the largest event times seen, each less its delay: {', '.join(parts)} "
            f"(unset until every one of them has seen a row){lateness}")


def retention(plan: JoinPlan) -> list[str]:
    """What leaves each operator's state, and when."""
    out = []
    for node in plan.nodes():
        if isinstance(node, Scan):
            continue
        if isinstance(node, Join) and node.time_bound:
            below = node.left
            forwarded = (f" (on the side of {below.id}'s rows, its watermark held back by "
                         f"{duration_text(below.time_bound.output_delay(plan.config.allowed_lateness))})"
                         if isinstance(below, Join) and below.time_bound else "")
            out.append(f"{node.id}: a row leaves state once the watermark{forwarded} is past every time the bound lets "
                       "it match; late rows are recorded in the late_rows table")
        elif isinstance(node, Join) and node.window:
            out.append(f"{node.id}: a window's rows leave state when the watermark passes its end")
        elif isinstance(node, Join) and node.temporal and not node.temporal.processing_time:
            out.append(f"{node.id}: a probe leaves state once emitted; versions no future probe can select leave state")
        elif isinstance(node, Join) and node.temporal and not keeps_emitted(plan.inputs, node):
            out.append(f"{node.id}: keeps no state")
        elif isinstance(node, Join) and node.asof:
            out.append(f"{node.id}: every live row of both inputs stays (state_ttl does not apply to ASOF joins)")
        elif plan.config.state_ttl:
            out.append(f"{node.id}: rows not updated for state_ttl {duration_text(plan.config.state_ttl)} leave state "
                       "(later retractions of them are ignored)")
        else:
            out.append(f"{node.id}: every live row stays (set state_ttl to bound it, as Flink's table.exec.state.ttl)")
    return out


def fit(plan: JoinPlan, tables: ModelTables) -> str:
    """Whether the model's state was built by this plan: the next run continues, or needs a rebuild."""
    last = manifest_of(tables.runs)
    if last is None:
        return "no run yet: the first run reads every input from its first version"
    when = dt.datetime.fromtimestamp(last["started"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        if not reprojects(plan, last, tables):
            return f"built by this plan (last run {last['run']}, {when}): the next run continues from it"
    except PlanChangedError as exc:
        policy = plan.config.on_plan_change  # a change no rebuild can swap in: a full refresh, or refused
        if not exc.rebuildable and policy == "rebuild":
            policy = "fail"
        then = {"rebuild": "the next run rebuilds it side by side from its inputs, keeping the old result until it "
                           "swaps the new one in (on_plan_change='rebuild')",
                "full_refresh": "the next run rebuilds it from its inputs (on_plan_change='full_refresh')",
                "fail": "the next run needs a rebuild (dbt run --full-refresh)"}[policy]
        return f"built by another plan (last run {last['run']}, {when}): {exc.what}, so {then}. What changed:\n{exc.diff}"
    return (f"fits (last run {last['run']}, {when}): only the projection changed (output columns, filters after the "
            "last join), so the next run re-projects the result from state with no rebuild (output columns renamed, "
            "added or dropped replace the result whole and are added to the changelog; one whose type changed needs "
            f"--full-refresh). What changed:\n{outline_diff(tables, plan)}")


def describe(plan: JoinPlan, tables: ModelTables | None = None) -> str:
    """The plan's outline and what the model keeps; with `tables`, the state's figures after the last
    run and whether the plan still fits it."""
    sizes = {}
    if tables is not None and delta_log.exists(tables.runs):
        sizes = {posixpath.basename(p): table_size(tables, p) for p in tables.state_tables() if delta_log.exists(p)}
    lines = [plan.explain(), "", "operators and their state:"]
    for node in plan.nodes():
        if isinstance(node, Scan):
            continue
        operator, states = operator_state(plan, node)
        lines.append(f"  {node.id} ({node.kind if isinstance(node, Join) else 'multi-way'} join): {operator}")
        for name, holds in states:
            size = sizes.get(name)
            figures = f" [after the last run: {size.rows:,} rows in {size.files} files, {size.bytes / 2**20:.2f} MiB]" \
                if size else ""
            lines.append(f"    state {name}: {holds}{figures}")
    for name, spec in plan.inputs.items():
        if spec.changelog_format == "upsert":
            size = sizes.get(f"{name}_upsert")
            figures = f" [after the last run: {size.rows:,} rows]" if size else ""
            lines.append(f"  input {name} (upsert): state {name}_upsert holds its latest row per unique key "
                         f"({', '.join(spec.unique_key)}), to turn upserts into changes{figures}")
    needs = append_only_inputs(plan)
    lines += ["", "inputs:"]
    for name, spec in plan.inputs.items():
        rule = (f"must be append-only: {needs[name]}" if name in needs else
                "inserts only" if spec.changelog_format == "append" else "inserts, updates and deletes")
        time = f"; event time {spec.event_time}" if spec.event_time else ""
        lines.append(f"  {name}: changelog_format {spec.changelog_format}{time}; {rule}")
    lines += ["", f"watermark: {watermark(plan)}", "", "retention:", *(f"  {r}" for r in retention(plan))]
    if tables is not None:
        lines += ["", f"state: {fit(plan, tables)}"]
    return "\n".join(lines) + "\n"
