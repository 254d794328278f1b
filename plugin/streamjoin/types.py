"""Small value types shared across the package: row kinds, sides, durations."""
from __future__ import annotations

import enum
import re
from datetime import timedelta


class RowKind(str, enum.Enum):
    """A changelog row kind, as Flink names them; the value is the short form stored in tables."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def weight(self) -> int:
        """+1 for kinds that add a row, -1 for kinds that retract one."""
        return 1 if self.value.startswith("+") else -1


ROW_KINDS: tuple[str, ...] = tuple(k.value for k in RowKind)


class Side(str, enum.Enum):
    """One of the two inputs of a binary join."""

    LEFT = "left"
    RIGHT = "right"

    @property
    def other(self) -> "Side":
        return Side.RIGHT if self is Side.LEFT else Side.LEFT


class JoinType(str, enum.Enum):
    """Join types of regular joins, as Spark SQL spells them."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    SEMI = "semi"
    ANTI = "anti"

    def preserves(self, side: Side) -> bool:
        """Whether rows of `side` appear null-padded (or gated) when they have no match."""
        return {
            JoinType.LEFT: side is Side.LEFT,
            JoinType.RIGHT: side is Side.RIGHT,
            JoinType.FULL: True,
            JoinType.SEMI: side is Side.LEFT,
            JoinType.ANTI: side is Side.LEFT,
        }.get(self, False)

    @property
    def emits_pairs(self) -> bool:
        """Whether matched pairs are part of the output (not for semi and anti joins)."""
        return self not in (JoinType.SEMI, JoinType.ANTI)


_UNITS = {
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$")


def parse_duration(text: str | int | float | timedelta | None, *, what: str) -> timedelta:
    """Parse `"<number> <unit>"` (unit millisecond(s) … day(s)) into a timedelta.

    >>> parse_duration("4 hours", what="x")
    datetime.timedelta(seconds=14400)
    """
    if text is None:
        return timedelta(0)
    if isinstance(text, timedelta):
        return text
    if isinstance(text, (int, float)):
        return timedelta(seconds=text)
    match = _DURATION.match(str(text).lower())
    if not match or match.group(2) not in _UNITS:
        raise ValueError(
            f"{what}: cannot read duration {text!r}; write it as '<number> <unit>' with unit "
            "millisecond(s), second(s), minute(s), hour(s) or day(s), e.g. '5 seconds'"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def duration_text(duration: timedelta) -> str:
    """A duration as `parse_duration` reads it, in its largest whole unit.

    >>> duration_text(timedelta(hours=4)), duration_text(timedelta(seconds=90)), duration_text(timedelta(0))
    ('4 hours', '90 seconds', '0 seconds')
    """
    micros = round(duration.total_seconds() * 1e6)
    for unit in ("day", "hour", "minute", "second", "millisecond", "microsecond"):
        size = round(_UNITS[unit] * 1e6)
        if micros % size == 0 and (micros or unit == "second"):
            n = micros // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{micros} microseconds"


def q(name: str) -> str:
    """Quote an identifier for Spark SQL text (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


def text(value: str) -> str:
    """A single-quoted Spark SQL string literal of `value`.

    >>> print(text("it's"))
    'it\\'s'
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
