"""streamjoin: declarative streaming joins with Flink's semantics on Spark, state in Delta.

The public API below is imported on first use (PEP 562): a process that needs one submodule, such as
a Spark task's Parquet writer on an executor or an Airflow DAG file, does not import the SQL compiler
and the run protocol with it (measured: 0.3 s in every fresh Python worker, 0.6 s in every process
that loads the DAG file)."""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: Each public name, by the module that defines it.
_API = {
    **dict.fromkeys(["CompileError", "ConcurrentRunError", "ConfigError", "InputError", "ModelBusyError",
                     "PlanChangedError", "StreamJoinError"], ".errors"),
    "RunReport": ".runtime.run", "run_once": ".runtime.run",
    "InputSpec": ".spec", "ModelConfig": ".spec",
    "compile_sql": ".sql.compiler",
    "JoinPlan": ".sql.plan",
    "ModelTables": ".storage.tables",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_API[name], __name__), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from .errors import CompileError, ConcurrentRunError, ConfigError, InputError, ModelBusyError, \
        PlanChangedError, StreamJoinError
    from .runtime.run import RunReport, run_once
    from .spec import InputSpec, ModelConfig
    from .sql.compiler import compile_sql
    from .sql.plan import JoinPlan
    from .storage.tables import ModelTables
