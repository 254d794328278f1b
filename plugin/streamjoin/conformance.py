"""Run conformance cases (JSON, see shared/conformance/FORMAT.md) through the real pipeline.

    python -m streamjoin.conformance CASE.json [CASE.json ...]

Each case's inputs become Delta changelog tables; each entry of `runs` appends its changes
and performs one incremental run of the compiled model, exactly as a dbt run would.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from collections import Counter
from decimal import Decimal
from typing import Any, Iterable, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import (BooleanType, DataType, DateType, DecimalType, DoubleType, FloatType, StringType,
                               StructField, StructType, TimestampType)

from .errors import StreamJoinError
from .runtime.run import run_once
from .spec import ROW_KIND_COLUMN, RUN_ID_COLUMN, InputSpec, ModelConfig
from .sql.compiler import compile_sql
from .storage import delta_log, formats
from .storage.tables import ModelTables


def _to_python(value: Any, t: DataType) -> Any:
    """A JSON value (or a value collected as text) as a comparable Python value of type `t`."""
    if value is None:
        return None
    if isinstance(t, TimestampType):
        if isinstance(value, dt.datetime):  # as read from a table: naive UTC, as the cases write times
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
        text = str(value).replace("T", " ")
        return dt.datetime.fromisoformat(text if "." in text or len(text) > 10 else text + " 00:00:00")
    if isinstance(t, DateType):
        return dt.date.fromisoformat(str(value)[:10])
    if isinstance(t, DecimalType):
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-t.scale))
    if isinstance(t, (DoubleType, FloatType)):
        return float(f"{float(value):.10g}")
    if isinstance(t, BooleanType):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if isinstance(t, StringType):
        return str(value)
    return int(value)


def _to_json(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, Decimal)):
        return str(value)
    return value


def _table_rows(path: str, fields: Sequence[StructField], run_id: int | None = None) -> list[tuple]:
    """A Delta table's rows at its latest version as comparable tuples of `fields`, those of run
    `run_id` only if given. Read with delta-rs on the driver: the runner checks a case's few rows
    without a Spark job of its own (two a run, before), so Spark runs only what a run runs."""
    table = delta_log.table(path).to_pyarrow_table(filters=None if run_id is None else [(RUN_ID_COLUMN, "=", run_id)])
    columns = [[_to_python(v, f.dataType) for v in table.column(f.name).to_pylist()] for f in fields]
    return list(zip(*columns)) if columns else [()] * table.num_rows


def _rows(values: Iterable[Sequence[Any]], types: Sequence[DataType]) -> Counter:
    return Counter(tuple(_to_python(v, t) for v, t in zip(row, types)) for row in values)


def _signed(changelog: Iterable[tuple[str, Sequence[Any]]], types: Sequence[DataType]) -> Counter:
    """A changelog as signed counts per row, opposite signs cancelled."""
    out: Counter = Counter()
    for kind, row in changelog:
        out[tuple(_to_python(v, t) for v, t in zip(row, types))] += 1 if kind.startswith("+") else -1
    return Counter({k: v for k, v in out.items() if v})


class CaseRunner:
    """Runs one case: input tables and model state under a temporary folder."""

    def __init__(self, spark: SparkSession, case: dict[str, Any], root: str) -> None:
        self.spark = spark
        self.case = case
        self.root = root
        self.name = case["name"]
        self.specs = {}
        for name, raw in case["inputs"].items():
            self.specs[name] = InputSpec.from_dict(name, {**raw, "location": f"{root}/inputs/{name}"}, model=self.name)
        config = ModelConfig.from_dict(case.get("config"), model=self.name)
        self.plan = compile_sql(self.name, case["sql"], self.specs, config)
        self.tables = ModelTables(f"{root}/models", self.name)

    def append_changes(self, run_index: int, changes: dict[str, list]) -> None:
        """Append one run's changes to each input's Delta changelog (a small test fixture, written with Arrow)."""
        for name, spec in self.specs.items():
            rows = changes.get(name, [])
            if not rows and delta_log.exists(spec.location):
                continue
            typed = StructType(list(formats.data_schema(spec).fields) + [StructField(ROW_KIND_COLUMN, StringType())])
            arrow = delta_log.arrow_schema(typed)
            columns = [pa.array([_to_python(values[i], f.dataType) for _, values in rows], type=arrow.field(i).type)
                       for i, f in enumerate(typed.fields[:-1])]
            columns.append(pa.array([kind for kind, _ in rows], type=pa.string()))
            table = pa.Table.from_arrays(columns, schema=arrow)
            actions = delta_log.write_small(table, spec.location, tag=f"input{run_index}")
            delta_log.commit(spec.location, actions, typed, app_id="conformance", run_id=run_index, metadata={})

    def result_fields(self) -> list[StructField]:
        """The result's columns (none before its first run)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        if not delta_log.exists(self.tables.result):
            return []
        return [f for f in from_arrow_schema(delta_log.table_schema(self.tables.result)).fields if f.name != "_bucket"]

    def result(self, fields: Sequence[StructField] | None = None) -> list[tuple]:
        """The result's rows as comparable tuples of `fields` (default: `result_fields()`; a caller that
        also reads the changelog passes them to both, and the schema is read once)."""
        fields = self.result_fields() if fields is None else fields
        return _table_rows(self.tables.result, fields) if fields else []

    def changelog(self, run_id: int | None, fields: Sequence[StructField] | None = None) -> list[tuple[str, tuple]]:
        """The changelog run `run_id` emitted: (row kind, row) pairs of `fields` (as `result`); the
        read skips the files of other runs by their statistics."""
        fields = self.result_fields() if fields is None else fields
        if run_id is None or not fields:  # no result yet: no changelog either (a run writes both)
            return []
        with_kind = [*fields, StructField(ROW_KIND_COLUMN, StringType())]
        return [(r[-1], r[:-1]) for r in _table_rows(self.tables.changelog, with_kind, run_id)]

    def versions(self) -> dict[str, int | None]:
        return {p: delta_log.version(p) for p in self.tables.all_tables()}

    def run(self) -> dict[str, Any]:
        out_runs: list[dict[str, Any]] = []
        problems: list[str] = []
        error = None
        for i, run in enumerate(self.case["runs"]):
            before = self.versions()
            self.append_changes(i, run.get("changes", {}))
            try:
                report = run_once(self.spark, self.plan, self.tables)
            except StreamJoinError as exc:
                if "expect_error" in run and run["expect_error"] in str(exc):
                    if self.versions() != before:
                        problems.append(f"run {i}: failed as expected but tables changed")
                    out_runs.append({"error": str(exc)})
                    continue
                error = f"run {i}: {exc}"
                break
            if "expect_error" in run:
                problems.append(f"run {i}: expected an error containing {run['expect_error']!r}")
            fields = self.result_fields()
            result = self.result(fields)
            changelog = self.changelog(report.run_id, fields)
            out_runs.append({"result": [[_to_json(v) for v in r] for r in result],
                             "changelog": [[k, [_to_json(v) for v in r]] for k, r in changelog]})
            types = [f.dataType for f in fields]
            if "expect_result" in run and types:
                want = _rows(run["expect_result"], types)
                if Counter(result) != want:
                    problems.append(f"run {i}: result {sorted(map(str, result))} != expected {sorted(map(str, want.elements()))}")
            if "expect_changelog" in run and types:
                want = _signed(run["expect_changelog"], types)
                got = _signed(changelog, types)
                if got != want:
                    problems.append(f"run {i}: changelog {dict(got)} != expected {dict(want)}")
        ok = error is None and not problems
        return {"case": self.name, "ok": ok, "error": error or ("; ".join(problems) if problems else None), "runs": out_runs}


