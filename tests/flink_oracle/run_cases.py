"""Run conformance cases through Apache Flink and print what Flink computes.

Usage (with the Flink venv's interpreter, see README.md)::

    .venv-flink/bin/python tests/flink_oracle/run_cases.py CASE.json [CASE.json ...]
    .venv-flink/bin/python tests/flink_oracle/run_cases.py - < cases.json   # a JSON list

Prints one JSON line per case, in input order::

    {"case": name, "ok": bool, "error": str|null, "result": [[...], ...]|null,
     "columns": [[name, flink_type], ...]|null, "sql": str|null}

``result`` is the final joined result (a multiset of rows, in no particular order)
after every run's changes; ``columns`` names and types the result's columns;
``sql`` is the SQL Flink ran when it had to be rewritten (null when the case's SQL
ran unchanged). Exits 0 when every case ran, 1 otherwise. All cases run in one
process and one JVM with parallelism 1; cases that need the same Flink options share
one job (see FlinkSession).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import traceback
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from case_plan import ROWTIME_TYPE, CasePlan, format_timestamp, plan_case  # noqa: E402

_KIND_WEIGHT = {"INSERT": 1, "UPDATE_AFTER": 1, "UPDATE_BEFORE": -1, "DELETE": -1}


class FlinkCaseError(RuntimeError):
    """Raised when Flink rejects or fails a case; carries Flink's own message."""


def _json_value(value: Any) -> Any:
    """Encode one value Flink returned the way FORMAT.md writes values."""
    if isinstance(value, dt.datetime):
        return format_timestamp(value.replace(tzinfo=None))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.time, dt.timedelta)):
        return str(value)
    return value


def _flink_message(error: BaseException) -> str:
    """The first meaningful line(s) of a (Java) exception, without the stack trace."""
    text = str(error)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    return "\n".join(lines[:12]) or type(error).__name__


def _parse_text(text: str | None, flink_type: str) -> Any:
    """Turn the text Flink's CAST(... AS STRING) produced back into a FORMAT.md value."""
    if text is None:
        return None
    t = flink_type.upper()
    if t.startswith(("INT", "BIGINT", "SMALLINT", "TINYINT")):
        return int(text)
    if t.startswith(("DOUBLE", "FLOAT")):
        return float(text)
    if t.startswith("BOOLEAN"):
        return text.strip().lower() == "true"
    if t.startswith("TIMESTAMP"):
        return format_timestamp(dt.datetime.fromisoformat(text.strip().replace("T", " ")))
    return text  # STRING/VARCHAR/CHAR, DECIMAL (scale kept), DATE ('YYYY-MM-DD')


