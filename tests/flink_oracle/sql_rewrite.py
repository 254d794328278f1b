"""Rewrite a case's Spark SQL into the Flink SQL that means the same, with sqlglot.

Used only when Flink rejects the case's SQL as written. One pass, expression in and
expression out; the text is then generated with sqlglot's Spark dialect, whose
quoting (backticks) and operators Flink shares for these joins. The pass changes:

- interval literals to Flink's single-unit form: ``INTERVAL 4 HOURS`` and
  ``INTERVAL '4 hours'`` become ``INTERVAL '4' HOUR``; a leading field wider than
  Calcite's default precision of 2 digits gets an explicit one
  (``INTERVAL '100' HOUR(3)``); milliseconds, which Flink has no unit for, and
  fractional amounts become fractional seconds (``INTERVAL '0.010' SECOND``);
- ``a <=> b`` to ``a IS NOT DISTINCT FROM b`` (sqlglot's Spark generator does this);
- every identifier quoted with backticks, since Flink reserves words that Spark lets
  stand as names (``day``, ``value``, ``year``, ...).

>>> to_flink_sql("SELECT o.day FROM o JOIN s ON o.t BETWEEN s.t - INTERVAL 4 HOURS AND s.t")
"SELECT `o`.`day` FROM `o` JOIN `s` ON `o`.`t` BETWEEN `s`.`t` - INTERVAL '4' HOUR AND `s`.`t`"
>>> to_flink_sql("SELECT * FROM a JOIN b ON a.k <=> b.k AND a.t > b.t - INTERVAL '100 minutes'")
"SELECT * FROM `a` JOIN `b` ON `a`.`k` IS NOT DISTINCT FROM `b`.`k` AND `a`.`t` > `b`.`t` - INTERVAL '100' MINUTE(3)"
>>> to_flink_sql("SELECT * FROM l JOIN r ON l.t < r.t + INTERVAL '10' MILLISECOND")
"SELECT * FROM `l` JOIN `r` ON `l`.`t` < `r`.`t` + INTERVAL '0.010' SECOND"
"""

from __future__ import annotations

import re
from decimal import Decimal

import sqlglot
from sqlglot import exp

_UNITS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_TEXT_INTERVAL = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+([A-Za-z]+)\s*$")


def _unit_name(raw: str) -> str | None:
    unit = raw.upper()
    if unit.endswith("S") and unit[:-1] in _UNITS:
        unit = unit[:-1]
    return unit if unit in _UNITS else None


def flink_interval(node: exp.Expression) -> exp.Expression:
    """Rewrite one interval literal into Flink's form; other nodes are returned as they are."""
    if not isinstance(node, exp.Interval):
        return node
    amount = node.this.name if node.this is not None else ""
    unit = _unit_name(node.unit.name) if node.unit is not None else None
    if unit is None:  # `INTERVAL '4 hours'`: amount and unit inside the string
        m = _TEXT_INTERVAL.match(amount)
        if not m or _unit_name(m.group(2)) is None:
            return node
        amount, unit = m.group(1), _unit_name(m.group(2))
    assert unit is not None
    try:
        value = Decimal(amount)
    except ArithmeticError:
        return node
    if unit == "MILLISECOND" or value != value.to_integral_value():
        # Flink has no MILLISECOND interval unit: write milliseconds as fractional seconds.
        millis = value * _UNITS[unit]
        if millis != millis.to_integral_value():
            return node
        seconds = Decimal(int(millis)) / 1000
        digits = len(str(int(abs(seconds))))
        field = "SECOND" if digits <= 2 else f"SECOND({digits}, 3)"
        return exp.Interval(this=exp.Literal.string(f"{seconds:.3f}"), unit=exp.var(field))
    digits = len(str(abs(int(value))))
    field = unit if digits <= 2 else f"{unit}({digits})"
    return exp.Interval(this=exp.Literal.string(str(int(value))), unit=exp.var(field))


def to_flink_sql(sql: str) -> str:
    """Return the Flink SQL text of one Spark SQL SELECT."""
    tree = sqlglot.parse_one(sql, read="spark")
    return tree.transform(flink_interval).sql(dialect="spark", identify=True)
