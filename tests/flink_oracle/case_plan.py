"""Plan how one conformance case is fed to Flink, without touching Flink.

The plan is plain data: the Flink SQL type of every input column, one changelog of
all inputs' changes in the case's order (every value carried as text, cast to its
type inside Flink), the watermark each row carries, and the Flink options the case's
``config`` maps to. ``run_cases.py`` turns a plan into a Flink job; keeping the plan
free of PyFlink lets it be read and tested from any interpreter.

How the changes reach Flink. Every input's changes travel in ONE source, in run order
(within a run: input by input, each in arrival order), tagged with the input's name;
each input is a view that filters its tag and casts the text columns back to their
declared types. One source keeps the inputs' relative order as close to the case's as
Flink allows and gives every input the same watermark.

Watermarks. The source declares one rowtime column (the row's event time, or a
constant for inputs without one) and a per-row watermark expression that reads the
``__wm`` column. ``__wm`` is NULL on every row except the last row of a run, where
it holds the watermark FORMAT.md defines after that run::

    W_k = max(W_(k-1), min over event-time inputs of (max event time seen - delay))

(undefined while some event-time input has seen no row). Flink's watermark assigner
emits a watermark right after the row that raises it, so W_k reaches the join after
all of run k's rows and before run k+1's. See README.md for where Flink still differs.

>>> plan = plan_case({"name": "c", "inputs": {"t": {"columns": [["x", "int"]]}},
...                   "sql": "SELECT x FROM t", "runs": [{"changes": {"t": [["+I", [1]]]}}]})
>>> plan.source_rows
(SourceRow(kind='+I', tag='t', values=('1',), event_time='1970-01-01 00:00:00', watermark=None, heartbeat=False),)
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Literal

RowKindCode = Literal["+I", "-U", "+U", "-D"]
ROW_KINDS: tuple[RowKindCode, ...] = ("+I", "-U", "+U", "-D")

# Rowtime attributes are TIMESTAMP(3) in Flink: event times are truncated to ms.
ROWTIME_TYPE = "TIMESTAMP(3)"
NO_EVENT_TIME = "1970-01-01 00:00:00"

_SIMPLE_TYPES = {
    "int": "INT",
    "integer": "INT",
    "bigint": "BIGINT",
    "long": "BIGINT",
    "smallint": "SMALLINT",
    "tinyint": "TINYINT",
    "string": "STRING",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP(6)",
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.IGNORECASE)
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$", re.IGNORECASE)
_UNIT_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


class CasePlanError(ValueError):
    """Raised when a case cannot be expressed as a Flink job; lists every problem."""


@dataclass(frozen=True)
class InputPlan:
    """One input of the case as Flink will see it."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (column, Flink SQL type)
    event_time: str | None
    delay_ms: int
    unique_key: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceRow:
    """One change of one input, as text, in the order Flink reads it."""

    kind: RowKindCode
    tag: str
    values: tuple[str | None, ...]
    event_time: str  # the rowtime of the shared source (a constant for inputs without one)
    watermark: str | None  # the watermark to emit after this row, or None
    heartbeat: bool = False  # a row that only carries a watermark (per-input sources), not data


@dataclass(frozen=True)
class CasePlan:
    """Everything the Flink job of one case needs, as plain data."""

    name: str
    sql: str
    inputs: tuple[InputPlan, ...]
    source_rows: tuple[SourceRow, ...]
    width: int  # number of value columns in the shared source
    has_event_time: bool
    insert_only: bool
    options: tuple[tuple[str, str], ...]  # Flink configuration derived from `config`
    notes: tuple[str, ...]  # config keys with no Flink counterpart, and similar
    versioned: tuple[str, ...] = ()  # inputs read FOR SYSTEM_TIME AS OF: one source per input (see below)


def flink_type(spark_type: str) -> str:
    """Map a FORMAT.md column type to its Flink SQL type.

    >>> flink_type("decimal(10, 2)"), flink_type("timestamp")
    ('DECIMAL(10, 2)', 'TIMESTAMP(6)')
    """
    t = spark_type.strip().lower()
    if t in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[t]
    m = _DECIMAL.match(t)
    if m:
        return f"DECIMAL({m.group(1)}, {m.group(2)})"
    raise CasePlanError(f"unsupported column type {spark_type!r}; use one FORMAT.md lists")


