"""The embedded catalog's metastore service: one Hive catalog that every process of a project shares.

An embedded Derby metastore opens in one process only, so a second dbt process of the same project
(a parallel Airflow task, a manual `dbt run` beside a DAG run) failed with Derby's `XSDB6`. The dbt
adapter's embedded default therefore runs Hive's metastore service (from Spark's own jars) on
127.0.0.1 over the same Derby database, `<local_dir>/metastore_db`, and every process connects to it
over Thrift (`spark.hadoop.hive.metastore.uris`). The first process that needs it starts it; a small
supervisor process owns it and stops it once no process has used it for `idle_seconds()`
(`STREAMJOIN_METASTORE_IDLE_SECONDS`, default 600). `python -m streamjoin.metastore stop <local_dir>`
stops it at once.

This is the embedded default's own choice (processes on one machine that share `local_dir`); a
deployment names its own metastore in `server_side_parameters` instead.

Under `<local_dir>/metastore/`: `service.json` (the supervisor's and the service's PIDs, the port),
`clients/<pid>` (processes using it) and `lock` (held while one process starts or stops it). The
service logs to `<local_dir>/logs/metastore.log`.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from .errors import ConfigError, StreamJoinError
from .logs import LOG4J2_CONFIG
from .processes import HOST, alive, free_port, listening, tail, terminate

FOLDER = "metastore"
IDLE_ENV = "STREAMJOIN_METASTORE_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 600.0
#: Hive's metastore service (hive-metastore-2.3, which Spark ships and its built-in client speaks to).
MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
#: How many ports the supervisor tries: a service that exits before it listens lost its port to
#: another process between the port's choice and its own bind, and is started on a new one.
START_ATTEMPTS = 3


class MetastoreError(StreamJoinError):
    """The project's metastore service did not start."""


def uri(local_dir: Path, *, timeout: float = 300.0) -> str:
    """The Thrift URI of `local_dir`'s metastore service, started if none runs; this process counts as
    using it until it exits."""
    folder = local_dir / FOLDER
    _register(folder)
    with _locked(folder):
        service = _running(folder) or _start(local_dir, timeout)
    return f"thrift://{HOST}:{service['port']}"


def stop(local_dir: Path) -> bool:
    """Stop `local_dir`'s metastore service now; whether one was running."""
    folder = local_dir / FOLDER
    with _locked(folder):
        service = _read(folder)
        if service is None or not alive(service["pid"]):
            return False
        terminate(service["pid"], timeout=60.0)
        return True


