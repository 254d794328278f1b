"""Event times as the time-based joins carry them: microseconds since the epoch (UTC)."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Mapping

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from ..storage import delta_log
from ..unions import union_by_name

US = timedelta(microseconds=1)


def micros(c: Column) -> Column:
    """An event time as microseconds since the epoch (UTC)."""
    return F.unix_micros(c.cast("timestamp"))


def computed(parts: list[DataFrame]) -> list[Row]:
    """The rows of the statistics a run still has to compute, in one Spark job; none, and no job, when
    the files' footers and statistics told them all (`Executor.stored_time_range`)."""
    return union_by_name(parts).collect() if parts else []


def as_text(us: int | None) -> str | None:
    """Microseconds since the epoch as UTC timestamp text, for the run log."""
    if us is None:
        return None
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + us * US).strftime("%Y-%m-%d %H:%M:%S.%f")


def advanced(watermark: int | None, max_time: Mapping[str, int | None], run_max: Mapping[str, int | None],
             delays: Mapping[str, int]) -> tuple[int | None, dict[str, int | None]]:
    """The watermark and each source's largest time after a run (FORMAT.md): W = max(W before, min over
    the sources of (largest time seen - its delay)), unset until every source has a time. The sources
    are those of `run_max`; one that `max_time` lacks (a run before it counted) starts unseen."""
    seen = {k: max((t for t in (max_time.get(k), run_max[k]) if t is not None), default=None) for k in run_max}
    if all(t is not None for t in seen.values()):
        candidate = min(t - delays[k] for k, t in seen.items())  # type: ignore[operator]
        watermark = candidate if watermark is None else max(watermark, candidate)
    return watermark, seen


@dataclass(frozen=True)
class Clock:
    """The watermark a temporal or window join carries from run to run, in its state tables'
    commit metadata under `key`, with the largest time of each source it follows
    (`Executor.watermark_sources`)."""

    key: str
    max_time: dict[str, int | None]  # per source
    watermark: int | None = None

    def metadata(self) -> dict[str, str]:
        return {self.key: json.dumps({"watermark": self.watermark, "watermark_utc": as_text(self.watermark),
                                      "max_time": self.max_time})}

    @classmethod
    def load(cls, key: str, path: str, version: int | None) -> "Clock":
        raw = delta_log.latest_metadata(path, key, version) if version is not None else None
        if not raw:
            return cls(key, {})
        body = json.loads(raw)
        return cls(key, body["max_time"], body["watermark"])

    def advance(self, run_max: Mapping[str, int | None], delays: Mapping[str, int]) -> "Clock":
        """The clock after a run whose sources' largest times were `run_max`."""
        watermark, max_time = advanced(self.watermark, self.max_time, run_max, delays)
        return replace(self, watermark=watermark, max_time=max_time)
