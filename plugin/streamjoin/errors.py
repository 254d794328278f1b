"""Errors raised by streamjoin: one root, a few specific kinds.

Every message says what is wrong, the offending value, and how to fix it.
"""
from __future__ import annotations


class StreamJoinError(Exception):
    """Root of every error streamjoin raises on purpose."""


class CompileError(StreamJoinError):
    """Raised when a model's SQL or configuration is outside what streamjoin supports."""

    def __init__(self, problems: list[str] | str, *, model: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.model = model
        head = f"model '{model}': " if model else ""
        if len(self.problems) == 1:
            super().__init__(head + self.problems[0])
        else:
            body = "\n".join(f"  - {p}" for p in self.problems)
            super().__init__(f"{head}{len(self.problems)} problems:\n{body}")


class ConfigError(CompileError):
    """Raised when an input declaration or a model config is missing, unknown or contradictory."""


class InputError(StreamJoinError):
    """Raised when an input's changes are malformed: a bad row kind, a retraction of a row
    that was never inserted, a schema that no longer matches the declaration."""

    def __init__(self, message: str, *, model: str | None = None, input_name: str | None = None) -> None:
        self.model = model
        self.input_name = input_name
        where = []
        if model:
            where.append(f"model '{model}'")
        if input_name:
            where.append(f"input '{input_name}'")
        super().__init__((", ".join(where) + ": " if where else "") + message)


class PlanChangedError(InputError):
    """Raised when a model's SQL or configuration changed so that its state no longer fits; nothing was written.

    `what` says why the state must be rebuilt, `diff` shows the plan's outline before and now;
    `rebuildable` is False when a side-by-side rebuild could not swap the change in either (an
    output column's type changed, which the changelog table keeps)."""

    def __init__(self, what: str, diff: str, *, model: str, rebuildable: bool = True) -> None:
        self.what, self.diff, self.rebuildable = what, diff, rebuildable
        then = ("set on_plan_change='rebuild' (rebuilds it side by side and swaps it in) or 'full_refresh'"
                if rebuildable else "set on_plan_change='full_refresh'; downstream models need a full refresh too")
        super().__init__(f"the model's SQL or configuration changed since its last run: {what}; run it with "
                         f"--full-refresh (or {then}). What changed:\n{diff}", model=model)


class ConcurrentRunError(StreamJoinError):
    """Raised when another run of the same model committed first; nothing was written."""


class ModelBusyError(StreamJoinError):
    """Raised when a model's tables are in use (a run, or maintenance) by another process; nothing was changed."""
