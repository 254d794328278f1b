"""Plan how a lookup-join case runs in Flink, one part per run, without touching Flink.

A lookup join (``JOIN d FOR SYSTEM_TIME AS OF p.<proc_time> AS d``) joins each probe row with
the dimension as it is when the row arrives; FORMAT.md's rule is the dimension as the row's run
leaves it. So run k of a case is a part of its own: the probe input's rows of run k, and every
dimension as a ``snapshot-lookup`` table (lookup_connector/) whose file holds the dimension's
rows after run k's changes. What part k emits is what run k emits. ``run_lookup.py`` runs the
parts; this module only plans them (standard library and case_plan only).

A dimension's rows after a run are its changelog consolidated as streamjoin's runner reads the
case's changes: ``changelog`` (the default): ``+I``/``+U`` add a copy of the row and ``-U``/``-D``
remove one (a row is kept as often as its count is positive); ``append``: every change adds its
row; ``upsert``: the last row of each ``unique_key`` (the rows carry no deletion: a case cannot
write a ``delete_column``).

>>> case = {"name": "c", "sql": "SELECT o.id, c.name FROM o JOIN c FOR SYSTEM_TIME AS OF o.pt AS c ON o.k = c.k",
...         "inputs": {"o": {"columns": [["id", "int"], ["k", "int"]], "proc_time": "pt"},
...                    "c": {"columns": [["k", "int"], ["name", "string"]]}},
...         "runs": [{"changes": {"c": [["+I", [1, "a"]], ["+I", [1, "a"]]], "o": [["+I", [7, 1]]]}},
...                  {"changes": {"c": [["-D", [1, "a"]]]}}]}
>>> [(p.run, [r.values for r in p.source_rows], p.dimensions) for p in plan_lookup_case(case)]
[(0, [('7', '1')], (DimensionSnapshot(name='c', rows=(('1', 'a'), ('1', 'a'))),)), (1, [], (DimensionSnapshot(name='c', rows=(('1', 'a'),)),))]
>>> snapshot_text((("1", None), ("2", "a\\tb")))
'1\\t\\\\N\\n2\\ta\\\\tb\\n'
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, fields
from typing import Any

from case_plan import CasePlan, CasePlanError, InputPlan, plan_case, to_text, versioned_inputs

DIMENSION_FORMATS = ("changelog", "append", "upsert")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass(frozen=True)
class DimensionSnapshot:
    """A dimension's rows after a run, as text (``case_plan.to_text``), one entry per copy."""

    name: str
    rows: tuple[tuple[str | None, ...], ...]


@dataclass(frozen=True)
class LookupRunPlan(CasePlan):
    """One run of a lookup-join case: ``source_rows`` are the probe input's rows of that run."""

    run: int = 0
    probe: str = ""
    proc_time: str = ""
    dimensions: tuple[DimensionSnapshot, ...] = ()


