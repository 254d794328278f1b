"""Join-strategy selection: binary chains of joins, or one multi-way operator."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .plan import JoinPlan


def choose_strategy(plan: JoinPlan, fail: Callable) -> JoinPlan:
    """Apply the model's `join_strategy`; only the binary strategy exists so far."""
    strategy = plan.config.join_strategy
    if strategy == "multi":
        raise fail("join_strategy 'multi' is not available yet; use 'binary' or 'auto'")
    return replace(plan, notes=plan.notes + (f"join_strategy {strategy}: binary joins",))
