"""Wall time per phase of a run, for the run log: every second of a run falls in one phase."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    """Accumulates the seconds spent in named phases (`with phases("read"): ...`)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - start

    @property
    def seconds(self) -> dict[str, float]:
        """Seconds per phase so far, rounded to milliseconds."""
        return {name: round(s, 3) for name, s in self._seconds.items()}

    def total(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.started
