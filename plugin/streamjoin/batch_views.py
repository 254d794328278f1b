"""The batch evaluation behind a model's `__batch` views: its own SQL over its inputs as its last
complete run read them, with the rule of each time-based join applied as of that run.

Each input becomes its snapshot (its changelog consolidated, as its format defines). A join whose
result depends on time gets what decides it after that run, so the batch says exactly what the
streaming semantics promise (`../shared/conformance/FORMAT.md`) when every row arrives ahead of
the watermark:

- an event-time temporal join: its probe input keeps the rows at or behind the join's watermark
  (the others still wait); the versioned input becomes its versions, each valid from its event
  time until the next entry of its join key (per key and time the entry written last; `-U`
  ignored; a deletion ends the version before it and is no version itself; a `cdf` input's
  history is the table as the model first read it, then its change data feed); and the ON
  condition gains `valid from <= probe time < valid to`, so a probe row joins the version valid
  at its time, or is null-padded under LEFT JOIN;
- a lookup join: an input with a processing-time column gives its live rows, each with the time of
  the run that read its insertion, from the run log (a retraction takes a row's latest live
  insertion, as the join's state does, `processing_time_sql`); the dimension becomes its
  snapshot at the version each run read to, valid from that run's time until the next run's, and
  the join's ON condition gains that validity as a temporal join's does. A lookup whose probe side
  is a join (Flink accepts it too) looks up when the join emits a row: where that side is inner joins
  of inputs that only insert (`append` inputs, each read as declared, not as a derived table), the
  run that emits a row is the latest run that read one of its rows, so the batch looks up as of the
  greatest of their read times (`READ_TIME`, each such input's rows carry it); other probe sides
  look up as of the time their probe input's row was read, which differs where the join emits the
  row in a later run;
- a window join: each side keeps the windows that fired (window_end - 1 ms <= the join's watermark; in a
  cascade, the last join's);
- an ASOF join (Spark SQL has none): a `LATERAL` subquery picks each left row's nearest right row
  (ON and the match condition as its WHERE, ordered by the right time, ties to the smallest row,
  `LIMIT 1`), joined with `LEFT JOIN` for `LEFT ASOF JOIN` and `JOIN` for `ASOF JOIN`.

`__batch_on_time` is the same over the inputs minus the late rows interval joins recorded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import sqlglot
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType
from sqlglot import exp

from .operators import temporal, window
from .operators.event_time import Clock
from .operators.interval import late_sides
from .spec import InputSpec
from .sql import asof, windows
from .sql.plan import Join, JoinPlan, MultiJoin, Node, Scan, Windowing, scans
from .storage import delta_log, formats
from .storage.file_reads import with_positions
from .storage.tables import ModelTables
from .storage.version_source import reference
from .types import JoinType, q, text

VALID_FROM, VALID_TO = "__valid_from", "__valid_to"
#: The time of the run that read a row, on the rows of an input a lookup's probe side joins (`Timing.read_times`).
READ_TIME = "__streamjoin_read_time"
RUN_TIME, NEXT_RUN_TIME, RUN_OFFSETS = "`__run_time`", "`__next_run_time`", "`__run_offsets`"
#: What `runs_sql` reads of a run's manifest (`runtime.run`).
_OFFSETS = "map<string, struct<start: bigint, end: bigint>>"
MANIFEST_FIELDS = (f"struct<started: double, offsets: {_OFFSETS}, "
                   f"swap: struct<runs: array<struct<run_id: bigint, started: double, offsets: {_OFFSETS}>>>>")
#: Where a swap's shadow runs go in the order of runs: before every run of the model.
_SHADOW_RUN_IDS = 1_000_000_000_000


def table_key(table: exp.Table | exp.Column) -> tuple[str, ...]:
    """A relation's name as a comparable key (lower-case parts)."""
    return tuple(p.name.lower() for p in table.parts)


