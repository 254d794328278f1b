"""The embedded catalog's metastore service: one Hive catalog that every process of a project shares.

An embedded Derby metastore opens in one process only, so a second dbt process of the same project
(a parallel Airflow task, a manual `dbt run` beside a DAG run) failed with Derby's `XSDB6`. The dbt
adapter's embedded default therefore runs Hive's metastore service (from Spark's own jars), bound to
127.0.0.1 only (`metastore_server`), over the same Derby database, `<local_dir>/metastore_db`, and
every process connects to it over Thrift (`spark.hadoop.hive.metastore.uris`). The first process that
needs it starts it; a small supervisor process owns it and stops it once no process has used it for
`idle_seconds()` (`STREAMJOIN_METASTORE_IDLE_SECONDS`, default 600); the service ends with its
supervisor. `python -m streamjoin.metastore stop <local_dir>` stops it at once.

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

from . import metastore_server
from .errors import ConfigError
from .logs import LOG4J2_CONFIG
from .metastore_server import MetastoreError
from .processes import HOST, alive, listening, tail, terminate

FOLDER = "metastore"
IDLE_ENV = "STREAMJOIN_METASTORE_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 600.0


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
    server = _launched(local_dir)
    last_used = time.time()
    while not stopping and server.running():
        time.sleep(1.0)
        if _clients(folder):
            last_used = time.time()
            continue
        if time.time() - last_used < idle:
            continue
        with _locked(folder, wait=False) as held:
            if held and not _clients(folder):  # no process is connecting or connected: stop under the lock
                _shut_down(folder, server)
                return 0
    # never waits for the lock: the process that holds it may be the starter waiting for this one
    with _locked(folder, wait=False):
        _shut_down(folder, server)
    return 0 if stopping else 1


def _launched(local_dir: Path) -> metastore_server.MetastoreServer:
    """The service, listening; its PID and port are in `service.json` from here on."""
    server = metastore_server.start(_hive_settings(local_dir), _java_options(local_dir), cwd=local_dir)
    _write(local_dir / FOLDER, {"pid": os.getpid(), "service_pid": server.process.pid, "port": server.port,
                                "started": time.time()})
    return server


def _shut_down(folder: Path, server: metastore_server.MetastoreServer) -> None:
    server.stop()
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


def _hive_settings(local_dir: Path) -> dict[str, str]:
    """The catalog's Derby database and warehouse, both in `local_dir`."""
    return {"javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={local_dir / 'metastore_db'};create=true",
            "hive.metastore.warehouse.dir": str(local_dir / "warehouse"),
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false"}


def _java_options(local_dir: Path) -> list[str]:
    # Hive configures its own (asynchronous) logging unless log4j.configurationFile is set.
    return ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dderby.system.home={local_dir}",
            f"-Dlog4j.configurationFile={LOG4J2_CONFIG.as_uri()}", "-Dstreamjoin.log.level=warn"]


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
        try:
            return serve(local_dir, idle_seconds())
        except MetastoreError as exc:
            print(exc, file=sys.stderr)
            return 1
    print("stopped" if stop(local_dir) else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
