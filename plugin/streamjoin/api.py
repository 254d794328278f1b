"""The entry point generated model code calls: plain dicts in, one incremental run, a RunReport out.

    report = run_model(spark, name="orders_prices", sql=SQL, inputs=INPUTS, config=CONFIG,
                       root="/p/.streamjoin/state/models", relation="default.orders_prices")

`inputs` maps an input name to its declaration — the keys of `InputSpec.from_dict` plus
`relation` (how the model's SQL names it) and optionally `kind` (`source`, `streaming_join`,
`model`: used in messages). Columns may be left out, or given without types: they are then
read from the input's Delta table. Nothing here imports dbt.

After a run, `relation` is published in Spark's catalog as views over exactly the files of
the last *complete* run (never a half-applied one):

- `<relation>`: the result rows (the internal `_bucket` column hidden);
- `<relation>__changelog`: every changelog row with `_row_kind` and `_run_id`;
- `<relation>__batch`: the model's own SQL over its inputs' snapshots as that run read them
  (each changelog consolidated), i.e. what a batch engine says the result should be; temporal
  and window joins decided as of that run (`batch_views`).
- `<relation>__batch_on_time`: the same over the snapshots minus the late rows its interval
  joins recorded (`operators.interval`): the rows Flink's semantics promise. The result lies
  between the two (`streamjoin.matches_batch`); without late rows they are one.

`publish_input` publishes an input (a dbt source) the same way: a view over its rows now.

Each view reads one committed version of a table through the `streamjoin_delta` data source
(`storage.version_source`: Spark has no Delta reader here), on any filesystem, so it stays valid
while later runs rewrite or add files.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import pyarrow as pa
import sqlglot
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import StructType
from sqlglot import exp

from . import catalog
from .batch_views import (Timing, input_sql, late_rows_at, on_time_sql, replace_relations, runs_sql, snapshot_sql,
                          table_key)
from .errors import ConfigError, PlanChangedError
from .runtime.run import RunReport, app_id, manifest_of, run_once
from .session import apply_runtime_defaults
from .spec import (DEFAULT_OP_COLUMNS, INPUT_KEYS, ROW_KIND_COLUMN, RUN_ID_COLUMN, InputSpec, ModelConfig,
                   closest_key, unknown_keys)
from .sql.compiler import compile_sql
from .sql import asof, windows
from .sql.plan import JoinPlan
from .storage import delta_log, filesystem, formats
from .storage.version_source import reference
from .storage.tables import ModelTables
from .types import q

log = logging.getLogger("streamjoin")

#: Columns of a streaming_join model's changelog that are bookkeeping, not data.
CHANGELOG_META_COLUMNS = (ROW_KIND_COLUMN, RUN_ID_COLUMN)
#: Declaration keys that describe where an input comes from rather than what it holds.
_ORIGIN_KEYS = ("relation", "kind")


def run_model(spark: SparkSession, *, name: str, sql: str, inputs: Mapping[str, Mapping[str, Any]],
              config: Mapping[str, Any] | None, root: str, relation: str | None = None,
              full_refresh: bool = False, ignore: Sequence[str] = ()) -> RunReport:
    """Compile `sql` and perform one incremental run of model `name` with its tables under `root`.

    Args:
        spark: The session to run on.
        name: The model's name; its tables live in `ModelTables(root, name)`.
        sql: The model's SELECT, naming inputs by their `relation`.
        inputs: Input name -> declaration (see the module docstring).
        config: The model's streamjoin configuration (`ModelConfig` keys).
        root: Folder of all models' tables.
        relation: Catalog name to publish the result under; None publishes nothing.
        full_refresh: Drop the model's state, offsets and outputs first and replay every
            input from its beginning. Under config `on_plan_change='full_refresh'` a run does so
            by itself when the SQL or configuration changed what the state depends on.
        ignore: Config keys that belong to the caller (e.g. dbt's own) and are skipped.

    Raises:
        CompileError: the SQL, a declaration or the config is invalid (nothing was written).
        InputError: an input's changes are invalid (nothing was committed).
    """
    plan = compile_model(name=name, sql=sql, inputs=inputs, config=config, ignore=ignore)
    tables = ModelTables(root, name)
    apply_runtime_defaults(spark)
    if full_refresh:
        _drop_model(spark, tables, relation)
    try:
        report = run_once(spark, plan, tables)
    except PlanChangedError as exc:  # raised before the run wrote anything
        if full_refresh or plan.config.on_plan_change != "full_refresh":
            raise
        log.warning("streamjoin %s: the SQL or configuration changed: %s; refreshing it in full "
                    "(on_plan_change='full_refresh'). What changed:\n%s", name, exc.what, exc.diff)
        _drop_model(spark, tables, relation)
        report = run_once(spark, plan, tables)
    if relation and report.status != "rebuilding":  # while it rebuilds, the views keep the old result
        publish(spark, plan=plan, tables=tables, relation=relation, sql=sql, relations=_relations(inputs))
    return report


def _drop_model(spark: SparkSession, tables: ModelTables, relation: str | None) -> None:
    """Drop the model's views (if published) and tables, for a run that replays its inputs from the start."""
    if relation:  # first: dropping a view reads it, so the tables it reads must still be there
        _drop_views(spark, relation)
    filesystem.delete_dir(tables.home)


def compile_model(*, name: str, sql: str, inputs: Mapping[str, Mapping[str, Any]],
                  config: Mapping[str, Any] | None, ignore: Sequence[str] = ()) -> JoinPlan:
    """The model's join plan, after validating every declaration (all problems reported at once)."""
    problems: list[str] = []
    specs = {}
    for input_name, raw in inputs.items():
        try:
            specs[input_name] = input_spec(name, input_name, raw)
        except ConfigError as exc:
            problems.extend(exc.problems)
    try:
        model_config = ModelConfig.from_dict(config, model=name, ignore=tuple(ignore))
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems, model=name)
    return compile_sql(name, rename_relations(name, sql, _relations(inputs)), specs, model_config)


