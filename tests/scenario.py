"""A small driver for scenario and property tests: a model, runs of changes, its outputs.

    m = Scenario(spark, tmp_path, "SELECT ... FROM l JOIN r ON l.k = r.k", l=[("k", "int")], r=[("k", "int")])
    m.run(l=[insert(1)], r=[insert(1)])
    assert m.changelog == {(1, 1): +1}

It goes through the same compiler, run protocol and Delta tables as the conformance runner.
"""
from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pytest
from pyspark.sql import SparkSession

from streamjoin.storage import delta_log, state
from streamjoin.conformance import CaseRunner, run_case
from streamjoin.errors import CompileError
from streamjoin.runtime.run import run_once
from streamjoin.spec import InputSpec, ModelConfig
from streamjoin.sql.compiler import compile_sql


@contextmanager
def compacting_at(bucket_files: int, level0_files: int, level0_rows: int | None = None) -> Iterator[None]:
    """State compaction thresholds for the block: a bucket's files, level 0's files (and its rows)."""
    saved = state.COMPACT_AT, state.LEVEL0_FILES, state.LEVEL0_ROWS
    state.COMPACT_AT, state.LEVEL0_FILES = bucket_files, level0_files
    state.LEVEL0_ROWS = state.LEVEL0_ROWS if level0_rows is None else level0_rows
    try:
        yield
    finally:
        state.COMPACT_AT, state.LEVEL0_FILES, state.LEVEL0_ROWS = saved


def assert_ok(outcome: dict[str, Any]) -> None:
    """A conformance case's outcome passed; else fail showing what each run produced."""
    assert outcome["ok"], f"{outcome['case']}: {outcome['error']}\nruns: {json.dumps(outcome['runs'], indent=1)}"


def cases_pass(spark: SparkSession, cases: Iterable[dict], files: Iterable[Path] = ()) -> None:
    """Run conformance cases (and case files), three at a time in the session: every one must pass."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        for outcome in pool.map(lambda c: run_case(spark, c), [*cases, *(json.loads(p.read_text()) for p in files)]):
            assert_ok(outcome)


def input_specs(declarations: dict[str, dict]) -> dict[str, InputSpec]:
    """Input specs from conformance-style declarations, by input name."""
    return {name: InputSpec.from_dict(name, raw) for name, raw in declarations.items()}


def compile_error(model: str, sql: str, declarations: dict[str, dict], config: dict | None = None) -> str:
    """The message of the CompileError that compiling `sql` must raise."""
    with pytest.raises(CompileError) as err:
        compile_sql(model, sql, input_specs(declarations), ModelConfig.from_dict(config or {}))
    return str(err.value)


def state_rows_per_run(spark: SparkSession, case: dict, folder: str, table: str) -> tuple[list[int], CaseRunner]:
    """Run a conformance case run by run; after each run, the rows of one of its state tables
    (e.g. `j1_left`). Returns them and the runner (for its result)."""
    runner = CaseRunner(spark, case, folder)
    sizes = []
    for i, run in enumerate(case["runs"]):
        runner.append_changes(i, run["changes"])
        run_once(spark, runner.plan, runner.tables)
        path = runner.tables.state(table)
        sizes.append(sum(f.num_records for f in delta_log.data_files(path, delta_log.version(path))))
    return sizes, runner


def insert(*values: Any) -> tuple[str, list]:
    return ("+I", list(values))


def delete(*values: Any) -> tuple[str, list]:
    return ("-D", list(values))


def update_before(*values: Any) -> tuple[str, list]:
    return ("-U", list(values))


def update_after(*values: Any) -> tuple[str, list]:
    return ("+U", list(values))


class Scenario:
    """One model over declared inputs, run after run, with its result and changelog as multisets."""

    def __init__(self, spark: SparkSession, root: Any, sql: str, *, config: dict | None = None,
                 unique_keys: dict[str, Sequence[str]] | None = None, name: str = "m", **inputs: Sequence[tuple[str, str]]) -> None:
        case = {
            "name": name,
            "sql": sql,
            "config": config or {},
            "inputs": {n: {"columns": [list(c) for c in cols], **({"unique_key": list(unique_keys[n])} if unique_keys and n in unique_keys else {})}
                       for n, cols in inputs.items()},
            "runs": [],
        }
        self.runner = CaseRunner(spark, case, str(root))
        self.runs = 0
        self.report = None

    @property
    def plan(self):
        return self.runner.plan

    @property
    def tables(self):
        return self.runner.tables

    def run(self, **changes: Sequence[tuple[str, list]]) -> "Scenario":
        """Append these changes to the inputs and perform one incremental run."""
        self.runner.append_changes(self.runs, {k: list(v) for k, v in changes.items()})
        self.runs += 1
        self.report = run_once(self.runner.spark, self.runner.plan, self.runner.tables)
        return self

    @property
    def result(self) -> Counter:
        return Counter(self.runner.result())

    @property
    def changelog(self) -> Counter:
        """This run's changelog as signed counts per row."""
        out: Counter = Counter()
        for kind, row in self.runner.changelog(self.report.run_id if self.report else None):
            out[tuple(row)] += 1 if kind.startswith("+") else -1
        return Counter({k: v for k, v in out.items() if v})

    @property
    def row_kinds(self) -> list[tuple[str, tuple]]:
        return sorted(self.runner.changelog(self.report.run_id if self.report else None))

    def versions(self) -> dict[str, int | None]:
        return self.runner.versions()


def runs_match_batch(model: Scenario, sql: str, inputs: dict[str, Sequence[tuple[str, str]]],
                     runs: Sequence[dict[str, list]], same: Callable[[Counter], Any] = lambda rows: rows) -> None:
    """Perform `runs` on `model`: after each, its result is the batch evaluation of `sql` over every change
    so far (the two compared as `same` shows them)."""
    from oracle import batch_result

    seen: dict[str, list] = {name: [] for name in inputs}
    for i, run in enumerate(runs):
        model.run(**run)
        for name, rows in run.items():
            seen[name] += rows
        assert same(model.result) == same(batch_result(model.runner.spark, sql, inputs, seen)), f"run {i}: {sql}"
