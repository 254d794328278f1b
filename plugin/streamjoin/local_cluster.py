"""A standalone Spark cluster on this machine (a master and workers on 127.0.0.1), for tests and demos.

    with local_cluster.running(Path("/tmp/cluster")) as cluster:
        spark = local_session(master=cluster.master_url)

The daemons are started with pyspark's own `spark-class` (no separate Spark install), on free
loopback ports, with their logs, work and scratch folders under `home`; they are stopped by PID.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .processes import HOST, alive, free_port, send_signal, tail, wait_exit

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class ClusterError(RuntimeError):
    """Raised when the cluster's daemons do not come up."""


def spark_class() -> Path:
    """pyspark's `bin/spark-class` launcher."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def get_json(url: str, timeout: float = 30.0) -> Any:
    """The JSON document at `url` (a master's `/json/`, a driver's REST API)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


@dataclass(frozen=True)
class Daemon:
    """One daemon process: its role, PID and the log file its output goes to."""

    role: str
    pid: int
    log: Path


@dataclass(frozen=True)
class LocalCluster:
    """A running cluster: where its master listens and the daemons' PIDs.

    Attributes:
        home: Folder of the daemons' logs, the workers' work dirs and scratch space.
        master_url: `spark://127.0.0.1:<port>`, the `spark.master` of a session on it.
        master_ui: `http://127.0.0.1:<port>`, the master's web UI (`/json/` is its status).
        worker_urls: The workers' RPC addresses (`spark://Worker@127.0.0.1:<port>`).
        daemons: The master first, then the workers.
    """

    home: Path
    master_url: str
    master_ui: str
    worker_urls: tuple[str, ...]
    daemons: tuple[Daemon, ...]

    def status(self) -> dict[str, Any]:
        """The master's JSON status: workers (`state`, `coresused`), active and completed applications."""
        return get_json(f"{self.master_ui}/json/")

    def alive_workers(self) -> list[dict[str, Any]]:
        """The workers the master sees as alive."""
        return [w for w in self.status()["workers"] if w["state"] == "ALIVE"]

    def executor_pids(self, app_id: str | None = None) -> dict[str, int]:
        """Executor id -> PID of this cluster's executor processes (of one application, if given)."""
        found = {}
        for pid, args in _processes():
            if EXECUTOR_CLASS not in args or not any(url in args for url in self.worker_urls):
                continue
            if app_id is None or _option(args, "--app-id") == app_id:
                found[_option(args, "--executor-id") or str(pid)] = pid
        return found

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the workers (which stop their executors), then the master; SIGKILL what outlives `timeout`."""
        for daemon in reversed(self.daemons):
            send_signal(daemon.pid, signal.SIGTERM)
        deadline = time.time() + timeout
        for daemon in reversed(self.daemons):
            wait_exit(daemon.pid, max(0.0, deadline - time.time()))
        for pid in [d.pid for d in self.daemons] + list(self.executor_pids().values()):
            if alive(pid):
                send_signal(pid, signal.SIGKILL)
                wait_exit(pid, 5.0)


def start(home: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
          timeout: float = 90.0) -> LocalCluster:
    """Start a master and `workers` workers (each `cores` cores, `memory` for executors) on free loopback
    ports; return once the master sees every worker alive. On failure every daemon started is stopped."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": HOST, "SPARK_DAEMON_MEMORY": "256m",
           "SPARK_LOCAL_DIRS": str(home / "local"),
           "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false", "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    env.pop("SPARK_HOME", None)  # spark-class finds pyspark's own
    port, ui_port = free_port(), free_port()
    master_url, master_ui = f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}"
    daemons = [_launch("master", home, env, "org.apache.spark.deploy.master.Master",
                       "--host", HOST, "--port", str(port), "--webui-port", str(ui_port))]
    worker_urls = []
    cluster = LocalCluster(home, master_url, master_ui, (), tuple(daemons))
    try:
        for i in range(workers):
            worker_port = free_port()
            worker_urls.append(f"spark://Worker@{HOST}:{worker_port}")
            daemons.append(_launch(f"worker{i}", home, env, "org.apache.spark.deploy.worker.Worker", master_url,
                                   "--host", HOST, "--port", str(worker_port), "--webui-port", str(free_port()),
                                   "--cores", str(cores), "--memory", memory,
                                   "--work-dir", str(home / f"worker{i}" / "work")))
        cluster = LocalCluster(home, master_url, master_ui, tuple(worker_urls), tuple(daemons))
        _await_workers(cluster, workers, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running(home: Path, **options: Any) -> Iterator[LocalCluster]:
    """A cluster for the duration of the block (`start`'s options); stopped also when the block fails."""
    cluster = start(home, **options)
    try:
        yield cluster
    finally:
        cluster.stop()


def _launch(role: str, home: Path, env: dict[str, str], main_class: str, *args: str) -> Daemon:
    log = home / f"{role}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(spark_class()), main_class, *args], stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=home, start_new_session=True)
    return Daemon(role, process.pid, log)


def _await_workers(cluster: LocalCluster, workers: int, timeout: float) -> None:
    deadline = time.time() + timeout
    while True:
        dead = [d for d in cluster.daemons if not alive(d.pid)]
        if dead:
            raise ClusterError(f"the {dead[0].role} exited: {tail(dead[0].log)}")
        with contextlib.suppress(OSError, ValueError):
            if len(cluster.alive_workers()) == workers:
                return
        if time.time() > deadline:
            raise ClusterError(f"{workers} workers not alive after {timeout:.0f}s; master log: "
                               f"{tail(cluster.daemons[0].log)}")
        time.sleep(0.5)


def _processes() -> Iterator[tuple[int, str]]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    for line in listing.splitlines():
        pid, _, args = line.strip().partition(" ")
        yield int(pid), args


def _option(args: str, name: str) -> str | None:
    words = args.split()
    return words[words.index(name) + 1] if name in words[:-1] else None