def input_spec(model: str, name: str, raw: Mapping[str, Any]) -> InputSpec:
    """One input's spec from its declaration, columns and types filled in from its Delta table."""
    decl = {k: v for k, v in raw.items() if k not in _ORIGIN_KEYS}
    where = f"input '{name}'"
    misspelt = unknown_keys(decl, INPUT_KEYS, where=where)  # reported first: they cause the problems below
    meant = {closest_key(k, INPUT_KEYS) for k in decl if k not in INPUT_KEYS}
    problems: list[str] = []
    fmt = decl.get("changelog_format", "changelog")
    location = decl.get("location")
    if not location:
        problems.append(f"{where}: declare its location (the path of its Delta changelog table)")
    op_column = decl.get("op_column") or DEFAULT_OP_COLUMNS.get(fmt)
    table_schema = _delta_schema(location) if location else None
    declared = [c if isinstance(c, Mapping) else {"name": c[0], "type": c[1]} for c in decl.get("columns") or []]
    if table_schema is None and (not declared or any(not _declared_type(c) for c in declared)):
        problems.append(f"{where}: no Delta table at {location!r} to read column types from; load the "
                        "input first or declare every column with a data_type")
    elif table_schema is not None:
        if fmt == "debezium":
            table_schema = _debezium_payload(table_schema, op_column, where, problems)
        elif fmt == "changelog" and not meant & {"changelog_format", "op_column"} \
                and op_column.lower() not in {n.lower() for n in table_schema.names}:
            problems.append(f"{where}: changelog_format 'changelog' needs the row kind column '{op_column}', which "
                            f"the Delta table at {location} lacks; set op_column, or changelog_format 'append' "
                            "for insert-only events")
        if not declared:
            bookkeeping = {c.lower() for c in (op_column if fmt == "changelog" else None, decl.get("delete_column")) if c}
            if raw.get("kind") == "streaming_join":
                bookkeeping |= set(CHANGELOG_META_COLUMNS)
            declared = [{"name": f.name} for f in table_schema if f.name.lower() not in bookkeeping]
        declared = [{"name": c["name"], "type": _declared_type(c) or _spark_type(table_schema, c["name"], where, problems)}
                    for c in declared]
    spec = None
    if not problems:
        try:
            spec = InputSpec.from_dict(name, {**{k: v for k, v in decl.items() if k in INPUT_KEYS}, "columns": declared},
                                       model=model)
        except ConfigError as exc:
            problems += exc.problems
    if misspelt or problems or spec is None:
        raise ConfigError(misspelt + problems, model=model)
    return spec


