"""Event times as the time-based joins carry them: microseconds since the epoch (UTC)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.sql import Column
from pyspark.sql import functions as F

US = timedelta(microseconds=1)


def micros(c: Column) -> Column:
    """An event time as microseconds since the epoch (UTC)."""
    return F.unix_micros(c.cast("timestamp"))


def as_text(us: int | None) -> str | None:
    """Microseconds since the epoch as UTC timestamp text, for the run log."""
    if us is None:
        return None
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + us * US).strftime("%Y-%m-%d %H:%M:%S.%f")