class FlinkSession:
    """One JVM for many cases.

    Cases that need the same Flink options run together as ONE job: every case gets
    its own database (so input names never clash), its query's columns are cast to
    text and tagged with the case's index, and the cases' results are unioned into
    one collected changelog. Starting a job costs seconds; this keeps dozens of
    cases to a few jobs. If such a job fails, its cases are run one job each so the
    failure is reported on the case that caused it.
    """

    def __init__(self) -> None:
        from pyflink.common import Configuration

        conf = Configuration()
        conf.set_string("parallelism.default", "1")
        # Emit a watermark as soon as a row raises it, never on a wall-clock timer.
        conf.set_string("pipeline.auto-watermark-interval", "0")
        conf.set_string("rest.bind-port", "0")
        self._conf = conf

    def _environments(self, options: tuple[tuple[str, str], ...]) -> tuple[Any, Any]:
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import StreamTableEnvironment

        env = StreamExecutionEnvironment.get_execution_environment(self._conf)
        env.set_parallelism(1)
        t_env = StreamTableEnvironment.create(env)
        for key, value in options:
            t_env.get_config().set(key, value)
        return env, t_env

    def _register(self, env: Any, t_env: Any, plan: CasePlan) -> tuple[Any, str | None]:
        """Feed one case's changes into t_env's current database; return (its query, rewritten SQL)."""
        from pyflink.common import Row, RowKind, Types
        from pyflink.table import ChangelogMode, DataTypes, Schema

        kinds = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER,
                 "-D": RowKind.DELETE}
        if plan.versioned:
            self._register_per_input(env, t_env, plan, kinds)
            return self._query(t_env, plan)
        value_cols = [f"__v{i}" for i in range(plan.width)]
        raw_cols = ["__tag", *value_cols, "__et", "__wm"]
        records = []
        for row in plan.source_rows:
            values = list(row.values) + [None] * (plan.width - len(row.values))
            record = Row(row.tag, *values, row.event_time, row.watermark)
            record.set_row_kind(kinds[row.kind])
            records.append(record)
        stream = env.from_collection(
            records, type_info=Types.ROW_NAMED(raw_cols, [Types.STRING()] * len(raw_cols))
        )
        schema = Schema.new_builder()
        for col in raw_cols:
            schema = schema.column(col, DataTypes.STRING())
        if plan.has_event_time:
            schema = schema.column_by_expression("__rowtime", f"CAST(`__et` AS {ROWTIME_TYPE})")
            schema = schema.watermark("__rowtime", f"CAST(`__wm` AS {ROWTIME_TYPE})")
        mode = ChangelogMode.insert_only() if plan.insert_only else ChangelogMode.all()
        source = t_env.from_changelog_stream(stream, schema.build(), mode)
        t_env.create_temporary_view("`__streamjoin_source`", source)

        for spec in plan.inputs:
            select = []
            for i, (col, flink_type) in enumerate(spec.columns):
                if col == spec.event_time:
                    select.append(f"`__rowtime` AS `{col}`")
                else:
                    select.append(f"CAST(`__v{i}` AS {flink_type}) AS `{col}`")
            tag = spec.name.replace("'", "''")
            view = t_env.sql_query(
                f"SELECT {', '.join(select)} FROM `__streamjoin_source` WHERE `__tag` = '{tag}'"
            )
            t_env.create_temporary_view(f"`{spec.name}`", view)
        return self._query(t_env, plan)

    def _register_per_input(self, env: Any, t_env: Any, plan: CasePlan, kinds: dict[str, Any]) -> None:
        """One changelog source per input (a case with a temporal join, see case_plan.versioned_inputs):
        key columns of a versioned input typed and declared as its primary key, the rest as text cast
        back in the input's view; heartbeat rows carry the run's watermark."""
        from pyflink.common import Row, Types
        from pyflink.table import ChangelogMode, DataTypes, Schema

        typed = {"INT": (Types.INT(), DataTypes.INT(), int), "BIGINT": (Types.LONG(), DataTypes.BIGINT(), int),
                 "STRING": (Types.STRING(), DataTypes.STRING(), str)}
        for spec in plan.inputs:
            versioned = spec.name in plan.versioned
            keys = spec.unique_key if versioned else ()
            names, infos, fields = [], [], []
            for i, (col, flink_type) in enumerate(spec.columns):
                if col in keys:
                    if flink_type not in typed:
                        raise FlinkCaseError(f"input {spec.name}: key column {col} of type {flink_type} is not "
                                             f"one the oracle can declare as a primary key ({', '.join(typed)})")
                    info, dtype, _ = typed[flink_type]
                    names.append(col)
                    infos.append(info)
                    fields.append((col, dtype.not_null()))
                else:
                    names.append(f"__v{i}")
                    infos.append(Types.STRING())
                    fields.append((f"__v{i}", DataTypes.STRING()))
            names += ["__et", "__wm", "__hb"]
            infos += [Types.STRING(), Types.STRING(), Types.BOOLEAN()]
            fields += [("__et", DataTypes.STRING()), ("__wm", DataTypes.STRING()), ("__hb", DataTypes.BOOLEAN())]
            records = []
            mine = [r for r in plan.source_rows if r.tag == spec.name]
            for row in mine:
                values = [typed[t][2](v) if c in keys and v is not None else v
                          for (c, t), v in zip(spec.columns, row.values)]
                record = Row(*values, row.event_time, row.watermark, row.heartbeat)
                record.set_row_kind(kinds[row.kind])
                records.append(record)
            stream = env.from_collection(records, type_info=Types.ROW_NAMED(names, infos))
            schema = Schema.new_builder()
            for name, dtype in fields:
                schema = schema.column(name, dtype)
            schema = schema.column_by_expression("__rowtime", f"CAST(`__et` AS {ROWTIME_TYPE})")
            schema = schema.watermark("__rowtime", f"CAST(`__wm` AS {ROWTIME_TYPE})")
            if keys:
                schema = schema.primary_key(*keys)
            insert_only = all(r.kind == "+I" for r in mine)
            source = t_env.from_changelog_stream(stream, schema.build(),
                                                 ChangelogMode.insert_only() if insert_only else ChangelogMode.all())
            t_env.create_temporary_view(f"`__source_{spec.name}`", source)
            select = []
            for i, (col, flink_type) in enumerate(spec.columns):
                if col == spec.event_time:
                    select.append(f"`__rowtime` AS `{col}`")
                elif col in keys:
                    select.append(f"`{col}`")
                else:
                    select.append(f"CAST(`__v{i}` AS {flink_type}) AS `{col}`")
            # Flink forbids a filter on a versioned input: its heartbeats stay, as versions of a key no probe has
            where = "" if versioned else " WHERE NOT `__hb`"
            t_env.create_temporary_view(
                f"`{spec.name}`", t_env.sql_query(f"SELECT {', '.join(select)} FROM `__source_{spec.name}`{where}"))

    def _query(self, t_env: Any, plan: CasePlan) -> tuple[Any, str | None]:
        """The case's query over its registered inputs (rewritten with sqlglot if Flink rejects it)."""
        try:
            return t_env.sql_query(plan.sql), None
        except Exception as original_error:  # Flink rejected the SQL as written
            from sql_rewrite import to_flink_sql

            try:
                rewritten = to_flink_sql(plan.sql)
            except Exception:
                raise FlinkCaseError(_flink_message(original_error)) from None
            if rewritten == plan.sql:
                raise FlinkCaseError(_flink_message(original_error)) from None
            try:
                return t_env.sql_query(rewritten), rewritten
            except Exception as error:
                raise FlinkCaseError(
                    f"{_flink_message(error)}\n(as written: {_flink_message(original_error)})"
                ) from None

    def run_group(self, plans: list[CasePlan]) -> list[dict[str, Any]]:
        """Run plans that share Flink options as one job; return one report each, in order."""
        reports: list[dict[str, Any]] = [
            {"case": p.name, "ok": False, "error": None, "result": None, "columns": None, "sql": None}
            for p in plans
        ]
        env, t_env = self._environments(plans[0].options)
        catalog = t_env.get_current_catalog()
        parts, width = [], 0
        for index, plan in enumerate(plans):
            try:
                t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS `{catalog}`.`case_{index}`")
                t_env.use_database(f"case_{index}")
                table, rewritten = self._register(env, t_env, plan)
                resolved = table.get_resolved_schema()
                names = list(resolved.get_column_names())
                types = [str(t) for t in resolved.get_column_data_types()]
                reports[index].update(columns=[list(c) for c in zip(names, types)], sql=rewritten)
                parts.append((index, table, names))
                width = max(width, len(names))
            except Exception as error:
                reports[index]["error"] = _flink_message(error)
        if parts:
            self._collect(env, t_env, parts, width, plans, reports)
        return reports

    def _collect(self, env: Any, t_env: Any, parts: list[tuple[int, Any, list[str]]], width: int,
                 plans: list[CasePlan], reports: list[dict[str, Any]]) -> None:
        texts = []
        for index, table, names in parts:
            view = f"`case_{index}`.`__case_result`"
            t_env.create_temporary_view(view, table)
            cols = [f"CAST(`{n}` AS STRING)" for n in names] + ["CAST(NULL AS STRING)"] * (width - len(names))
            texts.append(f"SELECT {index} AS `__case`, {', '.join(cols)} FROM {view}")
        counts: dict[int, Counter[str]] = {index: Counter() for index, _, _ in parts}
        try:
            union = t_env.sql_query(" UNION ALL ".join(texts))
            with union.execute().collect() as results:
                for row in results:
                    index = row[0]
                    types = [t for _, t in reports[index]["columns"]]
                    values = [_parse_text(row[1 + i], t) for i, t in enumerate(types)]
                    counts[index][json.dumps(values)] += _KIND_WEIGHT[row.get_row_kind().name]
        except Exception as error:
            if len(parts) > 1:  # find the case that broke the job: one job per case
                for index, _, _ in parts:
                    single = self.run_group([plans[index]])[0]
                    reports[index].update(single)
                return
            reports[parts[0][0]]["error"] = _flink_message(error)
            return
        for index, _, _ in parts:
            negative = {k: c for k, c in counts[index].items() if c < 0}
            if negative:
                reports[index]["error"] = f"Flink retracted rows it never emitted: {negative}"
                continue
            result = [json.loads(k) for k, c in sorted(counts[index].items()) for _ in range(c)]
            reports[index].update(ok=True, result=result)