def _debezium_payload(schema: pa.Schema, op_column: str, where: str, problems: list[str]) -> pa.Schema:
    """The row columns of a Debezium table: the fields of its `after` struct."""
    names = {f.name.lower(): f for f in schema}
    missing = [c for c in (*formats.DEBEZIUM_IMAGES, op_column) if c.lower() not in names]
    after = names.get("after")
    if missing or not pa.types.is_struct(after.type):
        problems.append(f"{where}: changelog_format 'debezium' needs columns before and after (structs of the row's "
                        f"columns) and '{op_column}'; its Delta table has {', '.join(schema.names)}")
        return pa.schema([])
    return pa.schema([after.type.field(i) for i in range(after.type.num_fields)])


def _declared_type(column: Mapping[str, Any]) -> str | None:
    return column.get("type") or column.get("data_type") or None


def _delta_schema(location: str) -> pa.Schema | None:
    if not delta_log.exists(location):
        return None
    return delta_log.table_schema(location)


def _spark_type(schema: pa.Schema, column: str, where: str, problems: list[str]) -> str:
    for f in schema:
        if f.name.lower() == column.lower():
            return from_arrow_type(f.type).simpleString()
    problems.append(f"{where}: column '{column}' is declared but its Delta table has no such column "
                    f"(it has {', '.join(schema.names)})")
    return "string"


