"""streamjoin: declarative streaming joins with Flink's semantics on Spark, state in Delta."""
from __future__ import annotations

from .errors import CompileError, ConcurrentRunError, ConfigError, InputError, ModelBusyError, PlanChangedError, \
    StreamJoinError
from .runtime.run import RunReport, run_once
from .spec import InputSpec, ModelConfig
from .sql.compiler import compile_sql
from .sql.plan import JoinPlan
from .storage.tables import ModelTables

__all__ = [
    "CompileError", "ConcurrentRunError", "ConfigError", "InputError", "InputSpec", "JoinPlan", "ModelConfig",
    "ModelBusyError", "ModelTables", "PlanChangedError", "RunReport", "StreamJoinError", "compile_sql", "run_once",
]