@dataclass
class Timing:
    """What the time-based joins of a model decide after one run, keyed by relation alias (lower case)."""

    kept: dict[str, str] = field(default_factory=dict)  # alias -> condition on the relation's rows
    versions: dict[str, str] = field(default_factory=dict)  # versioned alias -> its versions (SQL)
    nearest: dict[str, list[str]] = field(default_factory=dict)  # ASOF right alias -> ORDER BY, nearest first
    emitted: dict[str, list[str]] = field(default_factory=dict)  # lookup dimension alias -> read times of its probe rows' parts
    read_times: set[str] = field(default_factory=set)  # inputs whose rows carry `READ_TIME`

    @classmethod
    def of(cls, spark: SparkSession, plan: JoinPlan, tables: ModelTables, offsets: Mapping[str, Mapping[str, Any]],
           table_version: Callable[[str], int | None], runs: str) -> "Timing":
        """The timing of `plan` as its tables are at `table_version(path)` (the run's version of
        each state table), its inputs at the run's `offsets` (its manifest's), after `runs` (`runs_sql`)."""
        timing = cls()
        for node in plan.nodes():
            if not isinstance(node, Join):
                continue
            if node.temporal is not None and node.temporal.processing_time:
                dimension = node.right
                assert isinstance(dimension, Scan)  # the compiler checks it
                timing.versions[dimension.alias.lower()] = run_versions_sql(
                    spark, plan.inputs[dimension.input], offsets[dimension.input], runs)
                emitting = _emitting_scans(plan, node.left)
                if emitting:
                    timing.emitted[dimension.alias.lower()] = [f"{q(s.alias)}.{q(READ_TIME)}" for s in emitting]
                    timing.read_times.update(s.input for s in emitting)
            elif node.temporal is not None:
                versioned = node.right
                # the input whose event time the probes carry (its own, or a temporal or interval join's rows')
                time = node.temporal.probe_time
                probe = next(s for s in scans(node.left) if time in s.output_columns)
                assert isinstance(versioned, Scan)  # the compiler checks it
                path = tables.state(f"{node.id}_probes")
                w = Clock.load(temporal.META_KEY, path, table_version(path)).watermark
                spec = plan.inputs[probe.input]
                # in a chain, the later join's watermark (it comes later in `nodes`) is never ahead of the earlier's
                timing.kept[probe.alias.lower()] = _at_or_before(q(spec.event_time or ""), w)
                timing.versions[versioned.alias.lower()] = versions_sql(
                    spark, plan.inputs[versioned.input], offsets[versioned.input], _input_keys(node, versioned))
            elif node.window is not None:
                path = tables.state(f"{node.id}_left")
                w = Clock.load(window.META_KEY, path, table_version(path)).watermark
                # a cascade's scans too: the later join's watermark (it comes later in `nodes`) is never ahead of
                # the earlier's, and the windows it fired are those of the whole cascade's result
                for scan in scans(node):
                    timing.kept[scan.alias.lower()] = _at_or_before(_window_end(scan), w, window.MILLI)
            elif node.asof is not None:
                right = node.right
                assert isinstance(right, Scan)  # the compiler checks it
                names = {internal: f"{q(right.alias)}.{q(name)}" for name, internal in right.columns}
                time = _rename(node.asof.right_time, names)
                timing.nearest[right.alias.lower()] = [f"{time} {'DESC' if node.asof.latest else 'ASC'}",
                                                       *(f"{n} ASC NULLS FIRST" for n in names.values())]
        return timing


def _emitting_scans(plan: JoinPlan, probe: Node) -> list[Scan]:
    """The scans of a lookup's probe side that is a join whose rows a run emits when it reads the last
    of their parts: inner joins (no time-based join) of `append` inputs, each read by one scan as
    declared (the batch gives their rows `READ_TIME`); none for any other probe side."""
    if isinstance(probe, Scan):
        return []
    found: list[Scan] = []
    nodes = [probe]
    while nodes:
        node = nodes.pop()
        if isinstance(node, Scan):
            found.append(node)
        elif isinstance(node, MultiJoin) and all(t in (None, JoinType.INNER) for t in node.join_types):
            nodes += node.inputs
        elif isinstance(node, Join) and node.kind == JoinType.INNER.value and node.time_bound is None:
            nodes += [node.left, node.right]
        else:
            return []
    inputs = [s.input for s in found]
    late = {name for _, _, name in late_sides(plan)}
    if any(s.derived or plan.inputs[s.input].changelog_format != "append" or inputs.count(s.input) > 1 or s.input in late
           for s in found):
        return []
    return found