def _relations(inputs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {name: str(raw.get("relation") or name) for name, raw in inputs.items()}


def rename_relations(model: str, sql: str, relations: Mapping[str, str]) -> str:
    """Rewrite the relations the SQL reads (e.g. `shop.orders`) to their input names, in place.

    Only the relation's tokens change (found by sqlglot's tokenizer offsets); each name is padded
    with spaces to the length of the text it replaces, so every other token keeps its line and
    column and a compile error points into the SQL as written. (A name longer than the relation
    it replaces shifts the rest of that line.)

    >>> rename_relations("m", "SELECT o.id FROM shop.orders o JOIN `shop`.`prices` p ON o.id = p.id",
    ...                  {"orders": "shop.orders", "prices": "shop.prices"})
    'SELECT o.id FROM orders      o JOIN prices          p ON o.id = p.id'
    """
    by_key = {table_key(exp.to_table(rel, dialect="spark")): name for name, rel in relations.items()}
    try:
        tree = sqlglot.parse_one(asof.parseable(windows.parseable(sql))[0], read="spark")
    except sqlglot.errors.ParseError as exc:
        raise ConfigError(f"cannot parse the SQL: {exc}", model=model) from exc
    spans: list[tuple[int, int, str]] = []  # start, end (exclusive), input name
    for table in [*tree.find_all(exp.Table), *windows.window_inputs(tree)]:
        starts = [p.meta.get("start") for p in table.parts]
        if table_key(table) in by_key and None not in starts:
            start, end = min(starts), max(p.meta["end"] for p in table.parts) + 1
            spans.append((start, end, exp.to_identifier(by_key[table_key(table)]).sql(dialect="spark")))
    for start, end, name in sorted(spans, reverse=True):
        sql = sql[:start] + name.ljust(end - start) + sql[end:]
    return sql


# -- publishing ---------------------------------------------------------------------------------


def last_complete_run(tables: ModelTables) -> int | None:
    """The id of the model's last run whose run log committed (the run is then complete)."""
    return delta_log.app_version(tables.runs, app_id(tables.model))


def version_of_run(path: str, run_id: int) -> int | None:
    """The table's latest version not written by a run after `run_id` (None: no such version);
    maintenance commits (no run) keep the data of the run before them."""
    if not delta_log.exists(path):
        return None
    for entry in delta_log.newest_commits(delta_log.table(path)):
        run = entry.get("streamjoin.run")
        if run is None or int(run) <= run_id:
            return int(entry["version"])
    return None


def publish(spark: SparkSession, *, plan: JoinPlan, tables: ModelTables, relation: str, sql: str,
            relations: Mapping[str, str]) -> None:
    """Point the model's views at the tables as its last complete run left them."""
    run_id = last_complete_run(tables)
    manifest = manifest_of(tables.runs)
    if run_id is None or manifest is None:
        return
    result_version = version_of_run(tables.result, run_id)
    changelog_version = version_of_run(tables.changelog, run_id)
    if result_version is None or changelog_version is None:
        return
    hidden = ("_bucket",)
    _replace_view(spark, relation, _version_select(spark, tables.result, result_version, hidden))
    _replace_view(spark, f"{relation}__changelog", _version_select(spark, tables.changelog, changelog_version, ()))
    offsets, runs_version = manifest["offsets"], version_of_run(tables.runs, run_id)
    assert runs_version is not None  # the run log holds the run
    runs = runs_sql(spark, tables, runs_version)
    timing = Timing.of(spark, plan, tables, offsets, lambda path: version_of_run(path, run_id), runs)
    snapshots = {name: input_sql(spark, spec, offsets[name], runs, timing) for name, spec in plan.inputs.items()}
    columns = [f.name for f in _schema(tables.result, result_version).fields if f.name not in hidden]
    _replace_view(spark, f"{relation}__batch",
                  replace_relations(sql, relations, {n: f"({s})" for n, s in snapshots.items()}, timing, columns))
    on_time = on_time_sql(spark, tables, plan, snapshots, version_of_run(tables.late_rows, run_id))
    _replace_view(spark, f"{relation}__batch_on_time",
                  replace_relations(sql, relations, {n: f"({s})" for n, s in on_time.items()}, timing, columns))


def batch_views_agree(tables: ModelTables) -> bool:
    """Whether the model's views `__batch_on_time` and `__batch` are one SELECT: its last complete run
    had recorded no late row (`streamjoin.matches_batch` then evaluates one)."""
    run_id = last_complete_run(tables)
    return run_id is not None and not late_rows_at(tables, version_of_run(tables.late_rows, run_id))


def publish_input(spark: SparkSession, *, name: str, declaration: Mapping[str, Any], relation: str) -> bool:
    """Publish an input (e.g. a dbt source) as the view `relation` over its rows as they are now.

    The rows are the input's changelog consolidated, read as its format defines (what
    `<model>__batch` reads as an input's snapshot), at the table's current version, so later
    appends do not change it until it is published again. The view's schema is created if missing.

    Args:
        spark: The session whose catalog gets the view.
        name: The input's name (used in messages).
        declaration: The input's declaration (see the module docstring).
        relation: The catalog name, e.g. `shop.orders`.

    Returns:
        False, publishing nothing, when `relation` is a table of the catalog's own (never replaced).

    Raises:
        ConfigError: the declaration is invalid, or names no columns and there is no Delta table.
    """
    kind, view_text = catalog.table_entry(spark, relation)
    if kind not in (None, "VIEW"):
        return False
    spec = input_spec(name, name, declaration)
    select = snapshot_sql(spark, spec, delta_log.version(spec.location))
    if view_text == select:
        return True
    table = exp.to_table(relation, dialect="spark")
    if table.db:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {q(table.db)}")
    catalog.put_view(spark, relation, select, exists=kind == "VIEW")
    return True


def _version_select(spark: SparkSession, path: str, table_version: int, hidden: Sequence[str]) -> str:
    """A SELECT of one version of a table, without its `hidden` columns."""
    schema = _schema(path, table_version)
    names = [f.name for f in schema.fields if f.name not in hidden]
    return f"SELECT {', '.join(q(n) for n in names)} FROM {reference(spark, path, table_version, schema)}"


def _schema(path: str, table_version: int) -> StructType:
    return from_arrow_schema(delta_log.table_schema(path, table_version))


def _replace_view(spark: SparkSession, name: str, select: str) -> None:
    kind = _table_type(spark, name)
    if kind not in (None, "VIEW"):
        spark.sql(f"DROP TABLE {name}")
    catalog.put_view(spark, name, select, exists=kind == "VIEW")


def _drop_views(spark: SparkSession, relation: str) -> None:
    for name in (relation, f"{relation}__changelog", f"{relation}__batch", f"{relation}__batch_on_time"):
        if _table_type(spark, name) == "VIEW":
            spark.sql(f"DROP VIEW {name}")


def _table_type(spark: SparkSession, name: str) -> str | None:
    return catalog.table_entry(spark, name)[0]
