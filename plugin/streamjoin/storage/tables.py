"""Where a model's tables live: result, changelog, run log, one state table per join side, late rows.

`root` is a path or a URI (`file:///…`, `s3://bucket/…`, …): every name here is joined with `/`,
and folders are listed through `storage.filesystem`."""
from __future__ import annotations

from dataclasses import dataclass

from . import filesystem


@dataclass(frozen=True)
class ModelTables:
    """The Delta tables of one model under `root/<model>/`."""

    root: str
    model: str

    @property
    def home(self) -> str:
        return filesystem.join(self.root, self.model)

    @property
    def result(self) -> str:
        return filesystem.join(self.home, "result")

    @property
    def changelog(self) -> str:
        return filesystem.join(self.home, "changelog")

    @property
    def runs(self) -> str:
        return filesystem.join(self.home, "runs")

    @property
    def late_rows(self) -> str:
        """The rows interval joins did not keep because they arrived late (see `operators.interval`)."""
        return filesystem.join(self.home, "late_rows")

    def state(self, name: str) -> str:
        return filesystem.join(self.home, "state", name)

    def state_tables(self) -> list[str]:
        folder = filesystem.join(self.home, "state")
        return [filesystem.join(folder, n) for n in filesystem.list_names(folder)]

    def all_tables(self) -> list[str]:
        """Every table a run writes, the run log last (its commit marks the run complete); the late
        rows table once a run created it."""
        late = [self.late_rows] if filesystem.is_dir(filesystem.join(self.late_rows, "_delta_log")) else []
        return self.state_tables() + late + [self.changelog, self.result, self.runs]