def run_case(spark: SparkSession, case: dict[str, Any]) -> dict[str, Any]:
    """Run one case in a fresh temporary folder and report it as FORMAT.md describes."""
    with tempfile.TemporaryDirectory(prefix="streamjoin-case-") as root:
        try:
            return CaseRunner(spark, case, root).run()
        except Exception as exc:  # one broken case must not hide the others' outcomes
            return {"case": case.get("name"), "ok": False, "error": f"{type(exc).__name__}: {exc}", "runs": []}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamjoin.conformance", description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="conformance case JSON files")
    parser.add_argument("--jobs", type=int, default=3,
                        help="cases run at once on the one Spark session (small runs are latency-bound)")
    args = parser.parse_args(argv)
    from concurrent.futures import ThreadPoolExecutor

    from .session import local_session

    spark = local_session(app_name="streamjoin-conformance")
    cases = []
    for path in args.cases:
        with open(path, encoding="utf-8") as fh:
            cases.append(json.load(fh))
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for outcome in pool.map(lambda c: run_case(spark, c), cases):
            if not outcome["ok"]:
                failed.append(outcome["case"])
            print(json.dumps(outcome), flush=True)
    print(f"{len(cases) - len(failed)} of {len(cases)} cases ok" + (f"; failed: {', '.join(failed)}" if failed else ""),
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