def idle_seconds() -> float:
    """How long the service outlives its last client (`STREAMJOIN_METASTORE_IDLE_SECONDS`)."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    try:
        return float(raw) if raw else DEFAULT_IDLE_SECONDS
    except ValueError:
        raise ConfigError(f"{IDLE_ENV}={raw!r} is not a number of seconds") from None


def serve(local_dir: Path, idle: float) -> int:
    """The supervisor: run the service until it has had no client for `idle` seconds, or on SIGTERM."""
    folder = local_dir / FOLDER
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    service = _launched(local_dir, stopping)
    last_used = time.time()
    while not stopping and service.poll() is None:
        time.sleep(1.0)
        if _clients(folder):
            last_used = time.time()
            continue
        if time.time() - last_used < idle:
            continue
        with _locked(folder, wait=False) as held:
            if held and not _clients(folder):  # no process is connecting or connected: stop under the lock
                _shut_down(folder, service)
                return 0
    # never waits for the lock: the process that holds it may be the starter waiting for this one
    with _locked(folder, wait=False):
        _shut_down(folder, service)
    return 0 if stopping else 1


def _launched(local_dir: Path, stopping: list[int]) -> subprocess.Popen:
    """The service, started on a free port, and on a new one while it exits before it listens (at
    most `START_ATTEMPTS` ports); its PID and port are in `service.json` from its start."""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        service = subprocess.Popen(_java_command(local_dir, port), stdin=subprocess.DEVNULL, cwd=local_dir)
        _write(local_dir / FOLDER, {"pid": os.getpid(), "service_pid": service.pid, "port": port,
                                    "started": time.time()})
        while not stopping and service.poll() is None and not listening(port):
            time.sleep(0.5)
        if stopping or service.poll() is None:
            break
    return service


def _shut_down(folder: Path, service: subprocess.Popen) -> None:
    terminate(service.pid, timeout=30.0)
    if (_read(folder) or {}).get("pid") == os.getpid():  # (not a newer supervisor's)
        (folder / "service.json").unlink(missing_ok=True)


def _start(local_dir: Path, timeout: float) -> dict[str, Any]:
    log = local_dir / "logs" / "metastore.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    package_root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    with open(log, "ab") as out:
        supervisor = subprocess.Popen([sys.executable, "-m", "streamjoin.metastore", "serve", str(local_dir)],
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                      cwd=local_dir, start_new_session=True)
    deadline = time.time() + timeout
    while True:
        service = _running(local_dir / FOLDER)
        if service is not None and service["pid"] == supervisor.pid:
            return service
        if not alive(supervisor.pid):
            raise MetastoreError(f"the metastore service of {local_dir} did not start; its log ({log}) ends:\n"
                                 f"{tail(log)}")
        if time.time() > deadline:
            terminate(supervisor.pid)
            raise MetastoreError(f"the metastore service of {local_dir} was not up after {timeout:.0f}s "
                                 f"(log: {log})")
        time.sleep(0.5)


def _java_command(local_dir: Path, port: int) -> list[str]:
    from pyspark.find_spark_home import _find_spark_home

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    hive = {"javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={local_dir / 'metastore_db'};create=true",
            "hive.metastore.warehouse.dir": str(local_dir / "warehouse"),
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false"}
    # Hive configures its own (asynchronous) logging unless log4j.configurationFile is set.
    return [java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dderby.system.home={local_dir}",
            f"-Dlog4j.configurationFile={LOG4J2_CONFIG.as_uri()}", "-Dstreamjoin.log.level=warn",
            "-cp", os.path.join(_find_spark_home(), "jars", "*"), MAIN_CLASS, "-p", str(port),
            *[arg for key, value in hive.items() for arg in ("--hiveconf", f"{key}={value}")]]


def _running(folder: Path) -> dict[str, Any] | None:
    service = _read(folder)
    if service is None or not (alive(service["pid"]) and alive(service["service_pid"])):
        return None
    return service if listening(service["port"]) else None


def _read(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "service.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write(folder: Path, service: dict[str, Any]) -> None:
    staging = folder / f"service.json.{os.getpid()}"
    staging.write_text(json.dumps(service))
    staging.replace(folder / "service.json")


def _register(folder: Path) -> None:
    clients = folder / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    marker = clients / str(os.getpid())
    marker.touch()
    atexit.register(lambda: marker.unlink(missing_ok=True))


def _clients(folder: Path) -> list[int]:
    """The live processes registered as using the service (markers of dead ones are removed)."""
    live = []
    for marker in (folder / "clients").glob("*"):
        if marker.name.isdigit() and alive(int(marker.name)):
            live.append(int(marker.name))
        else:
            marker.unlink(missing_ok=True)
    return live


@contextlib.contextmanager
def _locked(folder: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold `folder`'s lock (whether it was got: without `wait`, False when another process holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: list[str]) -> int:
    """`serve <local_dir>` (the supervisor, started by `uri`) or `stop <local_dir>`."""
    if len(argv) != 2 or argv[0] not in ("serve", "stop"):
        print("usage: python -m streamjoin.metastore {serve,stop} <local_dir>", file=sys.stderr)
        return 2
    local_dir = Path(argv[1]).resolve()
    if argv[0] == "serve":
        return serve(local_dir, idle_seconds())
    print("stopped" if stop(local_dir) else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
