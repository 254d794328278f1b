"""What a run did, for its caller and the run log."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunReport:
    """What a run did: its id, the changes it read per input, and the changes it emitted."""

    model: str
    run_id: int | None
    status: str  # "committed", "no changes", "rebuilding" (a rebuild held to its budget, see `runtime.rebuild`)
    changes_in: dict[str, int] = field(default_factory=dict)
    rows_out: dict[str, int] = field(default_factory=dict)
    offsets: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    previous_run: int | None = None  # "no changes": the last committed run, whose offsets are still current

    def summary(self) -> str:
        """One line for logs, e.g. `streamjoin orders_enriched run 8: committed; changes in: ...`."""
        if self.status == "rebuilding":
            done = ", ".join(f"{name} to version {v['read_to']} of {v['latest']}"
                             for name, v in self.metrics["rebuild"].items())
            return (f"streamjoin {self.model}: rebuilding side by side, read {done} so far (rebuild_budget); "
                    f"its tables keep the old result until the rebuild catches up and is swapped in")
        if self.status == "no changes":
            since = f" since run {self.previous_run}" if self.previous_run is not None else ""
            return f"streamjoin {self.model}: no new changes{since} on any input; nothing written"
        ins = ", ".join(f"{k}={v}" for k, v in self.changes_in.items())
        outs = ", ".join(f"{k}={v}" for k, v in self.rows_out.items())
        return f"streamjoin {self.model} run {self.run_id}: {self.status}; changes in: {ins or '-'}; out: {outs or '-'}; {self.seconds:.1f}s"
