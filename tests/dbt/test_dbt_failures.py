"""Failing streaming_join models: each gives one dbt error naming the model, and writes nothing.

A small project in a temporary folder (its inputs are Delta tables the test writes) is run
twice. The first `dbt run` builds the two models that will fail later and rejects the ones
that never compile; between the runs one input's schema changes and another input receives a
row that makes the model's SELECT raise mid-run (Spark's `raise_error`); the second run must reject
both while leaving every Delta table of those models at the version it had. Between the runs a
third model's SQL is edited too, in its projection only: the second run applies the edit from
state, with no rebuild; a fourth model's join is edited, and the second run rebuilds it side by
side and swaps it in.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from dbt_process import REPO, Invocation, dbt, versions
from example_results import rows

pytestmark = pytest.mark.slow

PROJECT_YML = """
name: streamjoin_failures
version: "1.0"
config-version: 2
profile: streamjoin_failures
models:
  streamjoin_failures:
    +materialized: streaming_join
"""
# The streaming_join materialization comes from this repository, used as a dbt package.
PACKAGES_YML = f"""
packages:
  - local: "{REPO}"
"""
PROFILES_YML = """
streamjoin_failures:
  target: local
  outputs:
    local:
      type: streamjoin
      local_dir: "{{ env_var('STREAMJOIN_LOCAL_DIR') }}"
"""
SOURCES_YML = """
version: 2
sources:
  - name: src
    schema: src
    tables:
      - name: left_in
        meta: {streamjoin: {location: "inputs/left_in", unique_key: [k]}}
      - name: right_in
        meta: {streamjoin: {location: "inputs/right_in"}}
        columns:
          - {name: k, data_type: bigint}
          - {name: w, data_type: bigint}
      - name: events
        meta: {streamjoin: {location: "inputs/events", changelog_format: append}}