def delay_ms(text: str) -> int:
    """Parse a FORMAT.md watermark delay into milliseconds.

    >>> delay_ms("0 seconds"), delay_ms("2 hours"), delay_ms("1 millisecond")
    (0, 7200000, 1)
    """
    m = _DELAY.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNIT_MS:
        raise CasePlanError(f"watermark_delay {text!r} is not '<number> <unit>' with a FORMAT.md unit")
    return round(float(m.group(1)) * _UNIT_MS[unit])


def to_text(value: Any) -> str | None:
    """Encode one JSON value as the text Flink casts back to the column type.

    >>> to_text(True), to_text(0.1), to_text(None), to_text("12.50")
    ('true', '0.1', None, '12.50')
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    raise CasePlanError(f"value {value!r} is not a FORMAT.md JSON value")


def parse_timestamp(text: str) -> dt.datetime:
    """Parse a FORMAT.md timestamp ('YYYY-MM-DD HH:MM:SS[.f...]')."""
    return dt.datetime.fromisoformat(text.strip().replace("T", " "))


def format_timestamp(value: dt.datetime) -> str:
    """Format a timestamp the way FORMAT.md writes it (microseconds only when non-zero)."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{value.microsecond:06d}" if value.microsecond else text


def _truncate_ms(value: dt.datetime) -> dt.datetime:
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _flink_options(config: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    options: list[tuple[str, str]] = []
    notes: list[str] = []
    for key, value in sorted(config.items()):
        if key == "join_strategy":
            # Flink's StreamingMultiJoinOperator is the counterpart of the `multi` strategy.
            if value == "multi":
                options.append(("table.optimizer.multi-join.enabled", "true"))
        else:
            notes.append(f"config {key}={value!r} has no Flink counterpart here and is ignored")
    return tuple(options), tuple(notes)


def plan_case(case: dict[str, Any]) -> CasePlan:
    """Build the plan of one case; raises CasePlanError listing every problem."""
    problems: list[str] = []
    name = str(case.get("name", "<unnamed>"))
    inputs: list[InputPlan] = []
    for input_name, spec in (case.get("inputs") or {}).items():
        columns = []
        for column, spark_type in spec.get("columns", []):
            try:
                columns.append((column, flink_type(spark_type)))
            except CasePlanError as e:
                problems.append(f"input {input_name}.{column}: {e}")
        event_time = spec.get("event_time")
        if event_time is not None and event_time not in [c for c, _ in columns]:
            problems.append(f"input {input_name}: event_time {event_time!r} is not one of its columns")
        try:
            delay = delay_ms(spec.get("watermark_delay", "0 seconds"))
        except CasePlanError as e:
            problems.append(f"input {input_name}: {e}")
            delay = 0
        key = spec.get("unique_key") or ()
        inputs.append(InputPlan(input_name, tuple(columns), event_time, delay, (key,) if isinstance(key, str) else tuple(key)))
    if not inputs:
        problems.append("the case has no inputs")
    if not isinstance(case.get("sql"), str):
        problems.append("the case has no sql string")
    by_name = {i.name: i for i in inputs}

    rows: list[SourceRow] = []
    max_seen: dict[str, dt.datetime] = {}
    watermark: dt.datetime | None = None
    event_inputs = [i for i in inputs if i.event_time is not None]
    notes: list[str] = []
    versioned = versioned_inputs(case.get("sql") or "", [i.name for i in inputs])
    for run_no, run in enumerate(case.get("runs") or []):
        if "expect_error" in run:
            # The run must fail and change nothing, so Flink never sees its changes.
            notes.append(f"run {run_no} expects an error; its changes are not fed to Flink")
            continue
        first_of_run = len(rows)
        for input_name, changes in (run.get("changes") or {}).items():
            spec = by_name.get(input_name)
            if spec is None:
                problems.append(f"run {run_no}: changes for unknown input {input_name!r}")
                continue
            for kind, values in changes:
                if kind not in ROW_KINDS or len(values) != len(spec.columns):
                    problems.append(
                        f"run {run_no}, input {input_name}: change {[kind, values]!r} is not "
                        f"[one of {ROW_KINDS}, {len(spec.columns)} values]"
                    )
                    continue
                try:
                    texts = tuple(to_text(v) for v in values)
                except CasePlanError as e:
                    problems.append(f"run {run_no}, input {input_name}: {e}")
                    continue
                event_text = NO_EVENT_TIME
                if spec.event_time is not None:
                    raw = values[[c for c, _ in spec.columns].index(spec.event_time)]
                    if not isinstance(raw, str):
                        problems.append(f"run {run_no}, input {input_name}: event time {raw!r} is not a timestamp")
                        continue
                    event = _truncate_ms(parse_timestamp(raw))
                    event_text = format_timestamp(event)
                    if input_name not in max_seen or event > max_seen[input_name]:
                        max_seen[input_name] = event
                rows.append(SourceRow(kind, input_name, texts, event_text, None))
        if event_inputs and len(rows) > first_of_run and all(i.name in max_seen for i in event_inputs):
            candidate = min(max_seen[i.name] - dt.timedelta(milliseconds=i.delay_ms) for i in event_inputs)
            if watermark is None or candidate > watermark:
                watermark = candidate
                if versioned:  # one source per input: each carries the watermark on a row of its own
                    rows.extend(_heartbeat(i, format_timestamp(watermark)) for i in inputs)
                else:
                    rows[-1] = SourceRow(rows[-1].kind, rows[-1].tag, rows[-1].values, rows[-1].event_time,
                                         format_timestamp(watermark))
    options, config_notes = _flink_options(case.get("config") or {})
    if problems:
        raise CasePlanError(f"case {name}: " + "; ".join(problems))
    width = max((len(i.columns) for i in inputs), default=0)
    return CasePlan(
        name=name,
        sql=case["sql"],
        inputs=tuple(inputs),
        source_rows=tuple(rows),
        width=width,
        has_event_time=bool(event_inputs),
        insert_only=all(r.kind == "+I" for r in rows),
        options=options,
        notes=(*config_notes, *notes),
        versioned=versioned,
    )


_SYSTEM_TIME = re.compile(r"`?(\w+)`?\s+FOR\s+SYSTEM_TIME\s+AS\s+OF", re.IGNORECASE)
#: Key values of heartbeat rows of a versioned input: a key no probe row has.
HEARTBEAT_KEYS = {"INT": "-2147483648", "BIGINT": "-9223372036854775808", "STRING": "__streamjoin_heartbeat__"}


def versioned_inputs(sql: str, names: list[str]) -> tuple[str, ...]:
    """The inputs an event-time temporal join reads FOR SYSTEM_TIME AS OF.

    Flink needs such an input to be a table with a primary key and a rowtime, and forbids a filter
    between it and the join; so a case with one gets one changelog source per input (the versioned
    ones declaring their `unique_key` as primary key), and each run's watermark reaches every source
    on a heartbeat row: filtered out of a probe input, a version of a key no probe has on a
    versioned one.

    >>> versioned_inputs("SELECT * FROM o JOIN rates FOR SYSTEM_TIME AS OF o.t AS r ON o.c = r.c", ["o", "rates"])
    ('rates',)
    """
    found = {m.group(1).lower() for m in _SYSTEM_TIME.finditer(sql)}
    return tuple(n for n in names if n.lower() in found)


def _heartbeat(spec: InputPlan, watermark: str) -> SourceRow:
    values = []
    for column, flink_type in spec.columns:
        if column == spec.event_time:
            values.append(watermark)
        elif column in spec.unique_key:
            values.append(HEARTBEAT_KEYS.get(flink_type))
        else:
            values.append(None)
    return SourceRow("+I", spec.name, tuple(values), watermark, watermark, heartbeat=True)
