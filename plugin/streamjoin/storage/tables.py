"""Where a model's tables live: result, changelog, run log, one state table per join side, late rows."""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelTables:
    """The Delta tables of one model under `root/<model>/`."""

    root: str
    model: str

    @property
    def home(self) -> str:
        return os.path.join(self.root, self.model)

    @property
    def result(self) -> str:
        return os.path.join(self.home, "result")

    @property
    def changelog(self) -> str:
        return os.path.join(self.home, "changelog")

    @property
    def runs(self) -> str:
        return os.path.join(self.home, "runs")

    @property
    def late_rows(self) -> str:
        """The rows interval joins did not keep because they arrived late (see `operators.interval`)."""
        return os.path.join(self.home, "late_rows")

    def state(self, name: str) -> str:
        return os.path.join(self.home, "state", name)

    def state_tables(self) -> list[str]:
        folder = os.path.join(self.home, "state")
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(folder, n) for n in os.listdir(folder))

    def all_tables(self) -> list[str]:
        """Every table a run writes, the run log last (its commit marks the run complete); the late
        rows table once a run created it."""
        late = [self.late_rows] if os.path.isdir(os.path.join(self.late_rows, "_delta_log")) else []
        return self.state_tables() + late + [self.changelog, self.result, self.runs]