"""
MODELS = {
    # positions are the model file's: the three lines of its config (rendered to one empty line) and the
    # blank line below it count, so the GROUP BY is reported on line 7
    "unsupported_sql": "{{ config(\n    materialized='streaming_join'\n) }}\n\nselect l.k, count(*) as n\n"
                       "from {{ source('src', 'left_in') }} l join {{ source('src', 'right_in') }} r on l.k = r.k\n"
                       "group by l.k",
    "bad_config": "{{ config(join_stratgy='multi') }}\n"
                  "select l.k, r.w from {{ source('src', 'left_in') }} l join {{ source('src', 'right_in') }} r on l.k = r.k",
    "drifting_input": "select l.k, l.v, r.w from {{ source('src', 'left_in') }} l "
                      "join {{ source('src', 'right_in') }} r on l.k = r.k",
    "fails_midway": "select l.k, case when l.v = e.v then raise_error('ratio undefined: v equals e.v') "
                    "else 100 div (l.v - e.v) end as ratio from {{ source('src', 'left_in') }} l "
                    "join {{ source('src', 'events') }} e on l.k = e.k",
    "reprojected": "select l.k, l.v, e.v as ev from {{ source('src', 'left_in') }} l "
                   "left join {{ source('src', 'events') }} e on l.k = e.k",
    "rebuilt": "select l.k, l.v, e.v as ev from {{ source('src', 'left_in') }} l "
               "join {{ source('src', 'events') }} e on l.k = e.k",
}
LATE_MODELS = ("drifting_input", "fails_midway")
#: reprojected's SQL as edited between the runs: other output expressions, a filter after its join
REPROJECTED = ("select l.k, l.v * 2 as v, e.v as ev from {{ source('src', 'left_in') }} l "
               "left join {{ source('src', 'events') }} e on l.k = e.k where e.v is null or e.v < l.v")
#: rebuilt's SQL as edited between the runs: another join, so its state is rebuilt side by side
REBUILT = ("select l.k, l.v, e.v as ev from {{ source('src', 'left_in') }} l "
           "left join {{ source('src', 'events') }} e on l.k = e.k and e.v < l.v")


def _changelog(**columns: list) -> pa.Table:
    kinds = ["+I"] * len(next(iter(columns.values())))
    return pa.table({**{n: pa.array(v, pa.int64()) for n, v in columns.items()}, "_row_kind": kinds})


@dataclass(frozen=True)
class Outcome:
    first: Invocation
    second: Invocation
    root: Path
    before: Dict[str, Dict[str, Optional[int]]]
    after: Dict[str, Dict[str, Optional[int]]]


def _tables(root: Path, model: str) -> list[Path]:
    home = root / "state" / "models" / model
    return [home / "result", home / "changelog", home / "runs",
            *sorted((home / "state").iterdir() if (home / "state").is_dir() else [])]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    project = tmp_path_factory.mktemp("failures")
    (project / "models").mkdir()
    (project / "dbt_project.yml").write_text(PROJECT_YML)
    (project / "profiles.yml").write_text(PROFILES_YML)
    (project / "packages.yml").write_text(PACKAGES_YML)
    (project / "models" / "sources.yml").write_text(SOURCES_YML)
    for name, sql in MODELS.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    inputs = project / "inputs"
    write_deltalake(str(inputs / "left_in"), _changelog(k=[1, 2], v=[10, 20]))
    write_deltalake(str(inputs / "right_in"), _changelog(k=[1, 2], w=[5, 6]))
    write_deltalake(str(inputs / "events"), pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([7], pa.int64())}))
    local_dir = project / ".streamjoin"
    local_dir.mkdir()
    deps = dbt(["deps"], project=project, local_dir=local_dir)
    assert deps.returncode == 0, deps.output
    first = dbt(["run"], project=project, local_dir=local_dir)

    before = {m: versions(_tables(local_dir, m)) for m in LATE_MODELS}
    # right_in's `w` becomes a string; an event with v = 20 makes fails_midway's SELECT raise an error.
    changed = pa.table({"k": pa.array([3], pa.int64()), "w": ["x"], "_row_kind": ["+I"]})
    write_deltalake(str(inputs / "right_in"), changed, mode="overwrite", schema_mode="overwrite")
    write_deltalake(str(inputs / "events"), pa.table({"k": pa.array([2], pa.int64()), "v": pa.array([20], pa.int64())}),
                    mode="append")
    (project / "models" / "reprojected.sql").write_text(REPROJECTED)
    (project / "models" / "rebuilt.sql").write_text(REBUILT)
    second = dbt(["run", "--select", *LATE_MODELS, "reprojected", "rebuilt"], project=project, local_dir=local_dir)
    after = {m: versions(_tables(local_dir, m)) for m in LATE_MODELS}
    return Outcome(first, second, local_dir, before, after)


def _message(invocation: Invocation, model: str) -> str:
    result = invocation.results[model]
    assert result["status"] == "error", invocation.output[-4000:]
    return result["message"]


def test_first_run_builds_the_valid_models(outcome: Outcome) -> None:
    assert outcome.first.statuses() == {"unsupported_sql": "error", "bad_config": "error",
                                        "drifting_input": "success", "fails_midway": "success",
                                        "reprojected": "success", "rebuilt": "success"}, outcome.first.output
    assert rows(outcome.root / "state" / "models" / "drifting_input" / "result") == [(1, 10, 5), (2, 20, 6)]


def test_unsupported_sql_is_one_error_naming_model_and_construct(outcome: Outcome) -> None:
    message = _message(outcome.first, "unsupported_sql")
    assert "streamjoin model model.streamjoin_failures.unsupported_sql failed: CompileError" in message
    assert "GROUP BY is not supported in a streaming join at line 7, column 10" in message, message
    assert "Traceback" not in message


def test_bad_config_names_the_model_and_the_key(outcome: Outcome) -> None:
    message = _message(outcome.first, "bad_config")
    assert "model 'bad_config'" in message and "unknown config key 'join_stratgy'" in message


def test_models_that_failed_to_compile_wrote_nothing(outcome: Outcome) -> None:
    for model in ("unsupported_sql", "bad_config"):
        assert not (outcome.root / "state" / "models" / model).exists()


def test_changed_input_schema_fails_naming_model_and_input(outcome: Outcome) -> None:
    message = _message(outcome.second, "drifting_input")
    assert "model 'drifting_input', input 'right_in'" in message
    assert "column 'w' is string, declared int64" in message or "column 'w'" in message


def test_failure_in_the_middle_of_a_run_names_the_model(outcome: Outcome) -> None:
    message = _message(outcome.second, "fails_midway")
    assert "model.streamjoin_failures.fails_midway" in message
    assert "ratio undefined: v equals e.v" in message


def test_failed_runs_commit_nothing(outcome: Outcome) -> None:
    for model in LATE_MODELS:
        assert all(v is not None for v in outcome.before[model].values()), model
        assert outcome.after[model] == outcome.before[model], model


def test_a_projection_only_edit_is_applied_from_state_without_a_rebuild(outcome: Outcome) -> None:
    assert outcome.first.results["reprojected"]["status"] == "success", outcome.first.output[-4000:]
    assert outcome.second.results["reprojected"]["status"] == "success", outcome.second.output[-4000:]
    assert "re-projects its result from state, with no rebuild" in outcome.second.output
    home = outcome.root / "state" / "models" / "reprojected"
    # left_in (1, 10), (2, 20); events (1, 7) and, since the first run, (2, 20), which the filter drops
    assert rows(home / "result") == [(1, 20, 7)]
    assert rows(home / "changelog") == sorted([(1, 10, 7, "+I", 1), (2, 20, None, "+I", 1), (1, 10, 7, "-D", 2),
                                               (2, 20, None, "-D", 2), (1, 20, 7, "+I", 2)], key=repr)


def test_an_edit_of_a_join_is_rebuilt_side_by_side_and_swapped_in(outcome: Outcome) -> None:
    assert outcome.second.results["rebuilt"]["status"] == "success", outcome.second.output[-4000:]
    assert "rebuilding it side by side from its inputs while its tables keep the old result" in outcome.second.output
    assert "+  left join j1 ON `l__k` = `e__k` residual `e__v` < `l__v`" in outcome.second.output
    home = outcome.root / "state" / "models" / "rebuilt"
    # left_in (1, 10), (2, 20); events (1, 7) and, since the first run, (2, 20), which the new condition does not join
    assert rows(home / "result") == [(1, 10, 7), (2, 20, None)]
    assert rows(home / "changelog") == sorted([(1, 10, 7, "+I", 1), (2, 20, None, "+I", 2)], key=repr)
    assert not (home / "_rebuild").exists()