def _at_or_before(time: str, watermark: int | None, minus: int = 0) -> str:
    """SQL: `time` (minus `minus` microseconds) is at or behind the watermark (false without one)."""
    if watermark is None:
        return "false"
    return f"unix_micros(CAST({time} AS TIMESTAMP)) - {minus} <= {watermark}"


def _window_end(scan: Scan) -> str:
    """SQL, over the windowed relation's own columns, for the end of a row's window."""
    if scan.windows is None or scan.windows.tvf is not None:
        return q(Windowing.COLUMNS[1])  # window_end
    names = {internal: name for name, internal in scan.columns}
    end = scan.windows.column("end")
    return q(names[end]) if end else f"{q(names[scan.windows.column('window') or ''])}.`end`"


def _input_keys(node: Join, versioned: Scan) -> list[str]:
    """The join key expressions of the versioned side, over its input's columns."""
    return [_rename(k.right, {internal: q(name) for name, internal in versioned.columns}) for k in node.keys]


def _rename(sql: str, names: Mapping[str, str]) -> str:
    """Spark SQL over internal column names, with each name in `names` replaced by its SQL."""
    def own(n: exp.Expression) -> exp.Expression:
        return sqlglot.parse_one(names[n.name], read="spark") if isinstance(n, exp.Column) and n.name in names else n

    return sqlglot.parse_one(sql, read="spark").transform(own).sql("spark")


def runs_sql(spark: SparkSession, tables: ModelTables, runs_version: int) -> str:
    """SQL for the model's runs as of a version of its run log: `run_id`, `RUN_TIME` (when it ran,
    in milliseconds: the processing time of the rows it read), `NEXT_RUN_TIME` (the next run's;
    NULL for the last) and `RUN_OFFSETS` (input name -> start and end of the versions it read).

    After a rebuild's swap (`runtime.rebuild`), the runs before it are the shadow's, which the swap's
    manifest records: they read the rows of the rebuilt result."""
    schema = StructType([StructField("run_id", LongType()), StructField("manifest", StringType())])
    log = (f"(SELECT run_id, from_json(manifest, {text(MANIFEST_FIELDS)}) AS m "
           f"FROM {reference(spark, tables.runs, runs_version, schema)})")
    swap = f"(SELECT max(run_id) FROM {log} WHERE m.swap.runs IS NOT NULL)"
    read = (f"CASE WHEN run_id = {swap} THEN transform_values(m.offsets, (k, v) -> named_struct('start', v.`end`, "
            f"'end', v.`end`)) ELSE m.offsets END")  # the swap reads nothing: the shadow's runs read its rows
    own = (f"SELECT run_id, CAST(m.started * 1000 AS BIGINT) AS {RUN_TIME}, {read} AS {RUN_OFFSETS} FROM {log} "
           f"WHERE run_id >= coalesce({swap}, 0)")
    shadow = (f"SELECT s.run_id - {_SHADOW_RUN_IDS} AS run_id, CAST(s.started * 1000 AS BIGINT) AS {RUN_TIME}, "
              f"s.offsets AS {RUN_OFFSETS} FROM (SELECT explode(m.swap.runs) AS s FROM {log} WHERE run_id = {swap})")
    return f"SELECT *, lead({RUN_TIME}) OVER (ORDER BY run_id) AS {NEXT_RUN_TIME} FROM ({own} UNION ALL {shadow})"


def _history(spark: SparkSession, spec: InputSpec, offsets: Mapping[str, Any]) -> str:
    """SQL for the input's changelog (`formats.changelog_sql`) as the model read it up to `offsets`
    (a manifest's). A change data feed is read from the table as the model first read it (when its
    run log did not record that: from the table's first version)."""
    feed = spec.changelog_format == "cdf"
    source = reference(spark, spec.location, offsets["end"], formats.history_schema(spec),
                       files="changes" if feed else "added", since=offsets.get("first") or 0 if feed else None)
    return formats.changelog_sql(spec, source)


