"""Recognise an event-time temporal join: `JOIN versions FOR SYSTEM_TIME AS OF probe.time AS v`.

A lookup join is the same clause AS OF the probe's processing-time column (an input's
`proc_time`): each probe row joins the dimension's rows as they are in the run that brings it.

Flink's syntax for the event-time join: the left (probe) input declares an `event_time` (it may update and
delete rows, as in Flink, in a changelog whose updates carry the row they replace: not `upsert`); the right
input is versioned: it declares a `unique_key` (the key of its versions) and an `event_time`
(when each version starts), and the equalities of the ON condition must cover that key.
Every other condition on the versioned side is checked against the version a probe row
selects (so a right-only filter is a residual, never pushed below the join: filtering
versions before selecting one would select another version). Only INNER and LEFT joins
exist, as in Flink. Anything else fails here, naming the join and the fix.

>>> from streamjoin.sql.compiler import compile_sql
>>> from streamjoin.spec import InputSpec
>>> orders = InputSpec.from_dict("orders", {"columns": [["id", "int"], ["cur", "string"], ["ts", "timestamp"]],
...                                         "event_time": "ts"})
>>> rates = InputSpec.from_dict("rates", {"columns": [["cur", "string"], ["rate", "double"], ["ts", "timestamp"]],
...                                       "unique_key": ["cur"], "event_time": "ts"})
>>> sql = "SELECT o.id, r.rate FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur"
>>> plan = compile_sql("m", sql, {"orders": orders, "rates": rates})
>>> print(plan.root.temporal)
FOR SYSTEM_TIME AS OF o__ts (versions by r__ts)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

import sqlglot
from sqlglot import exp

from ..errors import CompileError
from ..spec import InputSpec
from ..types import JoinType, q
from .plan import Join, Node, Scan, TemporalSpec, internal_name
from .strategy import user_text
from .time_bounds import carried_times


@dataclass(frozen=True)
class AsOf:
    """A `FOR SYSTEM_TIME AS OF` clause of one join: its time, rendered, and where it stands."""

    time: str  # Spark SQL over internal names
    node: exp.Expression  # the JOIN, to locate errors


def as_of(table: exp.Expression, fail: Callable[..., CompileError]) -> exp.Expression | None:
    """The time of a `FOR SYSTEM_TIME AS OF <time>` on a joined table (removed from it), or None."""
    version = table.args.get("version") if isinstance(table, exp.Table) else None
    if version is None:
        return None
    kind = str(version.args.get("kind") or "").upper()
    if str(version.name).upper() != "TIMESTAMP" or kind != "AS OF":
        raise fail(f"{version.sql('spark')} is not supported: an event-time temporal join reads "
                   "FOR SYSTEM_TIME AS OF <probe event time>", version)
    table.set("version", None)
    return version.expression


def reject_as_of(table: exp.Expression, fail: Callable[..., CompileError], *, after_comma: bool = False) -> None:
    """A versioned input in FROM has no probe side, and one after a comma no ON condition to join
    by (Flink refuses it: "the join key in Temporal Table Join can not be empty"): fail naming the fix."""
    if isinstance(table, exp.Table) and table.args.get("version") is not None:
        where = ("after a comma: a comma join has no ON condition, and a temporal join needs one that equates "
                 "the versioned input's key, as in Flink" if after_comma else
                 "in FROM: the versioned input of a temporal join is the right side of a JOIN")
        raise fail(f"FOR SYSTEM_TIME AS OF on {table.name} {where}; write FROM <probe input> [LEFT] JOIN "
                   f"{table.name} FOR SYSTEM_TIME AS OF <probe>.<event time> AS ... ON ...", table)


def bind_temporal(node: Node, clauses: Mapping[str, AsOf], prefixes: Mapping[str, InputSpec],
                  fail: Callable[..., CompileError]) -> Node:
    """Mark every join that has a `FOR SYSTEM_TIME AS OF` clause as an event-time temporal join,
    checking what Flink requires of it (every problem of a join in one error)."""
    if not isinstance(node, Join):
        return node
    node = replace(node, left=bind_temporal(node.left, clauses, prefixes, fail),
                   right=bind_temporal(node.right, clauses, prefixes, fail))
    clause = clauses.get(node.id)
    if clause is None:
        return node
    if clause.time.strip("`") in proc_time_columns(node.left):
        return _bind_lookup(node, clause, fail)
    problems = _problems(node, clause, prefixes)
    if problems:
        probe = ", ".join(sorted(node.left.aliases))
        versions = ", ".join(sorted(node.right.aliases))
        raise fail(f"the temporal join of {probe} with versioned {versions} (FOR SYSTEM_TIME AS OF): "
                   + "; ".join(problems), clause.node)
    right: Scan = node.right  # type: ignore[assignment]
    spec = prefixes[right.alias]
    residual = [*right.filters, *([node.residual] if node.residual else [])]  # checked on the selected version
    return replace(node, right=replace(right, filters=()), keys=tuple(replace(k, null_safe=False) for k in node.keys),
                   residual=" AND ".join(f"({r})" for r in residual) if residual else None,
                   temporal=TemporalSpec(probe_time=clause.time.strip("`"),
                                         version_time=internal_name(right.alias, _column(spec, spec.event_time))))


def chained(node: Join) -> bool:
    """Whether the temporal join `node` probes with the rows of another event-time temporal join."""
    probe = node.left
    return isinstance(probe, Join) and probe.temporal is not None and not probe.temporal.processing_time


def proc_time_columns(node: Node, *, computed: bool = False) -> set[str]:
    """Internal names of the processing-time columns the probe side carries as they are; with
    `computed`, also of its columns computed from one (whose value depends on the run reading the row)."""
    if isinstance(node, Join):
        right = proc_time_columns(node.right, computed=computed) if node.join_type.emits_pairs else set()
        return proc_time_columns(node.left, computed=computed) | right
    scans = node.inputs if not isinstance(node, Scan) else (node,)
    found = set()
    for scan in scans:
        for src, (_, internal) in zip(scan.column_sources, scan.columns):
            if scan.proc_time and (src == q(scan.proc_time) or computed and _reads(src, scan.proc_time)):
                found.add(internal)
    return found


def _reads(sql: str, column: str) -> bool:
    """Whether Spark SQL `sql` reads `column`."""
    return any(c.name.lower() == column.lower() for c in sqlglot.parse_one(sql, read="spark").find_all(exp.Column))


def _bind_lookup(node: Join, clause: AsOf, fail: Callable[..., CompileError]) -> Join:
    """A lookup join (Flink's processing-time temporal join): each probe row joins the dimension's rows
    as the run that brings it leaves them."""
    problems = []
    if node.join_type not in (JoinType.INNER, JoinType.LEFT):
        problems.append(f"a {node.join_type.value.upper()} lookup join is not supported; Flink has INNER and LEFT "
                        "lookup joins only (write the probe input first)")
    if node.time_bound is not None:
        problems.append("its ON condition also bounds two event times (an interval join); drop those conditions")
    dim = node.right
    if not isinstance(dim, Scan) or dim.derived:
        problems.append("the dimension must be a declared input, not a derived table or a join")
    if not node.keys:
        problems.append("its ON condition has no equality between the probe and the dimension; add one on the "
                        "columns to look up by (e.g. ON o.customer_id = c.id)")
    if problems:
        probe = ", ".join(sorted(node.left.aliases))
        raise fail(f"the lookup join of {probe} with dimension {', '.join(sorted(dim.aliases))} (FOR SYSTEM_TIME AS OF "
                   "a processing time): " + "; ".join(problems), clause.node)
    return replace(node, temporal=TemporalSpec(probe_time=clause.time.strip("`"), version_time=None,
                                               processing_time=True))


def _column(spec: InputSpec, name: str | None) -> str:
    """The input's own spelling of a column named case-insensitively."""
    return next((c for c in spec.column_names if name and c.lower() == name.lower()), name or "")


def _problems(node: Join, clause: AsOf, prefixes: Mapping[str, InputSpec]) -> list[str]:
    problems: list[str] = []
    if node.join_type not in (JoinType.INNER, JoinType.LEFT):
        problems.append(f"a {node.join_type.value.upper()} temporal join is not supported; Flink has INNER and LEFT "
                        "temporal joins only (write the probe input first: FROM probe [LEFT] JOIN versions FOR "
                        "SYSTEM_TIME AS OF ...)")
    if node.time_bound is not None:
        problems.append("its ON condition also bounds the two event times (an interval join); drop those time "
                        "conditions or the FOR SYSTEM_TIME AS OF clause")
    probe, versions = node.left, node.right
    if chained(node):  # Flink's multi temporal join: the rows of one probe the next, by the same time attribute
        first: TemporalSpec = probe.temporal  # type: ignore[union-attr,assignment]
        if clause.time.strip("`") != first.probe_time:
            problems.append(f"FOR SYSTEM_TIME AS OF after the temporal join {probe.id} must name the time its probe "
                            f"side joined by ({user_text(q(first.probe_time))}), the time attribute its rows keep, as in Flink; not "
                            f"{user_text(clause.time)}")
    elif isinstance(probe, Join) and probe.time_bound is not None:  # an interval join's rows keep their times
        times = carried_times(probe, prefixes, padded=False)
        if clause.time.strip("`") not in times:
            kept = " or ".join(user_text(q(t)) for t in times) or "none: it pads both sides with NULLs"
            problems.append(f"FOR SYSTEM_TIME AS OF after the interval join {probe.id} must name an event time its "
                            f"rows keep and never pad with NULL ({kept}), not {user_text(clause.time)}: a probe "
                            "needs a time")
    elif not isinstance(probe, Scan):
        problems.append("the probe side is the result of another join; a temporal join probes with one input "
                        "(or a derived table over one), or with the rows of another event-time temporal join or of "
                        "an interval join: join the versions first, then the other inputs")
    else:
        spec = prefixes[probe.alias]
        if spec.event_time is None:
            problems.append(f"the probe input '{spec.name}' declares no event_time; declare it (the column "
                            "FOR SYSTEM_TIME AS OF names)")
        elif clause.time != q(internal_name(probe.alias, _column(spec, spec.event_time))):
            problems.append(f"FOR SYSTEM_TIME AS OF must name the probe's event time {probe.alias}.{spec.event_time}, "
                            f"not {user_text(clause.time)}")
        if spec.changelog_format == "upsert":
            problems.append(f"the probe input '{spec.name}' has changelog_format 'upsert', whose updates carry no "
                            "row they replace, so a probe's earlier row could not be retracted; declare a changelog "
                            "whose updates carry it (changelog -U/+U rows, debezium, cdf) or an insert-only one "
                            "('append')")
    if not isinstance(versions, Scan) or versions.derived:
        problems.append("the versioned side must be a declared input, not a derived table or a join")
        return problems
    spec = prefixes[versions.alias]
    if not spec.unique_key:
        problems.append(f"the versioned input '{spec.name}' declares no unique_key; declare the key of its "
                        "versions (e.g. unique_key: [currency])")
    if spec.event_time is None:
        problems.append(f"the versioned input '{spec.name}' declares no event_time; declare the column that says "
                        "from when each version is valid")
    if not node.keys:
        problems.append("its ON condition has no equality between the two sides; add one on the versioned "
                        "input's unique key (e.g. ON o.currency = r.currency)")
    unique = {u: internal_name(versions.alias, _column(spec, u)).lower() for u in spec.unique_key}
    loose = [k.right.strip("`") for k in node.keys if k.null_safe and k.right.strip("`").lower() not in unique.values()]
    if loose:
        problems.append(f"a null-safe key (<=> / IS NOT DISTINCT FROM) on {', '.join(loose)}, outside the versioned "
                        "input's unique_key, is not supported (on the unique key it means =: a version's key is "
                        "never NULL); use =")
    keyed = {k.right.strip("`").lower() for k in node.keys}
    missing = [u for u, name in unique.items() if name not in keyed]
    if spec.unique_key and node.keys and missing:
        problems.append(f"the versioned input's unique_key column(s) {', '.join(missing)} are not equated with the "
                        f"probe side in ON; as in Flink, the ON equalities must cover the key of the versions "
                        f"(add {' AND '.join(f'<probe expression> = {versions.alias}.{m}' for m in missing)})")
    return problems
