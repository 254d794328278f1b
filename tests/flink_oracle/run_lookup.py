"""Run lookup-join cases through Apache Flink and print what Flink emits in each run.

Usage (with the Flink venv's interpreter, see README.md)::

    .venv-flink/bin/python tests/flink_oracle/run_lookup.py CASE.json [CASE.json ...]
    .venv-flink/bin/python tests/flink_oracle/run_lookup.py - < cases.json   # a JSON list

Prints one JSON line per case, in input order::

    {"case": name, "ok": bool, "error": str|null, "runs": [[[...], ...]|null, ...]|null,
     "columns": [[name, flink_type], ...]|null, "sql": str|null}

``runs`` holds, per run of the case, the rows Flink emitted for it (a multiset, values as
run_cases.py encodes them), or null for a run with ``expect_error``. Every run of every case is
a part of ONE job (lookup_plan.py: the probe rows of the run, the dimensions as the run leaves
them, served by the ``snapshot-lookup`` connector that connector_jar.py builds). Exits 0 when
every case ran, 1 otherwise.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from case_plan import CasePlan  # noqa: E402
from connector_jar import connector_jar  # noqa: E402
from lookup_plan import LookupRunPlan, plan_lookup_case, snapshot_text  # noqa: E402
from run_cases import FlinkSession, _flink_message, _load  # noqa: E402


class LookupSession(FlinkSession):
    """A FlinkSession whose parts are runs of lookup-join cases (LookupRunPlan), with the
    connector's jar on the job's class path and the snapshot files under `folder`."""

    def __init__(self, jar: Path, folder: Path) -> None:
        super().__init__()
        self._conf.set_string("pipeline.jars", jar.as_uri())
        self._folder = folder
        self._files = itertools.count()

    def _register(self, env: Any, t_env: Any, plan: CasePlan) -> tuple[Any, str | None]:
        """The probe's rows of the run as a bounded source with a PROCTIME() column, each dimension
        as a snapshot-lookup table over its rows after the run; then the case's query."""
        from pyflink.common import Row, Types
        from pyflink.table import DataTypes, Schema

        assert isinstance(plan, LookupRunPlan)
        specs = {spec.name: spec for spec in plan.inputs}
        probe = specs[plan.probe]
        raw = [f"__v{i}" for i in range(len(probe.columns))]
        stream = env.from_collection([Row(*row.values) for row in plan.source_rows],
                                     type_info=Types.ROW_NAMED(raw, [Types.STRING()] * len(raw)))
        schema = Schema.new_builder()
        for name in raw:
            schema = schema.column(name, DataTypes.STRING())
        schema = schema.column_by_expression(plan.proc_time, "PROCTIME()")
        t_env.create_temporary_view("`__probe_source`", t_env.from_data_stream(stream, schema.build()))
        select = [f"CAST(`{name}` AS {flink_type}) AS `{column}`" for name, (column, flink_type) in zip(raw, probe.columns)]
        t_env.create_temporary_view(f"`{plan.probe}`", t_env.sql_query(
            f"SELECT {', '.join(select)}, `{plan.proc_time}` FROM `__probe_source`"))
        for dimension in plan.dimensions:
            path = self._folder / f"{next(self._files)}.tsv"
            path.write_text(snapshot_text(dimension.rows), encoding="utf-8")
            columns = ", ".join(f"`{column}` {flink_type}" for column, flink_type in specs[dimension.name].columns)
            location = str(path).replace("'", "''")
            t_env.execute_sql(f"CREATE TEMPORARY TABLE `{dimension.name}` ({columns}) "
                              f"WITH ('connector' = 'snapshot-lookup', 'path' = '{location}')")
        return self._query(t_env, plan)


def run_all(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run every case (all runs of all cases sharing Flink options as one job); one report per case."""
    reports = [{"case": c.get("name"), "ok": False, "error": None, "runs": None, "columns": None, "sql": None}
               for c in cases]
    groups: dict[tuple[tuple[str, str], ...], list[tuple[int, LookupRunPlan]]] = {}
    for position, case in enumerate(cases):
        try:
            plans = plan_lookup_case(case)
        except Exception as error:
            reports[position]["error"] = _flink_message(error)
            continue
        reports[position]["runs"] = [None] * len(plans)
        for plan in plans:
            if plan is not None:
                groups.setdefault(plan.options, []).append((position, plan))
    with tempfile.TemporaryDirectory(prefix="streamjoin-lookup-oracle-") as folder:
        session = LookupSession(connector_jar(), Path(folder))
        for members in groups.values():
            try:
                parts = session.run_group([plan for _, plan in members])
            except Exception as error:  # the session itself broke; report it on every part
                parts = [{"ok": False, "error": _flink_message(error)} for _ in members]
            for (position, plan), part in zip(members, parts):
                report = reports[position]
                if part["ok"]:
                    report["runs"][plan.run] = part["result"]
                    report.update(columns=part["columns"], sql=part["sql"])
                elif report["error"] is None:
                    report["error"] = f"run {plan.run}: {part['error']}"
    for report in reports:
        report["ok"] = report["error"] is None and report["runs"] is not None
        print(json.dumps(report), flush=True)
    return reports


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__)
    reports = run_all(_load(argv))
    return 0 if all(r["ok"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