def _no_versions(spec: InputSpec) -> str:
    typed = ", ".join(f"CAST(NULL AS {c.type}) AS {q(c.name)}" for c in spec.columns)
    return f"SELECT {typed}, CAST(NULL AS TIMESTAMP) AS {VALID_FROM}, CAST(NULL AS TIMESTAMP) AS {VALID_TO} WHERE false"


def run_versions_sql(spark: SparkSession, spec: InputSpec, offsets: Mapping[str, Any], runs: str) -> str:
    """SQL for a lookup join's dimension as each run read it: its rows at the version the run read to,
    valid from that run's time until the next run's (NULL: still valid)."""
    if offsets["end"] is None:
        return _no_versions(spec)
    columns = ", ".join(q(c) for c in spec.column_names)
    kind = q(formats.LOG_KIND)
    read = (f"SELECT e.*, r.{RUN_TIME}, r.{NEXT_RUN_TIME}, r.run_id AS `__run` FROM ({_history(spark, spec, offsets)}) e "
            f"JOIN ({runs}) r ON e.{q(formats.LOG_VERSION)} <= r.{RUN_OFFSETS}[{text(spec.name)}].`end`")
    if spec.changelog_format == "upsert":  # per run, each key's newest row unless deleted
        rows = f"SELECT * FROM ({_newest_per_run(spec, read)}) WHERE {kind} <> '-D'"
    else:  # per run, each row as many times as its changes add up to
        weight = f"SUM(CASE WHEN {kind} IN ('+I', '+U') THEN 1 ELSE -1 END)"
        rows = (f"SELECT * FROM (SELECT {columns}, {RUN_TIME}, {NEXT_RUN_TIME}, {weight} AS `__weight` FROM ({read}) "
                f"GROUP BY `__run`, {columns}, {RUN_TIME}, {NEXT_RUN_TIME}) "
                "LATERAL VIEW explode(array_repeat(1, CAST(`__weight` AS INT))) `__copies` AS `__copy`")
    return (f"SELECT {columns}, timestamp_millis({RUN_TIME}) AS {VALID_FROM}, timestamp_millis({NEXT_RUN_TIME}) AS "
            f"{VALID_TO} FROM ({rows})")


