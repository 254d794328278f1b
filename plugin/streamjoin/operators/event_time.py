"""Event times as the time-based joins carry them: microseconds since the epoch (UTC)."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import reduce
from datetime import datetime, timedelta, timezone
from typing import Sequence

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from ..storage import delta_log

US = timedelta(microseconds=1)


def micros(c: Column) -> Column:
    """An event time as microseconds since the epoch (UTC)."""
    return F.unix_micros(c.cast("timestamp"))


def computed(parts: list[DataFrame]) -> list[Row]:
    """The rows of the statistics a run still has to compute, in one Spark job; none, and no job, when
    the files' footers and statistics told them all (`Executor.stored_time_range`)."""
    return reduce(DataFrame.unionByName, parts).collect() if parts else []


def as_text(us: int | None) -> str | None:
    """Microseconds since the epoch as UTC timestamp text, for the run log."""
    if us is None:
        return None
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + us * US).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True)
class Clock:
    """The watermark a temporal or window join carries from run to run, in its state tables'
    commit metadata under `key`: W = max(W before, min over both inputs of (largest event time
    seen - its watermark_delay)), unset until both inputs have seen a row."""

    key: str
    max_time: dict[str, int | None]  # per side
    watermark: int | None = None

    def metadata(self) -> dict[str, str]:
        return {self.key: json.dumps({"watermark": self.watermark, "watermark_utc": as_text(self.watermark),
                                      "max_time": self.max_time})}

    @classmethod
    def load(cls, key: str, sides: Sequence[str], path: str, version: int | None) -> "Clock":
        raw = delta_log.latest_metadata(path, key, version) if version is not None else None
        if not raw:
            return cls(key, {s: None for s in sides})
        body = json.loads(raw)
        return cls(key, body["max_time"], body["watermark"])

    def advance(self, run_max: dict[str, int | None], delays: dict[str, int]) -> "Clock":
        """The clock after a run whose inputs' largest event times were `run_max`."""
        max_time = {s: max((t for t in (self.max_time[s], run_max[s]) if t is not None), default=None)
                    for s in self.max_time}
        watermark = self.watermark
        if all(t is not None for t in max_time.values()):
            candidate = min(max_time[s] - delays[s] for s in max_time)  # type: ignore[operator]
            watermark = candidate if watermark is None else max(watermark, candidate)
        return replace(self, watermark=watermark, max_time=max_time)
