"""The join plan: what the compiler makes of a model's SQL and what the runtime executes.

Expressions are Spark SQL text over *internal column names* (`<alias>__<column>`), so that
every node's rows carry unique, readable column names and the generated code shows them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace, field
from datetime import timedelta
from typing import Collection, Mapping, Union

from ..spec import InputSpec, ModelConfig
from ..types import JoinType, Side, duration_text, q


def internal_name(alias: str, column: str) -> str:
    """The name a column of an input carries inside the plan.

    >>> internal_name("o", "order_id")
    'o__order_id'
    """
    return f"{alias}__{column}"


def as_written(sql: str) -> str:
    """Spark SQL over internal names with each quoted internal name as a model writes it.

    >>> as_written("`t__ts` >= `q__ts`")
    't.ts >= q.ts'
    """
    return re.sub(r"`([^`]+?)__([^`]+)`", r"\1.\2", sql)


@dataclass(frozen=True)
class Windowing:
    """A window table function over an input (Flink's TUMBLE, HOP and CUMULATE): the windows a
    row belongs to, by its event time `time` (the input's own column name). Times in microseconds;
    `step` is HOP's slide and CUMULATE's step (the size for TUMBLE).

    >>> w = Windowing("HOP", "ts", size=600_000_000, step=300_000_000)
    >>> str(w)
    'HOP(ts, size 600s, slide 300s)'
    """

    kind: str
    time: str
    size: int
    step: int
    offset: int = 0

    COLUMNS = ("window_start", "window_end", "window_time")  # what the function adds to each row

    def __str__(self) -> str:
        step = {"HOP": f", slide {self.step / 1e6:g}s", "CUMULATE": f", step {self.step / 1e6:g}s"}.get(self.kind, "")
        offset = f", offset {self.offset / 1e6:g}s" if self.offset else ""
        return f"{self.kind}({self.time}, size {self.size / 1e6:g}s{step}{offset})"

    def columns_sql(self, window: str) -> dict[str, str]:
        """Spark SQL for each column the function adds, given `window`: one of `windows_sql()`'s
        elements (window_time is the end minus 1 ms, as Flink's)."""
        return dict(zip(self.COLUMNS, (f"timestamp_micros({window}.`start`)", f"timestamp_micros({window}.`end`)",
                                       f"timestamp_micros({window}.`end` - 1000)")))

    def windows_sql(self) -> str:
        """Spark SQL over the input's columns: the row's windows, an array of struct<start, end>
        (microseconds since the epoch)."""
        t = f"unix_micros({q(self.time)})"
        first = f"({t} - pmod({t} - {self.offset}, {self.step if self.kind == 'HOP' else self.size}))"
        if self.kind == "TUMBLE":
            return f"array(named_struct('start', {first}, 'end', {first} + {self.size}))"
        if self.kind == "HOP":  # the latest window starting at or before t, and those before it that still hold t
            starts = f"transform(sequence(0, {-(-self.size // self.step) - 1}), i -> {first} - i * {self.step})"
            return (f"transform(filter({starts}, s -> s + {self.size} > {t}), "
                    f"s -> named_struct('start', s, 'end', s + {self.size}))")
        ends = f"transform(sequence(1, {self.size // self.step}), i -> {first} + i * {self.step})"  # CUMULATE
        return f"transform(filter({ends}, e -> e > {t}), e -> named_struct('start', {first}, 'end', e))"


@dataclass(frozen=True)
class Windows:
    """The window columns of a scan: from a window table function (`tvf`, computed before the
    scan's own columns) or from Spark's `window()` in a derived table. A join equating the
    windows of two scans with the same `spec` is a window join."""

    spec: str  # how rows are assigned to windows; equal on both sides of a window join
    parts: tuple[tuple[str, str], ...]  # (internal column, "start" | "end" | "time" | "window")
    tvf: Windowing | None = None

    def column(self, part: str) -> str | None:
        return next((c for c, p in self.parts if p == part), None)

    @property
    def assignment(self) -> str:
        """How a row is assigned to windows by its time, whichever column holds the time (each side of a
        window join windows by its own event time, as in Flink)."""
        if self.tvf is not None:
            return str(replace(self.tvf, time="time"))
        return "window(time," + self.spec.partition(",")[2]  # Spark's window(<time>, <durations>)


@dataclass(frozen=True)
class Scan:
    """A leaf: one input's changes, renamed to internal names and filtered by pushed-down predicates.

    A derived table (`(SELECT f(a) AS x, b FROM t WHERE ...) AS d`) is a scan whose columns are
    computed: `sources` holds each column's Spark SQL over the input's own columns, and
    `source_filters` its WHERE, applied before the columns are computed."""

    input: str
    alias: str
    columns: tuple[tuple[str, str], ...]  # (column name, internal name)
    filters: tuple[str, ...] = ()  # over internal names
    sources: tuple[str, ...] = ()  # a derived table's column expressions, over the input's columns
    source_filters: tuple[str, ...] = ()  # a derived table's WHERE, over the input's columns
    windows: Windows | None = None  # window columns (a window table function, or Spark's window())
    proc_time: str | None = None  # a processing-time column the scan adds (the run's time)

    @property
    def derived(self) -> bool:
        """True when the scan's rows are not the input's rows as declared (computed columns, or a
        window table function: a row in several windows)."""
        return bool(self.sources) or (self.windows is not None and self.windows.tvf is not None)

    @property
    def column_sources(self) -> tuple[str, ...]:
        """Spark SQL over the input's columns for each column of the scan."""
        return self.sources or tuple(q(name) for name, _ in self.columns)

    @property
    def id(self) -> str:
        return self.alias

    @property
    def output_columns(self) -> tuple[str, ...]:
        return tuple(internal for _, internal in self.columns)

    @property
    def aliases(self) -> frozenset[str]:
        return frozenset({self.alias})


@dataclass(frozen=True)
class EquiKey:
    """One equality of a join condition: `left = right` (or `left <=> right` when null_safe)."""

    left: str
    right: str
    null_safe: bool = False


#: The key of a join without an equality between its sides (a theta or cross join): one constant,
#: so every row of a side is in one key group and joins every row of the other side's state, as
#: Flink runs such a join (its operator at parallelism 1). A run that changes either side reads the
#: other side's whole state.
SINGLE_GROUP_KEY = EquiKey("0", "0")


def key_text(keys: tuple[EquiKey, ...]) -> str:
    """A join's equalities as SQL over internal names, AND-ed; empty for `SINGLE_GROUP_KEY` (none)."""
    return " AND ".join(f"{k.left} {'<=>' if k.null_safe else '='} {k.right}" for k in keys if k != SINGLE_GROUP_KEY)


@dataclass(frozen=True)
class TimeBound:
    """An interval join's time condition: left_time - right_time lies in [lower, upper].

    `lower`/`upper` are None when unbounded; `*_strict` marks `<`/`>` rather than `<=`/`>=`.
    """

    left_time: str
    right_time: str
    lower: timedelta | None
    upper: timedelta | None
    lower_strict: bool = False
    upper_strict: bool = False

    @property
    def empty(self) -> bool:
        """True when no pair of times satisfies the bound (`BETWEEN r + 5s AND r + 1s`): then no
        row can ever match, and Flink pads each outer row as it arrives and keeps no state."""
        if self.lower is None or self.upper is None:
            return False
        tick = timedelta(microseconds=1)  # event times are microseconds: `> x` is `>= x + 1us`
        return self.lower + tick * self.lower_strict > self.upper - tick * self.upper_strict

    def output_delay(self, allowed_lateness: timedelta) -> timedelta:
        """How far the watermark an interval join forwards trails its own: the longest a row waits in
        state for a partner beyond the watermark (max(-lower, upper), at least 0) plus the allowed
        lateness, as Flink's interval join holds it back (`getMaxOutputDelay`), so a join of its rows
        never finds them late."""
        return max(timedelta(0), -(self.lower or timedelta(0)), self.upper or timedelta(0)) + allowed_lateness

    def __str__(self) -> str:
        """`l - r in [lower, upper]` over the internal names, e.g. `` `l__ts` - `r__ts` in [-4s, 0s] ``."""
        lower = "-inf" if self.lower is None else duration_text(self.lower)
        upper = "+inf" if self.upper is None else duration_text(self.upper)
        return (f"{q(self.left_time)} - {q(self.right_time)} in {'(' if self.lower_strict else '['}{lower}, "
                f"{upper}{')' if self.upper_strict else ']'}")


@dataclass(frozen=True)
class TemporalSpec:
    """An event-time temporal join's times: the left (probe) side's event time, `FOR SYSTEM_TIME AS
    OF` it, selects the right (versioned) side's version by the right side's event time."""

    probe_time: str  # internal name (unquoted) of the probe's event time (or processing time) column
    version_time: str | None  # internal name (unquoted) of the versioned side's event time column
    processing_time: bool = False  # a lookup join: AS OF the probe's processing time

    def __str__(self) -> str:
        if self.processing_time:
            return f"FOR SYSTEM_TIME AS OF {self.probe_time} (processing time: the dimension as each run leaves it)"
        return f"FOR SYSTEM_TIME AS OF {self.probe_time} (versions by {self.version_time})"


@dataclass(frozen=True)
class WindowJoinSpec:
    """A window join's windows: rows join only rows of the same window (and key), once the
    watermark passes the window's end. `*_end` are Spark SQL over internal names."""

    spec: str
    left_end: str
    right_end: str

    def __str__(self) -> str:
        return f"per window {self.spec}, fired at its end"


@dataclass(frozen=True)
class AsofSpec:
    """An ASOF join's match condition, `left_time <op> right_time` (Spark SQL over internal names):
    each left row takes the one right row of its key nearest in time that satisfies it."""

    left_time: str
    op: str  # ">=", ">", "<=" or "<"
    right_time: str

    @property
    def latest(self) -> bool:
        """True when the nearest row is the latest one (>=, >), False for the earliest (<=, <)."""
        return self.op.startswith(">")

    def __str__(self) -> str:
        return f"MATCH_CONDITION({self.left_time} {self.op} {self.right_time})"


@dataclass(frozen=True)
class Join:
    """A binary join node with its own state for each of its two inputs."""

    id: str
    join_type: JoinType
    left: "Node"
    right: "Node"
    keys: tuple[EquiKey, ...]
    residual: str | None = None
    null_aware: bool = False  # NOT IN semantics for a single-key anti join
    time_bound: TimeBound | None = None  # set for interval joins
    temporal: TemporalSpec | None = None  # set for event-time temporal joins (right side: the versions)
    window: WindowJoinSpec | None = None  # set for window joins
    asof: AsofSpec | None = None  # set for ASOF joins

    @property
    def kind(self) -> str:
        """The join's kind as the outline names it, e.g. `left event-time temporal` (an interval
        join's is its join type: the outline shows its bound; the text is part of the plan's
        fingerprint, so it stays as it is)."""
        kind = f"{self.join_type.value}{' null-aware' if self.null_aware else ''}"
        if self.temporal:
            kind += " lookup" if self.temporal.processing_time else " event-time temporal"
        return kind + (" window" if self.window else "") + (" asof" if self.asof else "")

    @property
    def single_group(self) -> bool:
        """Whether the join has no equality between its sides and so runs in one key group (`SINGLE_GROUP_KEY`)."""
        return self.keys == (SINGLE_GROUP_KEY,)

    @property
    def time_based(self) -> bool:
        """Whether the join waits for the watermark (interval, event-time temporal and window joins)."""
        return bool(self.time_bound or self.window or (self.temporal and not self.temporal.processing_time))

    @property
    def unpadded_sides(self) -> tuple["Node", ...]:
        """The sides whose columns every output row carries as they are, never NULL-padded."""
        return ((self.left,) if not self.join_type.preserves(Side.RIGHT) else ()) + (
            (self.right,) if self.join_type.emits_pairs and not self.join_type.preserves(Side.LEFT) else ())

    @property
    def output_columns(self) -> tuple[str, ...]:
        if self.join_type.emits_pairs:
            return self.left.output_columns + self.right.output_columns
        return self.left.output_columns

    @property
    def aliases(self) -> frozenset[str]:
        return self.left.aliases | self.right.aliases


@dataclass(frozen=True)
class MultiJoin:
    """An N-way join of inputs sharing one (possibly composite) key, with no intermediate state.

    `inputs[0]` is the first input; `join_types[i]` (INNER or LEFT) joins `inputs[i]` to the
    rows built so far on `conditions[i]` (its whole ON condition; None for input 0), and
    `keys[i]` is input i's expressions of the common key, one per key position.
    """

    id: str
    inputs: tuple[Scan, ...]
    join_types: tuple[JoinType | None, ...]
    keys: tuple[tuple[str, ...], ...]
    conditions: tuple[str | None, ...]

    @property
    def output_columns(self) -> tuple[str, ...]:
        return tuple(c for scan in self.inputs for c in scan.output_columns)

    @property
    def aliases(self) -> frozenset[str]:
        return frozenset(s.alias for s in self.inputs)


Node = Union[Scan, Join, MultiJoin]


def scans(node: Node) -> list[Scan]:
    """The input scans below `node`, left to right."""
    if isinstance(node, Scan):
        return [node]
    if isinstance(node, Join):
        return scans(node.left) + scans(node.right)
    return list(node.inputs)


def subtree(node: Node) -> list[Node]:
    """`node` and every node below it, children before parents."""
    if isinstance(node, Join):
        return subtree(node.left) + subtree(node.right) + [node]
    if isinstance(node, MultiJoin):
        return [*node.inputs, node]
    return [node]


def pads(node: Node) -> bool:
    """Whether a join may emit a row it retracts later though its inputs only insert: a regular join
    that preserves unmatched rows (padded until a match arrives) or, ASOF, changes its choice. A join
    with time pads a row once, for good: an interval or window join when no match can come any more,
    a temporal or lookup join when it emits its probe."""
    if isinstance(node, Join):
        timed = node.time_bound or node.window or node.temporal
        return node.asof is not None or (not timed and any(node.join_type.preserves(s) for s in Side))
    return isinstance(node, MultiJoin) and any(t not in (None, JoinType.INNER) for t in node.join_types)


def inserts_only(node: Node, inputs: Collection[str]) -> bool:
    """Whether `node`'s change this run can hold no retraction when the inputs in `inputs` only insert
    this run: every input below it is one, and no join below it `pads`. A temporal join's change is
    its probes' (its versioned side's changes retract nothing it emitted). An event-time one may emit
    a probe's retraction runs after it read it, but then together with the insertion it retracts,
    which waited as long: the two cancel. The run that reads a retraction of a row never inserted
    fails, or under on_missing_retraction='ignore' drops it (`operators.temporal`)."""
    if isinstance(node, Scan):
        return node.input in inputs
    if isinstance(node, Join) and node.temporal:
        return inserts_only(node.left, inputs)
    children = (node.left, node.right) if isinstance(node, Join) else node.inputs
    return not pads(node) and all(inserts_only(c, inputs) for c in children)


def keeps_emitted(specs: Mapping[str, InputSpec], node: Join) -> bool:
    """Whether a lookup join `node` keeps the rows it emitted, to retract exactly them: its probe side
    may retract in some run (`inserts_only` of the inputs declared `append` says it may)."""
    appending = {name for name, spec in specs.items() if spec.changelog_format == "append"}
    return bool(node.temporal and node.temporal.processing_time) and not inserts_only(node.left, appending)


@dataclass(frozen=True)
class OutputColumn:
    name: str
    expr: str


@dataclass(frozen=True)
class JoinPlan:
    """A compiled model: the join tree, post-join filters and the output projection."""

    model: str
    sql: str
    inputs: dict[str, InputSpec]
    config: ModelConfig
    root: Node
    filters: tuple[str, ...]
    outputs: tuple[OutputColumn, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.outputs]

    @property
    def watermark_inputs(self) -> list[str]:
        """The inputs the model's one watermark is made of (FORMAT.md): every one declaring an event_time."""
        return sorted(name for name, spec in self.inputs.items() if spec.event_time is not None)

    def nodes(self) -> list[Node]:
        """Every node, children before parents."""
        return subtree(self.root)

    def unique_key(self, node: Node) -> tuple[str, ...]:
        """The declared unique key of a join's input `node`: a plain scan's input's; none for a
        derived table (its computed columns need not keep it) or a join."""
        if isinstance(node, Scan) and not node.derived:
            return self.inputs[node.input].unique_key
        return ()

    @property
    def is_interval(self) -> bool:
        return any(isinstance(n, Join) and n.time_bound is not None for n in self.nodes())

    def binary_only(self) -> str | None:
        """The kind of join that keeps the model's joins binary (no multi-way operator runs it), if any."""
        for n in self.nodes():
            if isinstance(n, Join) and n.temporal is not None:
                return "a lookup join" if n.temporal.processing_time else \
                    "an event-time temporal join (FOR SYSTEM_TIME AS OF)"
            if isinstance(n, Join) and n.window is not None:
                return "a window join"
            if isinstance(n, Join) and n.asof is not None:
                return "an ASOF join"
        return None

    def explain(self) -> str:
        """A readable outline of the plan, used in the generated code and the run log."""
        return "\n".join([*self._tree_lines(), *self.projection_lines(), *(f"  note: {n}" for n in self.notes)])

    def projection_lines(self) -> list[str]:
        """The outline's lines of what the model does with its last join's rows: the filters that
        apply after it and the output columns. Its state does not depend on them."""
        lines = [f"  filter {conjunction(self.filters)}"] if self.filters else []
        return lines + ["  select " + ", ".join(f"{o.expr} AS {o.name}" for o in self.outputs)]

    def state_outline(self) -> str:
        """What the model's state depends on: the outline without its projection, plus the columns
        each input keeps (the state holds them). The residual condition of a last join that is a
        regular inner join is a filter of its pairs: its state does not depend on it either."""
        kept = [f"  columns of {s.alias}: {', '.join(name for name, _ in s.columns)}"
                for s in self.nodes() if isinstance(s, Scan)]
        return "\n".join([*self._tree_lines(state=True), *kept, *(f"  note: {n}" for n in self.notes)])

    def _tree_lines(self, *, state: bool = False) -> list[str]:
        lines = [f"model {self.model}"]

        def walk(node: Node, depth: int) -> None:
            pad = "  " * depth
            if isinstance(node, Scan):
                filt = _where(node.filters)
                source = f"TABLE({node.windows.tvf})" if node.windows and node.windows.tvf else node.input
                if node.sources:
                    computed = ", ".join(f"{src} AS {q(name)}" for src, (name, _) in zip(node.sources, node.columns))
                    lines.append(f"{pad}scan (SELECT {computed} FROM {source}{_where(node.source_filters)}) "
                                 f"AS {node.alias}{filt}")
                elif source != node.input:
                    lines.append(f"{pad}scan {source} OF {node.input} AS {node.alias}{filt}")
                else:
                    lines.append(f"{pad}scan {node.input} AS {node.alias}{filt}")
            elif isinstance(node, Join):
                keys = key_text(node.keys) if not node.single_group else "no equality (one key group),"
                filters_pairs = state and node is self.root and node.kind == "inner" and node.time_bound is None
                extra = f" residual {node.residual}" if node.residual and not filters_pairs else ""
                if node.time_bound:
                    extra += f" interval {node.time_bound}"
                if node.temporal:
                    extra += f" {node.temporal}"
                if keeps_emitted(self.inputs, node):
                    extra += ", keeping the rows it emitted (its probe side may retract)"
                if node.window:
                    extra += f" {node.window}"
                if node.asof:
                    extra += f" {node.asof}"
                lines.append(f"{pad}{node.kind} join {node.id} ON {keys}{extra}")
                walk(node.left, depth + 1)
                walk(node.right, depth + 1)
            else:
                key = " = ".join("(" + ", ".join(k) + ")" for k in node.keys)
                lines.append(f"{pad}multi-way join {node.id} on common key {key}")
                for scan, jt, cond in zip(node.inputs, node.join_types, node.conditions):
                    lines.append(f"{pad}  {jt.value + ' ON ' + cond if jt else 'first'}:")
                    walk(scan, depth + 2)

        walk(self.root, 1)
        return lines


def _where(predicates: tuple[str, ...]) -> str:
    """` WHERE p AND q` for an outline, or nothing."""
    return f" WHERE {conjunction(predicates)}" if predicates else ""


def conjunction(predicates: tuple[str, ...]) -> str:
    """Predicates AND-ed for an outline, each holding an OR in parentheses (the outline, and so the
    plan's fingerprint, must tell `(a OR b) AND c` from `a OR (b AND c)`).

    >>> conjunction(("a = 1 OR b = 2", "c = 3")), conjunction(("a = 1 OR b = 2",))
    ('(a = 1 OR b = 2) AND c = 3', 'a = 1 OR b = 2')
    """
    if len(predicates) < 2:
        return " AND ".join(predicates)
    return " AND ".join(f"({p})" if " OR " in p.upper() else p for p in predicates)