def processing_time_sql(spark: SparkSession, spec: InputSpec, offsets: Mapping[str, Any], runs: str,
                        read_time: bool = False) -> str:
    """SQL for the live rows of an input, each with the time of the run that read its insertion: as
    its processing-time column, and as `READ_TIME` too when `read_time`. A run's changes of a row
    count by their sum, and a retraction takes the row's latest live insertion, as a lookup join's
    state does (`operators.lookup`); an `upsert` input's row is live while it is its key's newest
    and was read when it last became so."""
    columns = ", ".join(q(c) for c in spec.column_names)
    if offsets["end"] is None:
        empty = snapshot_sql(spark, spec, None)
        return f"SELECT *, CAST(NULL AS TIMESTAMP) AS {q(READ_TIME)} FROM ({empty})" if read_time else empty
    read = f"r.{RUN_OFFSETS}[{text(spec.name)}]"
    version = f"e.{q(formats.LOG_VERSION)}"
    runs_read = (f"SELECT e.*, r.run_id AS `__run`, r.{RUN_TIME} FROM ({_history(spark, spec, offsets)}) e "
                 f"JOIN ({runs}) r ON {version} > coalesce({read}.`start`, -1) AND {version} <= {read}.`end`")
    kind = q(formats.LOG_KIND)
    if spec.changelog_format == "upsert":
        key = ", ".join(q(k) for k in spec.unique_key)
        by_key = f"PARTITION BY {key} ORDER BY `__run`"
        changed = (f"lag(named_struct('kind', {kind}, 'row', named_struct({_pairs(spec)}))) OVER ({by_key}) "
                   f"IS DISTINCT FROM named_struct('kind', {kind}, 'row', named_struct({_pairs(spec)}))")
        marked = (f"SELECT *, max(CASE WHEN {changed} THEN {RUN_TIME} END) OVER ({by_key} ROWS UNBOUNDED PRECEDING) "
                  f"AS `__since`, row_number() OVER (PARTITION BY {key} ORDER BY `__run` DESC) AS `__last` "
                  f"FROM ({_newest_per_run(spec, runs_read)})")
        live = f"SELECT {columns}, `__since` AS `__time` FROM ({marked}) WHERE `__last` = 1 AND {kind} <> '-D'"
    else:
        net = (f"SELECT {columns}, `__run`, {RUN_TIME}, SUM(CASE WHEN {kind} IN ('+I', '+U') THEN 1 ELSE -1 END) "
               f"AS `__n` FROM ({runs_read}) GROUP BY {columns}, `__run`, {RUN_TIME}")
        level = (f"SELECT *, SUM(`__n`) OVER (PARTITION BY {columns} ORDER BY `__run` ROWS UNBOUNDED PRECEDING) "
                 f"AS `__level` FROM ({net})")
        floor = (f"SELECT *, MIN(`__level`) OVER (PARTITION BY {columns} ORDER BY `__run` ROWS BETWEEN CURRENT ROW AND "
                 f"UNBOUNDED FOLLOWING) AS `__floor` FROM ({level})")
        # the run's insertions still live: those no later retraction reaches down to
        kept = "CAST(least(`__n`, greatest(0, `__floor` - (`__level` - `__n`))) AS INT)"
        live = (f"SELECT {columns}, {RUN_TIME} AS `__time` FROM ({floor}) "
                f"LATERAL VIEW explode(array_repeat(1, {kept})) `__copies` AS `__copy` WHERE `__n` > 0")
    times = [q(name) for name in (spec.proc_time, READ_TIME if read_time else None) if name]
    return f"SELECT {columns}, " + ", ".join(f"timestamp_millis(`__time`) AS {t}" for t in times) + f" FROM ({live})"


def _pairs(spec: InputSpec) -> str:
    """SQL: `named_struct`'s arguments for the input's declared columns."""
    return ", ".join(f"{text(c)}, {q(c)}" for c in spec.column_names)


def _newest_per_run(spec: InputSpec, rows: str) -> str:
    """SQL: of an `upsert` input's `rows` (with the run `__run` that read them), each key's newest per
    run (by its sequence column, then log order), as the run reads its key's row."""
    key = ", ".join(q(k) for k in spec.unique_key)
    order = (f"{q(spec.sequence_column)} DESC, " if spec.sequence_column else "") + f"{q(formats.LOG_ORDER)} DESC"
    return (f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY `__run`, {key} ORDER BY {order}) AS `__n` "
            f"FROM ({rows})) WHERE `__n` = 1")


def versions_sql(spark: SparkSession, spec: InputSpec, offsets: Mapping[str, Any], keys: Sequence[str]) -> str:
    """SQL for a versioned input's versions, as the model read its changelog up to `offsets` (a
    manifest's), each with the time it is valid from and to (NULL: still valid)."""
    columns = ", ".join(q(c) for c in spec.column_names)
    if offsets["end"] is None:
        return _no_versions(spec)
    time, key = f"CAST({q(spec.event_time or '')} AS TIMESTAMP)", ", ".join(keys)
    kind = q(formats.LOG_KIND)
    entries = (f"SELECT *, row_number() OVER (PARTITION BY {key}, {time} ORDER BY {q(formats.LOG_ORDER)} DESC) AS `__n` "
               f"FROM ({_history(spark, spec, offsets)}) "
               f"WHERE {kind} <> '-U' AND " + " AND ".join(f"({k}) IS NOT NULL" for k in keys))
    valid = (f"SELECT *, {time} AS {VALID_FROM}, lead({time}) OVER (PARTITION BY {key} ORDER BY {time}) AS {VALID_TO} "
             f"FROM ({entries}) WHERE `__n` = 1")
    return f"SELECT {columns}, {VALID_FROM}, {VALID_TO} FROM ({valid}) WHERE {kind} <> '-D'"