def plan_lookup_case(case: dict[str, Any]) -> tuple[LookupRunPlan | None, ...]:
    """One plan per run of `case` (None for a run with `expect_error`, which changes nothing).

    Raises CasePlanError listing every problem: the case needs exactly one input declaring
    `proc_time` (the probe, whose changes are all `+I` in the runs Flink is fed), and every other
    input must be read `FOR SYSTEM_TIME AS OF` (a dimension) in one of DIMENSION_FORMATS.
    """
    name = str(case.get("name", "<unnamed>"))
    declared: dict[str, dict[str, Any]] = case.get("inputs") or {}
    runs = case.get("runs") or []
    problems = []
    probes = [n for n, spec in declared.items() if spec.get("proc_time")]
    dimensions = versioned_inputs(case.get("sql") or "", list(declared))
    if len(probes) != 1:
        problems.append(f"exactly one input must declare proc_time (the probe), not {probes}")
    if not dimensions:
        problems.append("the sql reads no input FOR SYSTEM_TIME AS OF (no dimension)")
    for other in sorted(set(declared) - set(probes) - set(dimensions)):
        problems.append(f"input {other!r} is neither the probe nor read FOR SYSTEM_TIME AS OF: the oracle runs "
                        "each run as a job of its own, so it cannot carry another input's state across runs")
    fed = [(run_no, run.get("changes") or {}) for run_no, run in enumerate(runs) if "expect_error" not in run]
    for dim in dimensions:
        problems += _dimension_problems(dim, declared[dim], [changes for _, changes in fed])
    for run_no, changes in fed:
        kinds = {kind for probe in probes for kind, _ in changes.get(probe, [])}
        if kinds - {"+I"}:
            problems.append(f"run {run_no}: the probe input's changes must all be +I, not {sorted(kinds)}")
    if problems:
        raise CasePlanError(f"case {name}: " + "; ".join(problems))
    probe = probes[0]
    types = {i.name: i for i in plan_case(case).inputs}
    plans: list[LookupRunPlan | None] = []
    for run_no, run in enumerate(runs):
        if "expect_error" in run:
            plans.append(None)
            continue
        base = plan_case({**case, "runs": [run]})
        so_far = [r.get("changes") or {} for r in runs[:run_no + 1] if "expect_error" not in r]
        snapshots = tuple(
            DimensionSnapshot(d, tuple(tuple(to_text(v) for v in row) for row in snapshot(
                types[d], declared[d], [change for changes in so_far for change in changes.get(d, [])])))
            for d in dimensions)
        probe_rows = tuple(r for r in base.source_rows if r.tag == probe and not r.heartbeat)
        plans.append(LookupRunPlan(**{**{f.name: getattr(base, f.name) for f in fields(CasePlan)},
                                      "source_rows": probe_rows},
                                   run=run_no, probe=probe, proc_time=declared[probe]["proc_time"],
                                   dimensions=snapshots))
    return tuple(plans)


def _dimension_problems(name: str, spec: dict[str, Any], fed: list[dict[str, list[Any]]]) -> list[str]:
    """What keeps the oracle from reading dimension `name`, given the changes of the runs it is fed."""
    fmt = spec.get("changelog_format", "changelog")
    if fmt not in DIMENSION_FORMATS:
        return [f"dimension {name!r}: changelog_format {fmt!r} is not one of {', '.join(DIMENSION_FORMATS)}"]
    if fmt != "upsert":
        return []
    problems = []
    if not spec.get("unique_key"):
        problems.append(f"dimension {name!r}: changelog_format 'upsert' needs a unique_key")
    if spec.get("sequence_column") or spec.get("delete_column"):
        problems.append(f"dimension {name!r}: sequence_column and delete_column are not supported by the oracle")
    kinds = {kind for changes in fed for kind, _ in changes.get(name, [])}
    if kinds - {"+I", "+U"}:
        problems.append(f"dimension {name!r}: an upsert input's changes are rows (+I/+U), not {sorted(kinds - {'+I', '+U'})}")
    return problems


def snapshot(spec: InputPlan, declared: dict[str, Any], changes: list[list[Any]]) -> list[list[Any]]:
    """The dimension's rows after `changes` (every change so far, in arrival order), one entry per copy."""
    fmt = declared.get("changelog_format", "changelog")
    if fmt == "upsert":
        positions = [[c for c, _ in spec.columns].index(k) for k in spec.unique_key]
        latest = {tuple(_value(row, spec)[i] for i in positions): row for _, row in changes}
        return list(latest.values())
    counts: Counter[str] = Counter()
    first: dict[str, list[Any]] = {}
    for kind, row in changes:
        identity = json.dumps(_value(row, spec))
        first.setdefault(identity, row)
        counts[identity] += 1 if fmt == "append" or kind in ("+I", "+U") else -1
    return [first[identity] for identity, count in counts.items() for _ in range(count)]


def _value(row: list[Any], spec: InputPlan) -> list[Any]:
    """The row as values of its columns' types (an integer in a DOUBLE column is that double)."""
    return [float(v) if t in ("DOUBLE", "FLOAT") and isinstance(v, int) and not isinstance(v, bool) else v
            for v, (_, t) in zip(row, spec.columns)]


def snapshot_text(rows: tuple[tuple[str | None, ...], ...]) -> str:
    """The snapshot file the connector reads (SnapshotFile.java): a line per row, tab-separated
    fields, ``\\N`` for NULL, backslash escapes for backslash, tab, newline and carriage return."""
    return "".join("\t".join("\\N" if v is None else v.translate(_ESCAPES) for v in row) + "\n" for row in rows)
