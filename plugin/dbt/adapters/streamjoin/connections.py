"""Profile fields of ``type: streamjoin`` and the connection manager that starts Spark."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, cast

from dbt.adapters.contracts.connection import AdapterRequiredConfig, Connection, ConnectionState
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
)
from dbt_common.exceptions import DbtConfigError
from streamjoin.storage import filesystem

from dbt.adapters.streamjoin import session
from dbt.adapters.streamjoin.session import SessionPlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Project-relative folder for the embedded warehouse, metastore and state.
DEFAULT_LOCAL_DIR = ".streamjoin"


@dataclass
class StreamjoinCredentials(SparkCredentials):
    """dbt-spark's credentials, defaulted for an in-process SparkSession.

    ``type: streamjoin`` alone is a complete profile: method ``session``, schema
    ``default``, local Spark, and a catalog persisted under ``<project>/.streamjoin``.

    Attributes:
        local_dir: Folder for the embedded warehouse and Derby metastore; relative paths
            are relative to the dbt project. Default ``.streamjoin``.
        state_root: Where streamjoin keeps its Delta state tables; a path (relative to
            the project) or a URI. Default ``<local_dir>/state``.
        storage_options: delta-rs storage options for the state root (``AWS_ENDPOINT_URL``,
            ``conditional_put``, ...): registered for every location under it, in the driver
            and in the tasks that read and write there. Default: the environment's.
    """

    method: SparkConnectionMethod = SparkConnectionMethod.SESSION
    host: Optional[str] = "localhost"
    schema: Optional[str] = "default"  # type: ignore[assignment]
    local_dir: Optional[str] = None
    state_root: Optional[str] = None
    storage_options: Optional[Dict[str, str]] = None

    def __post_init__(self) -> None:
        problems: List[str] = []
        if self.method != SparkConnectionMethod.SESSION:
            problems.append(
                f"method: '{self.method}' is not supported; streamjoin runs Spark in dbt's "
                "process. Set `method: session` (or omit it); to use a cluster set "
                "`server_side_parameters: {spark.master: ...}`."
            )
        if self.local_dir is not None and (not self.local_dir.strip() or _is_uri(self.local_dir)):
            problems.append(
                f"local_dir: {self.local_dir!r} must be a local folder path (the Derby "
                "metastore lives there). Omit it for `<project>/.streamjoin`."
            )
        if self.state_root is not None and not self.state_root.strip():
            problems.append(
                "state_root: must not be empty. Omit it for `<local_dir>/state`, or give a "
                "path or URI."
            )
        if self.storage_options is not None and (
            not isinstance(self.storage_options, dict)
            or not all(isinstance(v, (str, int, float, bool)) for v in self.storage_options.values())
        ):
            problems.append(
                "storage_options: must map delta-rs option names to values, e.g. "
                "`{AWS_REGION: eu-west-1, conditional_put: etag}`."
            )
        if problems:
            raise DbtConfigError(
                "Invalid `type: streamjoin` profile:\n  - " + "\n  - ".join(problems)
            )
        super().__post_init__()

    @property
    def type(self) -> str:
        return "streamjoin"

    def _connection_keys(self) -> Tuple[str, ...]:
        return ("method", "host", "schema", "local_dir", "state_root", "server_side_parameters")

    def session_plan(self, *, project_root: Path, app_name: str) -> SessionPlan:
        """The SparkSession plan, with relative paths resolved against ``project_root``."""
        local_dir = _resolve(self.local_dir or DEFAULT_LOCAL_DIR, base=project_root)
        state_root = (
            self.state_root
            if self.state_root is not None and _is_uri(self.state_root)
            else str(_resolve(self.state_root or str(local_dir / "state"), base=project_root))
        )
        filesystem.register(state_root, {k: str(v) for k, v in (self.storage_options or {}).items()})
        return SessionPlan.embedded(
            local_dir=local_dir,
            state_root=state_root,
            server_side_parameters=self.server_side_parameters,
            app_name=app_name,
        )


def _is_uri(value: str) -> bool:
    return "://" in value or value.startswith("file:")


def _resolve(path: str, *, base: Path) -> Path:
    resolved = Path(path).expanduser()
    return resolved if resolved.is_absolute() else (base / resolved).resolve()


#: Called once per connection manager, with the SparkSession, before its first statement runs.
SessionStartHook = Callable[["SparkSession"], None]


class StreamjoinConnectionManager(SparkConnectionManager):
    """dbt-spark's ``session`` connections, on a SparkSession this adapter configures.

    Spark starts lazily: only when a statement must run (``dbt parse``, ``compile`` and ``ls``
    start none). Before the first statement of an invocation, :attr:`on_session_start` runs
    once (the adapter publishes the project's sources there).
    """

    TYPE = "streamjoin"

    def __init__(self, profile: AdapterRequiredConfig, mp_context: SpawnContext) -> None:
        super().__init__(profile, mp_context)
        credentials = cast(StreamjoinCredentials, profile.credentials)
        project_root = Path(getattr(profile, "project_root", None) or os.getcwd())
        project_name = getattr(profile, "project_name", None) or project_root.name
        self.project_root = project_root
        self.session_plan = credentials.session_plan(
            project_root=project_root, app_name=f"dbt-streamjoin ({project_name})"
        )
        self.on_session_start: Optional[SessionStartHook] = None
        self._started = False
        self._start_lock = threading.RLock()
        session.configure(self.session_plan)

    def spark(self) -> "SparkSession":
        """The SparkSession, started on first use; :attr:`on_session_start` has run when this returns."""
        with self._start_lock:
            spark = self._open_session()
            if not self._started:
                self._started = True
                if self.on_session_start is not None:
                    self.on_session_start(spark)
            return spark

    def add_query(self, sql: str, *args: Any, **kwargs: Any) -> Tuple[Connection, Any]:
        self.spark()
        return super().add_query(sql, *args, **kwargs)

    @staticmethod
    def _open_session() -> "SparkSession":
        try:
            return session.get_or_create()
        except Exception as exc:
            raise FailedToConnectError(
                f"could not start the in-process SparkSession: {type(exc).__name__}: {exc}"
            ) from exc

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state != ConnectionState.OPEN:
            cls._open_session()
        return super().open(connection)