def input_sql(spark: SparkSession, spec: InputSpec, offsets: Mapping[str, Any], runs: str, timing: Timing) -> str:
    """SQL for an input's rows as the model's runs up to `offsets` (a manifest's) read them: its
    snapshot, with the time of the run that read each row where it declares a processing-time column
    or `timing` asks for `READ_TIME`."""
    if spec.proc_time or spec.name in timing.read_times:
        return processing_time_sql(spark, spec, offsets, runs, read_time=spec.name in timing.read_times)
    return snapshot_sql(spark, spec, offsets["end"])


def snapshot_sql(spark: SparkSession, spec: InputSpec, table_version: int | None) -> str:
    """SQL for an input's rows at a version of its table (None: no table yet, no rows), read as its format defines."""
    if table_version is None:
        typed = ", ".join(f"CAST(NULL AS {c.type}) AS {q(c.name)}" for c in spec.as_queried().columns)
        return f"SELECT {typed} WHERE false"
    upsert = spec.changelog_format == "upsert"
    schema = with_positions(formats.file_schema(spec)) if upsert else formats.file_schema(spec)  # upsert: by position
    rows = formats.snapshot_sql(spec, reference(spark, spec.location, table_version, schema,
                                                files="added" if upsert else "live"))
    if spec.proc_time:  # a snapshot's rows were read by no one run: no processing time (see `input_sql`)
        return f"SELECT *, CAST(NULL AS TIMESTAMP) AS {q(spec.proc_time)} FROM ({rows})"
    return rows


def late_rows_at(tables: ModelTables, late_version: int | None) -> bool:
    """Whether the model's late rows table holds rows at `late_version` (None: a version before the table)."""
    return late_version is not None and bool(delta_log.data_files(tables.late_rows, late_version))


def on_time_sql(spark: SparkSession, tables: ModelTables, plan: JoinPlan, snapshots: Mapping[str, str],
                late_version: int | None) -> dict[str, str]:
    """Each input's snapshot SQL minus the late rows (as of `late_version` of the late rows table)
    that the first interval join side reading it recorded (a row late on two sides is one row)."""
    if not late_rows_at(tables, late_version):
        return dict(snapshots)
    schema = from_arrow_schema(delta_log.table_schema(tables.late_rows, late_version))
    recorded = reference(spark, tables.late_rows, late_version, schema)
    first: dict[str, tuple[str, str]] = {}
    for join, side, name in late_sides(plan):
        first.setdefault(name, (join, side))
    out = dict(snapshots)
    for name, (join, side) in first.items():
        columns = ", ".join(f"{q(name)}.{q(c)} AS {q(c)}" for c in plan.inputs[name].column_names)
        late = (f"SELECT {columns} FROM {recorded} WHERE `_input` = {text(name)} "
                f"AND `_join` = {text(join)} AND `_side` = {text(side)}")
        out[name] = f"SELECT * FROM ({snapshots[name]}) EXCEPT ALL {late}"
    return out


