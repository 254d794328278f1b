"""Window joins: Flink's window table functions, Spark's `window()`, and the joins that equate them.

Flink's form reads an input through a window table function and joins on the windows:

    FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '5' MINUTES)) L
    JOIN TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' MINUTES)) R
      ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end

(TUMBLE(size), HOP(slide, size), CUMULATE(step, size), each with an optional offset, which may
be negative; arguments by position or by Flink's names, `DATA => TABLE l, TIMECOL => ...`; the
function may also stand in a derived table). It adds `window_start`, `window_end` and
`window_time` (the end minus 1 ms) to each row, one row per window the row belongs to. Spark's
form is a derived table that adds `window(ts, '5 minutes'[, slide])` (or its `.start`/`.end`)
and a join on those columns. A join of two windowed scans with the same windows that equates
both window bounds (or the whole window) is a window join; the time must be each input's
event time, and both inputs append-only, as in Flink. So is a join of a window join's rows with a
windowed scan that equates the windows those rows carry (of a side the first join never pads with
NULLs): Flink's cascaded window joins.

>>> from streamjoin.spec import InputSpec
>>> from streamjoin.sql.compiler import compile_sql
>>> l = InputSpec.from_dict("l", {"columns": [["k", "int"], ["ts", "timestamp"]], "event_time": "ts"})
>>> r = InputSpec.from_dict("r", {"columns": [["k", "int"], ["ts", "timestamp"]], "event_time": "ts"})
>>> sql = ("SELECT L.k, L.window_start FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '5' MINUTES)) L "
...        "JOIN TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' MINUTES)) R "
...        "ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end")
>>> print(compile_sql("m", sql, {"l": l, "r": r}).root.window)
per window TUMBLE(ts, size 300s), fired at its end
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from ..errors import CompileError
from ..spec import APPEND_FORMATS, Column, InputSpec
from ..types import parse_duration, q
from .plan import Join, Node, Scan, Windowing, Windows, WindowJoinSpec, scans
from .time_bounds import interval_value

FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE")
_INTERVALS = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size")}
#: Each function's parameters in order, by the names of Flink's named form
#: (`TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '5' MINUTES)`).
PARAMETERS = {kind: ("DATA", "TIMECOL", *(n.upper() for n in names), "OFFSET") for kind, names in _INTERVALS.items()}
Fail = Callable[..., CompileError]


def parseable(sql: str) -> str:
    """The SQL as the Spark dialect parses it, at the same length (positions in errors still point
    into the user's SQL): in each window function, the `TABLE` keyword before its input blanked
    out, and so are Flink's parameter names where each names the parameter at its place:
    `TABLE(TUMBLE(TABLE t, ...))` -> `TABLE(TUMBLE(      t, ...))`, and
    `TABLE(TUMBLE(DATA => TABLE t, TIMECOL => ...` -> `TABLE(TUMBLE(              t,            ...`.
    A name out of its place stays, and `windowing` says how to write the call."""
    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(sql)
    chars = list(sql)

    def blank(token: Token) -> None:
        chars[token.start:token.end + 1] = " " * (token.end + 1 - token.start)

    for i in range(len(tokens) - 3):
        a, b, f, c = tokens[i:i + 4]
        if not (a.text.upper() == "TABLE" and b.token_type == TokenType.L_PAREN and f.text.upper() in FUNCTIONS
                and c.token_type == TokenType.L_PAREN):
            continue
        names = PARAMETERS[f.text.upper()]
        for position, j in _arguments(tokens, i + 4):
            named = j + 1 < len(tokens) and tokens[j + 1].token_type == TokenType.FARROW
            if named and position < len(names) and tokens[j].text.upper() == names[position]:
                blank(tokens[j])
                blank(tokens[j + 1])
            first = j + 2 if named else j
            if (position == 0 or named and tokens[j].text.upper() == "DATA") and first < len(tokens) \
                    and tokens[first].token_type == TokenType.TABLE:
                blank(tokens[first])
    return "".join(chars)


def _arguments(tokens: list[Token], start: int) -> Iterator[tuple[int, int]]:
    """(place, index of its first token) of each argument of the call whose arguments start at token `start`."""
    depth, position = 0, 0
    yield position, start
    for j in range(start, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            if depth == 0:
                return
            depth -= 1
        elif kind == TokenType.COMMA and depth == 0:
            position += 1
            yield position, j + 1


def window_call(table: exp.Expression) -> exp.Anonymous | None:
    """The TUMBLE/HOP/CUMULATE call of `TABLE(<call>)` in FROM, or None."""
    if not (isinstance(table, exp.Table) and isinstance(table.this, exp.Anonymous)
            and str(table.this.this).upper() == "TABLE" and len(table.this.expressions) == 1):
        return None
    call = table.this.expressions[0]
    return call if isinstance(call, exp.Anonymous) and str(call.this).upper() in FUNCTIONS else None


def _micros(node: exp.Expression, what: str, fail: Fail, *, signed: bool = False) -> int:
    """A window parameter's INTERVAL in microseconds (only an offset may be negative, as in Flink)."""
    try:
        value = interval_value(node) if isinstance(node, exp.Interval) else None
    except Exception:  # an interval that is not a fixed duration (months, years)
        value = None
    if value is None or (value.total_seconds() < 0 and not signed):
        kind = "fixed" if signed else "fixed, non-negative"
        raise fail(f"the {what} of a window must be a {kind} INTERVAL (e.g. INTERVAL '5' MINUTES), not "
                   f"{node.sql('spark')}", node)
    return int(value.total_seconds() * 1_000_000)


def windowing(call: exp.Anonymous, spec: InputSpec, fail: Fail) -> Windowing:
    """The windows of `TUMBLE/HOP/CUMULATE(TABLE t, DESCRIPTOR(time), ...)` over input `spec`."""
    kind = str(call.this).upper()
    args = list(call.expressions)
    names = _INTERVALS[kind]
    usage = _usage(kind, spec.name)
    if len(args) not in (2 + len(names), 3 + len(names)) or any(isinstance(a, (exp.PropertyEQ, exp.Kwarg)) for a in args):
        raise fail(f"{kind} takes its arguments in order: {usage}", call)
    descriptor = args[1]
    if not (isinstance(descriptor, exp.Anonymous) and str(descriptor.this).upper() == "DESCRIPTOR"
            and len(descriptor.expressions) == 1 and isinstance(descriptor.expressions[0], exp.Column)):
        raise fail(f"the second argument of {kind} must be DESCRIPTOR(<event time column>): {usage}", descriptor)
    time = descriptor.expressions[0].name
    if spec.event_time is None or time.lower() != spec.event_time.lower():
        raise fail(f"{kind} over '{spec.name}' must window by the input's event time "
                   f"({spec.event_time or 'none declared: declare event_time'}), not DESCRIPTOR({time})", descriptor)
    values = dict(zip(names, (_micros(a, n, fail) for a, n in zip(args[2:], names))))
    offset = _micros(args[-1], "offset", fail, signed=True) if len(args) == 3 + len(names) else 0
    size = values["size"]
    step = values.get("slide", values.get("step", size))
    if size <= 0 or step <= 0 or (kind == "CUMULATE" and size % step):
        raise fail(f"{kind}'s size and {names[0]} must be positive" + (", the size a whole multiple of the step, as "
                   "in Flink" if kind == "CUMULATE" else ""), call)
    if kind == "TUMBLE" and abs(offset) >= size:
        raise fail(f"TUMBLE's offset must be smaller than its size in absolute value, as in Flink "
                   f"(|{offset / 1e6:g}s| >= {size / 1e6:g}s)", args[-1])
    return Windowing(kind, next(c for c in spec.column_names if c.lower() == time.lower()), size, step, offset)


def _usage(kind: str, input_name: str) -> str:
    """How to call window function `kind` over an input: by position, or with Flink's names in order."""
    names = _INTERVALS[kind]
    return (f"{kind}(TABLE {input_name}, DESCRIPTOR(<event time>), " + ", ".join(f"<{n}>" for n in names)
            + f"[, <offset>]), or with Flink's names in that order: {kind}(DATA => TABLE {input_name}, TIMECOL => "
            + "DESCRIPTOR(<event time>), " + ", ".join(f"{n.upper()} => <{n}>" for n in names) + "[, `OFFSET` => <offset>])")


def window_view(call: exp.Anonymous, spec: InputSpec, fail: Fail) -> tuple[InputSpec, Windowing]:
    """The input as the window function returns it: its columns plus the window columns."""
    clash = [c for c in spec.column_names if c.lower() in Windowing.COLUMNS]
    if clash:
        raise fail(f"input '{spec.name}' already has a column {clash[0]}, which {str(call.this).upper()} adds; "
                   "rename it in a derived table first", call)
    tvf = windowing(call, spec, fail)
    columns = spec.columns + tuple(Column(c, "timestamp") for c in Windowing.COLUMNS)
    return replace(spec, columns=columns, unique_key=()), tvf


def tvf_windows(tvf: Windowing, scan: Scan) -> Windows:
    """The windows of a scan over a window table function: the window columns it keeps as they are."""
    parts = dict(zip(Windowing.COLUMNS, ("start", "end", "time")))
    kept = tuple((internal, parts[src.strip("`")]) for src, (_, internal) in zip(scan.column_sources, scan.columns)
                 if src.strip("`") in parts)
    return Windows(str(tvf), kept, tvf)


def window_inputs(tree: exp.Expression) -> list[exp.Column]:
    """The inputs the query's window functions read, as written (`TABLE shop.orders` -> shop.orders)."""
    calls = [window_call(t) for t in tree.find_all(exp.Table)]
    return [c.expressions[0] for c in calls if c is not None and c.expressions and isinstance(c.expressions[0], exp.Column)]


def input_table(call: exp.Anonymous, fail: Fail) -> exp.Table:
    """The input the window function reads, as a table reference."""
    first = call.expressions[0] if call.expressions else None
    if isinstance(first, exp.Column):
        return exp.to_table(first.sql("spark"), dialect="spark")
    if isinstance(first, exp.Table):
        return first
    raise fail(f"{str(call.this).upper()} takes its arguments in order: {_usage(str(call.this).upper(), '<input>')}", call)


def spark_window_part(body: exp.Expression) -> tuple[str, exp.Anonymous] | None:
    """("window" | "start" | "end", the call) for Spark's `window(...)` or `window(...).start/.end`."""
    part, call = "window", body
    if isinstance(body, exp.Dot) and body.name.lower() in ("start", "end"):
        part, call = body.name.lower(), body.this
    if isinstance(call, exp.Anonymous) and str(call.this).lower() == "window":
        return part, call
    return None


def spark_windows(columns: list[tuple[str, exp.Expression]], spec: InputSpec, fail: Fail) -> tuple[str, dict[str, str]] | None:
    """The windows of a derived table's columns made by Spark's `window()`: its spec (the call,
    normalised) and each window column's part; None when it has none."""
    found: dict[str, str] = {}
    specs: set[str] = set()
    for name, body in columns:
        hit = spark_window_part(body)
        if hit is None:
            continue
        part, call = hit
        args = call.expressions
        if not args or not isinstance(args[0], exp.Column) or not spec.event_time \
                or args[0].name.lower() != spec.event_time.lower():
            raise fail(f"window() over '{spec.name}' must window by the input's event time "
                       f"({spec.event_time or 'none declared: declare event_time'})", call)
        durations = []
        for a in args[1:]:
            if not isinstance(a, exp.Literal) or not a.is_string:
                raise fail("window()'s durations must be string literals such as '5 minutes'", a)
            durations.append(int(parse_duration(a.name, what="window duration").total_seconds() * 1_000_000))
        specs.add(f"window({spec.event_time}, " + ", ".join(f"{d / 1e6:g}s" for d in durations) + ")")
        found[name] = part
    if not found:
        return None
    if len(specs) > 1:
        raise fail(f"a derived table over '{spec.name}' computes two different windows: {', '.join(sorted(specs))}")
    return specs.pop(), found


def bind_window_joins(node: Node, prefixes: Mapping[str, InputSpec], fail: Fail) -> Node:
    """Mark every join of two windowed scans that equates their windows as a window join, checking
    what Flink requires of it."""
    if not isinstance(node, Join):
        return node
    node = replace(node, left=bind_window_joins(node.left, prefixes, fail),
                   right=bind_window_joins(node.right, prefixes, fail))
    left, right = node.left, node.right
    if not (isinstance(right, Scan) and right.windows):
        return node
    if isinstance(left, Join):  # a cascade, as Flink's: the rows of a window join, by the windows they carry
        cascade = next((w for w in carried_windows(left) if _equates_windows(node, w, right.windows)), None)
        if cascade is None:
            return node
        what, windows, windowed = f"the window join {left.id} joined with windowed {right.alias}", cascade, (right,)
    elif isinstance(left, Scan) and left.windows:
        what, windows, windowed = f"the join of windowed {left.alias} with windowed {right.alias}", left.windows, (left, right)
        if not _equates_windows(node, windows, right.windows):
            raise fail(f"{what} is not a window join: its ON condition must equate both window bounds, as Flink "
                       f"requires (add {left.alias}.window_start = {right.alias}.window_start AND {left.alias}.window_end"
                       f" = {right.alias}.window_end, or {left.alias}.<window> = {right.alias}.<window> for Spark's "
                       "window())")
    else:
        return node
    problems = []
    if windows.assignment != right.windows.assignment:
        problems.append(f"the two sides use different windows ({windows.spec} and {right.windows.spec}); use the "
                        "same window function and sizes on both")
    if node.time_bound is not None or node.temporal is not None:
        problems.append("it also has a time bound or FOR SYSTEM_TIME AS OF; a window join joins by window only")
    for scan in windowed:
        spec = prefixes[scan.alias]
        if spec.changelog_format not in APPEND_FORMATS:
            problems.append(f"input '{spec.name}' has changelog_format '{spec.changelog_format}', which updates and "
                            "deletes rows; a window join reads append-only inputs, as in Flink (declare an insert-only "
                            "changelog, e.g. 'append')")
    if problems:
        raise fail(f"{what}: " + "; ".join(problems))
    return replace(node, window=WindowJoinSpec(spec=windows.spec, left_end=_end(windows), right_end=_end(right.windows)))


def carried_windows(node: Node) -> list[Windows]:
    """The windows whose columns every row of `node` carries, not NULL: a windowed scan's, and a window
    join's sides' that it never pads with NULLs (a join of its rows by them is a window join too)."""
    if isinstance(node, Scan):
        return [node.windows] if node.windows else []
    if not isinstance(node, Join) or node.window is None:
        return []
    return [w for side in node.unpadded_sides for w in carried_windows(side)]


def padded_windows_joined(node: Node) -> str | None:
    """The alias of the windowed scan by whose windows `node` joins a window join's rows, when that
    window join may pad them with NULL: such a join stays a regular join (Flink plans a window join
    there, which drops a row whose windows are NULL as late once a watermark has passed)."""
    if not (isinstance(node, Join) and node.window is None and isinstance(node.left, Join)
            and node.left.window is not None and isinstance(node.right, Scan) and node.right.windows):
        return None
    # windows it carries unpadded would have made `node` a window join (`bind_window_joins`)
    joined = [s.alias for s in scans(node.left) if s.windows and _equates_windows(node, s.windows, node.right.windows)]
    return joined[0] if joined else None


def _equates_windows(node: Join, left: Windows, right: Windows) -> bool:
    """Whether `node`'s ON condition equates both bounds of the two windows (or the whole window)."""
    equated = {p for p in ("start", "end", "window") if _equates(node, left.column(p), right.column(p))}
    return {"start", "end"} <= equated or "window" in equated


def _equates(node: Join, left: str | None, right: str | None) -> bool:
    return left is not None and right is not None and any(
        k.left.strip("`") == left and k.right.strip("`") == right for k in node.keys)


def _end(windows: Windows) -> str:
    """Spark SQL for the end of a row's window, over internal names."""
    end = windows.column("end")
    return q(end) if end else f"{q(windows.column('window') or '')}.`end`"


def to_spark(tree: exp.Expression) -> exp.Expression:
    """The query with each window table function written as Spark SQL (a derived table over its
    input), so Spark can run the model's SQL as a batch query."""
    def swap(node: exp.Expression) -> exp.Expression:
        call = window_call(node)
        if call is None:
            return node
        source = input_table(call, _compiled)
        spec = InputSpec(name=source.name, columns=(Column(call.expressions[1].expressions[0].name, "timestamp"),),
                         event_time=call.expressions[1].expressions[0].name)
        tvf = windowing(call, spec, _compiled)
        added = ", ".join(f"{sql} AS {name}" for name, sql in tvf.columns_sql("`__w`").items())
        sub = sqlglot.parse_one(f"SELECT `__input`.*, {added} FROM {source.sql('spark')} AS `__input` "
                                f"LATERAL VIEW explode({tvf.windows_sql()}) `__windows` AS `__w`", read="spark")
        return exp.Subquery(this=sub, alias=exp.TableAlias(this=exp.to_identifier(node.alias or call.expressions[0].name)))

    return tree.transform(swap)


def _compiled(message: str, where: exp.Expression | None = None) -> CompileError:
    """The error of a window function in SQL that compiled (`to_spark` runs on a model's SQL only)."""
    return CompileError(message)
