"""ASOF joins: each left row with the one right row of its key nearest in time.

Two spellings, as Snowflake (and Feldera) and DuckDB write them:

    FROM trades t [LEFT] ASOF JOIN quotes q MATCH_CONDITION(t.ts >= q.ts) ON t.sym = q.sym
    FROM trades t ASOF [LEFT] JOIN quotes q ON t.sym = q.sym AND t.ts >= q.ts

The match condition compares a left time with a right time (`>=`, `>`: the latest right row at or
before; `<=`, `<`: the earliest at or after); the ON equalities are the key. Without LEFT a left
row without a match is dropped (DuckDB's ASOF JOIN), with LEFT it is null-padded. Conditions on the
right input alone in ON filter it before the nearest row is chosen; WHERE conditions filter the
joined rows. Ties (right rows of one key at the same time) go to the smallest row (by its columns
in order), so the choice is deterministic.

>>> from streamjoin.spec import InputSpec
>>> from streamjoin.sql.compiler import compile_sql
>>> t = InputSpec.from_dict("trades", {"columns": [["sym", "string"], ["ts", "timestamp"]]})
>>> q = InputSpec.from_dict("quotes", {"columns": [["sym", "string"], ["ts", "timestamp"], ["px", "int"]]})
>>> sql = "SELECT t.sym, q.px FROM trades t LEFT ASOF JOIN quotes q MATCH_CONDITION(t.ts >= q.ts) ON t.sym = q.sym"
>>> print(compile_sql("m", sql, {"trades": t, "quotes": q}).root.asof)
MATCH_CONDITION(`t__ts` >= `q__ts`)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..types import JoinType
from .plan import AsofSpec, Join, Node, Scan
from .scope import Fail, Scope

if TYPE_CHECKING:
    from .subqueries import JoinBuilder

_FLIPPED = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
_OPS = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<"}


@dataclass(frozen=True)
class MatchCondition:
    """A `MATCH_CONDITION(...)` taken out of the SQL: its text and where it stood."""

    text: str
    start: int


def parseable(sql: str) -> tuple[str, list[MatchCondition]]:
    """The SQL as the Spark dialect parses it, same length: `LEFT ASOF JOIN` becomes `ASOF LEFT JOIN`,
    and each `MATCH_CONDITION(...)` is blanked out and returned."""
    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(sql)
    chars = list(sql)
    found: list[MatchCondition] = []
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None:
            break
        if tok.text.upper() == "LEFT" and nxt.text.upper() == "ASOF":
            chars[tok.start:tok.end + 1], chars[nxt.start:nxt.end + 1] = list(nxt.text), list(tok.text)
        if tok.text.upper() == "MATCH_CONDITION" and nxt.token_type == TokenType.L_PAREN:
            depth, j = 0, i + 1
            while j < len(tokens):
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[j].token_type, 0)
                if depth == 0:
                    break
                j += 1
            end = tokens[min(j, len(tokens) - 1)].end
            found.append(MatchCondition(sql[nxt.end + 1:tokens[j].start] if j < len(tokens) else "", tok.start))
            chars[tok.start:end + 1] = " " * (end + 1 - tok.start)
    return "".join(chars), found


def match_condition(join: exp.Join, conditions: list[MatchCondition]) -> exp.Expression | None:
    """The MATCH_CONDITION written after this join's table (taken from `conditions`), if any."""
    table_end = max((p.meta.get("end", -1) for p in join.this.find_all(exp.Identifier)), default=-1)
    for c in conditions:
        if c.start > table_end:
            conditions.remove(c)
            return sqlglot.parse_one(c.text, read="spark")
    return None


def bind_asof(builder: "JoinBuilder", left: Node, right: Node, join_type: JoinType, parts: list[exp.Expression],
              match: exp.Expression | None, scope: Scope, where: exp.Expression) -> Join:
    """The ASOF join of `left` and `right` on ON conjuncts `parts` and the match condition (given, or
    the one time comparison among `parts`), checking what it needs."""
    fail: Fail = builder.fail
    left_aliases = {a.lower() for a in left.aliases}
    right_aliases = {a.lower() for a in right.aliases}

    def comparison(c: exp.Expression) -> AsofSpec | None:
        op = _OPS.get(type(c))
        if op is None:
            return None
        a, b = c.this, c.expression
        ra, rb = scope.refs(a, fail), scope.refs(b, fail)
        if ra and rb and ra <= right_aliases and rb <= left_aliases:
            a, b, op = b, a, _FLIPPED[op]
        elif not (ra and rb and ra <= left_aliases and rb <= right_aliases):
            return None
        return AsofSpec(scope.render(a, fail), op, scope.render(b, fail))

    what = f"the ASOF join of {', '.join(sorted(left.aliases))} with {', '.join(sorted(right.aliases))}"
    if match is not None:
        spec = comparison(match)
        if spec is None:
            raise fail(f"{what}: MATCH_CONDITION must compare a time of the left input with one of the right "
                       f"(>=, >, <= or <), not {match.sql('spark')}", where)
    else:
        found = [(c, comparison(c)) for c in parts]
        found = [(c, s) for c, s in found if s is not None]
        if len(found) != 1:
            raise fail(f"{what} needs exactly one match condition comparing a left time with a right time: write "
                       "MATCH_CONDITION(l.ts >= r.ts) after the right input, or one such comparison in ON", where)
        parts = [c for c in parts if c is not found[0][0]]
        spec = found[0][1]
    problems = []
    if join_type not in (JoinType.INNER, JoinType.LEFT):
        problems.append(f"{join_type.value.upper()} ASOF JOIN is not supported; write ASOF JOIN or LEFT ASOF JOIN")
    if not isinstance(right, Scan):
        problems.append("the right side must be one input (or a derived table over one), not a join")
    node = builder.join_with(left, right, join_type, parts, scope, where)
    if not node.keys:
        problems.append("its ON condition has no equality between the two sides; add the key to match by "
                        "(e.g. ON t.sym = q.sym)")
    if node.residual:
        problems.append(f"ON may hold only the key equalities and conditions on the right input; move "
                        f"{node.residual.replace('`', '')} to WHERE")
    if problems:
        raise fail(f"{what}: " + "; ".join(problems), where)
    return replace(node, asof=spec)