def replace_relations(sql: str, relations: Mapping[str, str], replacements: Mapping[str, str],
                      timing: Timing | None = None, columns: Sequence[str] = ()) -> str:
    """The SQL with each input relation replaced by a subquery, keeping its alias (or name), and
    each time-based join decided as `timing` says (the result then keeps `columns`).

    The subqueries are Spark SQL that sqlglot need not parse (`WITH` options of a table reference)."""
    timing = timing or Timing()
    by_key = {table_key(exp.to_table(rel, dialect="spark")): name for name, rel in relations.items()}
    parseable, conditions = asof.parseable(windows.parseable(sql))
    tree = windows.to_spark(sqlglot.parse_one(parseable, read="spark"))
    matches = {id(j): asof.match_condition(j, conditions) for j in tree.find_all(exp.Join) if _is_asof(j)}
    texts = dict(replacements) | {f"versions:{a}": f"({s})" for a, s in timing.versions.items()}
    marks = {key: f"__streamjoin_input_{i}__" for i, key in enumerate(texts)}
    laterals: dict[str, str] = {}  # mark -> an ASOF join's LATERAL subquery

    def marked(mark: str, alias: str) -> exp.Subquery:
        return exp.Subquery(this=exp.select("*").from_(mark), alias=exp.TableAlias(this=exp.to_identifier(alias)))

    def swap(node: exp.Expression, kept: bool = True) -> exp.Expression:
        alias = node.alias_or_name if isinstance(node, (exp.Table, exp.Subquery)) else ""
        if kept and alias.lower() in timing.kept:
            inner = node.copy()
            inner.set("alias", None)
            inner = inner.transform(lambda n: swap(n, kept=False))
            rows = exp.select("*").from_(inner if isinstance(inner, exp.Subquery) else exp.Subquery(this=inner))
            return exp.Subquery(this=rows.where(timing.kept[alias.lower()], dialect="spark"),
                                alias=exp.TableAlias(this=exp.to_identifier(alias)))
        if isinstance(node, exp.Join) and _is_asof(node) and node.this.alias_or_name.lower() in timing.nearest:
            right = node.this.alias_or_name
            nearest = exp.select("*").from_(node.this.copy().transform(lambda n: swap(n, kept=False)))
            for condition in (node.args.get("on"), matches.get(id(node))):
                if condition is not None:
                    nearest = nearest.where(condition.copy())
            mark = f"__streamjoin_lateral_{len(laterals)}__"
            laterals[mark] = nearest.order_by(*timing.nearest[right.lower()], dialect="spark").limit(1).sql("spark")
            out = node.copy()
            out.set("method", None)
            out.set("this", marked(mark, right))
            out.set("on", exp.true())
            return out
        if isinstance(node, exp.Join) and isinstance(node.this, exp.Table) and node.this.args.get("version") \
                and node.this.alias_or_name.lower() in timing.versions:
            key = f"versions:{node.this.alias_or_name.lower()}"
            return _versioned_join(node, marked(marks[key], node.this.alias_or_name),
                                   timing.emitted.get(node.this.alias_or_name.lower(), []))
        if isinstance(node, exp.Table) and table_key(node) in by_key:
            return marked(marks[by_key[table_key(node)]], alias)
        return node

    out = tree.transform(swap, copy=False)
    if timing.versions and columns:
        out = exp.select(*[exp.column(c, quoted=True) for c in columns]).from_(exp.Subquery(this=out))
    rendered = out.sql(dialect="spark")
    for mark, lateral in laterals.items():
        rendered = rendered.replace(f"(SELECT * FROM {mark})", f"LATERAL ({lateral})")
    for key, mark in marks.items():
        rendered = rendered.replace(f"SELECT * FROM {mark}", texts[key].strip().removeprefix("(").removesuffix(")"))
    return rendered


def _is_asof(join: exp.Join) -> bool:
    return str(join.args.get("method") or "").upper() == "ASOF"


def _versioned_join(join: exp.Join, versions: exp.Subquery, emitted: Sequence[str] = ()) -> exp.Join:
    """A temporal join as a plain join with the versions valid at the probe's time (a lookup after a
    join: when the join emitted the row, the greatest of `emitted`)."""
    time = join.this.args["version"].expression
    if emitted:
        time = exp.Greatest(this=sqlglot.parse_one(emitted[0], read="spark"),
                            expressions=[sqlglot.parse_one(t, read="spark") for t in emitted[1:]])
    alias = exp.to_identifier(join.this.alias_or_name)
    frm, to = (exp.column(c, table=alias.copy()) for c in (VALID_FROM, VALID_TO))
    at = exp.cast(time.copy(), "timestamp")
    valid = exp.and_(exp.LTE(this=frm, expression=at), exp.or_(exp.Is(this=to, expression=exp.Null()),
                                                                exp.LT(this=at.copy(), expression=to.copy())))
    out = join.copy()
    out.set("this", versions)
    out.set("on", exp.and_(exp.paren(join.args["on"].copy()), valid) if join.args.get("on") else valid)
    return out