def run_all(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run every case in one session and return one report per case, in input order."""
    session = FlinkSession()
    reports: list[dict[str, Any] | None] = [None] * len(cases)
    groups: dict[tuple[tuple[str, str], ...], list[tuple[int, CasePlan]]] = {}
    for position, case in enumerate(cases):
        name = case.get("name", "<unnamed>") if isinstance(case, dict) else "<not an object>"
        try:
            plan = plan_case(case)
        except Exception as error:
            reports[position] = {"case": name, "ok": False, "error": _flink_message(error),
                                 "result": None, "columns": None, "sql": None}
            continue
        for note in plan.notes:
            print(f"note: case {name}: {note}", file=sys.stderr)
        groups.setdefault(plan.options, []).append((position, plan))
    for members in groups.values():
        try:
            group_reports = session.run_group([plan for _, plan in members])
        except Exception as error:  # the session itself broke; report it on every case
            group_reports = [{"case": p.name, "ok": False, "error": _flink_message(error), "result": None,
                              "columns": None, "sql": None} for _, p in members]
            if os.environ.get("FLINK_ORACLE_DEBUG"):
                traceback.print_exc()
        for (position, _), report in zip(members, group_reports):
            reports[position] = report
    done = [r for r in reports if r is not None]
    for report in done:
        print(json.dumps(report), flush=True)
    return done


def _load(args: list[str]) -> list[dict[str, Any]]:
    if args == ["-"]:
        cases = json.load(sys.stdin)
        if not isinstance(cases, list):
            raise SystemExit("stdin must hold a JSON list of cases")
        return cases
    if not args:
        raise SystemExit(__doc__)
    return [json.loads(Path(p).read_text()) for p in args]


def main(argv: list[str]) -> int:
    reports = run_all(_load(argv))
    return 0 if all(r["ok"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
