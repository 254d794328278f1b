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
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, DataType, DateType, DecimalType, DoubleType, FloatType, LongType,
                               StringType, StructField, StructType, TimestampType)

from .errors import StreamJoinError
from .runtime.run import run_once
from .spec import ROW_KIND_COLUMN, RUN_ID_COLUMN, InputSpec, ModelConfig
from .sql.compiler import compile_sql
from .storage import delta_log, file_reads, formats
from .storage.tables import ModelTables
from .zset import col


def _to_python(value: Any, t: DataType) -> Any:
    """A JSON value (or a value collected as text) as a comparable Python value of type `t`."""
    if value is None:
        return None
    if isinstance(t, TimestampType):
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


def _collect(df: DataFrame) -> list[tuple]:
    """Rows as comparable tuples; timestamps travel as UTC text so no local timezone creeps in."""
    fields = [f for f in df.schema.fields]
    exprs = [F.date_format(col(f.name), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(f.name)
             if isinstance(f.dataType, TimestampType) else col(f.name) for f in fields]
    return [tuple(_to_python(v, f.dataType) for v, f in zip(row, fields)) for row in df.select(*exprs).collect()]


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

    def result(self) -> DataFrame:
        files = delta_log.data_files(self.tables.result, delta_log.version(self.tables.result))
        schema = StructType([f for f in self._result_schema().fields if f.name != "_bucket"])
        return file_reads.read(self.spark, files, schema)

    def _result_schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(delta_log.table_schema(self.tables.result))

    def changelog(self, run_id: int | None) -> list[tuple[str, tuple]]:
        if run_id is None or not delta_log.exists(self.tables.changelog):
            return []
        files = delta_log.data_files(self.tables.changelog, delta_log.version(self.tables.changelog))
        schema = StructType([f for f in self._result_schema().fields if f.name != "_bucket"]
                            + [StructField(ROW_KIND_COLUMN, StringType()), StructField(RUN_ID_COLUMN, LongType())])
        df = file_reads.read(self.spark, files, schema).where(F.col(RUN_ID_COLUMN) == run_id).drop(RUN_ID_COLUMN)
        return [(r[-1], r[:-1]) for r in _collect(df)]

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
            result = _collect(self.result()) if delta_log.exists(self.tables.result) else []
            changelog = self.changelog(report.run_id)
            out_runs.append({"result": [[_to_json(v) for v in r] for r in result],
                             "changelog": [[k, [_to_json(v) for v in r]] for k, r in changelog]})
            types = [f.dataType for f in self._result_schema().fields if f.name != "_bucket"] if delta_log.exists(self.tables.result) else []
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
