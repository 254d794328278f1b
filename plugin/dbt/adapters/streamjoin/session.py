"""The one in-process SparkSession that dbt's SQL and Python models share.

A SparkSession is a process-wide singleton, so this module mirrors it: the connection
manager registers a :class:`SessionPlan` with :func:`configure` (cheap, no JVM), and the
first connection that opens calls :func:`get_or_create`, which starts Spark from the plan.
Every later ``SparkSession.builder.getOrCreate()`` (dbt-spark's cursor, Python model code)
then returns that same session.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtInternalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = AdapterLogger("Streamjoin")

#: Master used when the profile's ``server_side_parameters`` name none and
#: ``STREAMJOIN_SPARK_MASTER`` (as for ``streamjoin.session.local_session``) is not set.
DEFAULT_MASTER = "local[*]"
METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


@dataclass(frozen=True)
class SessionPlan:
    """What the in-process SparkSession is started with.

    Attributes:
        conf: Spark configuration, profile ``server_side_parameters`` already applied on
            top of the embedded defaults.
        local_dir: Project-local folder holding the warehouse, the metastore's database and logs.
        state_root: Where streamjoin keeps its Delta state tables (a path or a URI).
    """

    conf: Mapping[str, str]
    local_dir: Path
    state_root: str
    app_name: str = field(default="dbt-streamjoin")

    @classmethod
    def embedded(
        cls,
        *,
        local_dir: Path,
        state_root: str,
        server_side_parameters: Mapping[str, str],
        app_name: str = "dbt-streamjoin",
    ) -> SessionPlan:
        """Local Spark with a persistent Hive catalog under ``local_dir``.

        The defaults give a local master, no UI, adaptive shuffle sizes, a warehouse
        in ``local_dir/warehouse`` and the project's metastore service
        (``streamjoin.metastore``: one catalog in ``local_dir/metastore_db`` that every
        dbt process of the project shares). Any key in ``server_side_parameters`` wins, so
        the same project can point ``spark.master``, the warehouse or the metastore
        (``spark.hadoop.hive.metastore.uris``) elsewhere.

        >>> plan = SessionPlan.embedded(local_dir=Path("/p/.streamjoin"),
        ...     state_root="/p/.streamjoin/state", server_side_parameters={})
        >>> plan.conf["spark.sql.warehouse.dir"], plan.conf["spark.sql.shuffle.partitions"]
        ('/p/.streamjoin/warehouse', '200')
        """
        from streamjoin.session import DEFAULTS, LOCAL_DEFAULTS

        defaults = {
            **DEFAULTS,
            "spark.master": os.environ.get("STREAMJOIN_SPARK_MASTER") or DEFAULT_MASTER,
            "spark.app.name": app_name,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(local_dir / "warehouse"),
            # Hive's client makes a folder per session for resources it downloads (none here) and
            # never removes it: by default a new `/tmp/<uuid>_resources` per dbt process
            "spark.hadoop.hive.downloaded.resources.dir": str(local_dir / "hive-resources"),
        }
        conf = {**defaults, **server_side_parameters}
        if conf["spark.master"].startswith("local"):
            conf = {**LOCAL_DEFAULTS, **conf}
        return cls(
            conf=MappingProxyType(conf),
            local_dir=local_dir,
            state_root=state_root,
            app_name=app_name,
        )

    @property
    def project_metastore(self) -> bool:
        """Whether the session uses the project's metastore service: a Hive catalog for which
        ``server_side_parameters`` name no metastore of their own (service or database)."""
        return self.conf.get("spark.sql.catalogImplementation") == "hive" and not (
            {METASTORE_URIS, "spark.hadoop.javax.jdo.option.ConnectionURL"} & self.conf.keys())


_lock = threading.Lock()
_plan: Optional[SessionPlan] = None
_session: Optional["SparkSession"] = None


def configure(plan: SessionPlan) -> None:
    """Register the plan the process's SparkSession will be started with."""
    global _plan
    with _lock:
        if _session is not None and _plan is not None and plan.conf != _plan.conf:
            logger.warning(
                "A SparkSession is already running in this process; its configuration "
                "is kept and the new profile's Spark settings are ignored. Run dbt in a "
                "new process to change them."
            )
        _plan = plan


def get_or_create() -> "SparkSession":
    """The process's SparkSession, started from the configured plan on first use."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        if _plan is None:
            raise DbtInternalError("streamjoin: session.get_or_create() before configure()")
        _session = _start(_plan)
        return _session


def _start(plan: SessionPlan) -> "SparkSession":
    # Python workers must run the interpreter dbt runs in, with the same packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    plan.local_dir.mkdir(parents=True, exist_ok=True)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    conf = _with_log_settings(plan)
    if plan.project_metastore:
        from streamjoin import metastore

        conf[METASTORE_URIS] = metastore.uri(plan.local_dir)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if conf.get("spark.sql.catalogImplementation") == "hive":
        builder = builder.enableHiveSupport()
    logger.debug(f"Starting SparkSession: {conf}")
    spark = builder.getOrCreate()
    from streamjoin import warm_up

    warm_up.start(spark)  # while dbt reads its relations and compiles the first model

    warehouse = spark.conf.get("spark.sql.warehouse.dir", None)
    wanted = plan.conf.get("spark.sql.warehouse.dir")
    if wanted and warehouse and warehouse.removeprefix("file:").rstrip("/") != wanted.rstrip("/"):
        logger.warning(
            f"Reusing a SparkSession started elsewhere in this process: its warehouse is "
            f"{warehouse}, not {wanted}."
        )
    return spark


#: File (under ``<local_dir>/logs``) Spark's JVM logs to unless asked to log to the console.
SPARK_LOG = "spark.log"


def _with_log_settings(plan: SessionPlan) -> dict[str, str]:
    """The plan's Spark conf with its log settings (see ``streamjoin.logs``), Spark's JVM started.

    By default nothing from Spark, Py4J or Hive reaches dbt's output: the JVM's stderr (log4j
    at WARN, and the JVM's own warnings) goes to ``<local_dir>/logs/spark.log``. ``dbt --debug``
    keeps it on the console; ``STREAMJOIN_LOG_LEVEL`` does too, at the level it names.
    """
    from streamjoin import logs
    from streamjoin.session import driver_java_options

    requested = logs.requested_level()
    verbose = requested is not None or _dbt_debug()
    level = requested or "WARN"
    logs.quiet_python(level if verbose else "OFF")
    key = "spark.driver.extraJavaOptions"
    conf = {**plan.conf, key: driver_java_options(level, plan.conf.get(key))}
    if not verbose:
        log_file = plan.local_dir / "logs" / SPARK_LOG
        logs.launch_jvm(conf, stderr=log_file)
        logger.debug(f"Spark's log: {log_file}")
    return conf


def _dbt_debug() -> bool:
    """Whether dbt runs with ``--debug`` (or ``--log-level debug``)."""
    from dbt.flags import get_flags

    flags = get_flags()
    return bool(getattr(flags, "DEBUG", False)) or str(getattr(flags, "LOG_LEVEL", "")).lower() == "debug"
