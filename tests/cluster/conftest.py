"""A real standalone Spark cluster for this folder's tests: a master and two 1-core workers on
127.0.0.1 (`streamjoin.local_cluster`), and a SparkSession on it in a driver process (`driver.py`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, Iterator

import pytest

from jvm_options import SHORT_LIVED
from streamjoin import local_cluster
from streamjoin.local_cluster import LocalCluster, get_json
from streamjoin.processes import HOST, free_port

DRIVER = Path(__file__).with_name("driver.py")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: needs a standalone Spark cluster on this machine (tests/cluster)")


class Driver:
    """The driver process: one command at a time, each answered by one `@@ <json>` line."""

    def __init__(self, process: subprocess.Popen, ui_port: int, log: Path) -> None:
        self.process = process
        self.log = log
        self.ui = f"http://{HOST}:{ui_port}"
        self._lock = threading.Lock()
        started = self._answer(timeout=180)
        self.app_id: str = started["app_id"]
        self.master: str = started["master"]

    def call(self, op: str, *, timeout: float, **args: Any) -> dict[str, Any]:
        """Run a command; its answer. Raises with the driver's traceback when the command failed."""
        answer = self.submit(op, timeout=timeout, **args).result(timeout + 5)
        assert answer["ok"], f"driver command {op} failed:\n{answer['error']}"
        return answer

    def submit(self, op: str, *, timeout: float, **args: Any) -> Future:
        """Start a command; a future of its answer (`ok`, then the command's fields)."""
        future: Future = Future()

        def roundtrip() -> None:
            with self._lock:
                try:
                    self._send({"op": op, **args})
                    future.set_result(self._answer(timeout))
                except BaseException as exc:
                    future.set_exception(exc)

        threading.Thread(target=roundtrip, daemon=True).start()
        return future

    def executors(self) -> dict[str, dict[str, Any]]:
        """Executor id -> the application's REST record (`completedTasks`, `isActive`, `removeTime`, ...)."""
        return {e["id"]: e for e in get_json(f"{self.ui}/api/v1/applications/{self.app_id}/allexecutors")
                if e["id"] != "driver"}

    def stop(self) -> None:
        """End the session (stdin closed), else kill the process."""
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def _send(self, command: dict[str, Any]) -> None:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def _answer(self, timeout: float) -> dict[str, Any]:
        timer = threading.Timer(timeout, self.process.kill)  # a hung driver fails the test, not CI
        timer.start()
        try:
            for line in self.process.stdout:  # type: ignore[union-attr]
                if line.startswith("@@ "):
                    return json.loads(line[3:])
        finally:
            timer.cancel()
        raise RuntimeError(f"the driver exited (code {self.process.wait()}), or took over {timeout:.0f}s; "
                           f"its log {self.log}:\n" + "\n".join(self.log.read_text().splitlines()[-30:]))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master and two workers (1 core, 1g each) on free loopback ports; stopped by PID at the end."""
    with local_cluster.running(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g") as running:
        yield running


@pytest.fixture(scope="module")
def driver(cluster: LocalCluster) -> Iterator[Driver]:
    """A SparkSession on `cluster` (`local_session(master=...)`), its executors running this virtualenv's Python;
    its driver and executors are short-lived JVMs (`jvm_options`: they live for one test module)."""
    ui_port = free_port()
    log = cluster.home / "driver.log"
    env = {**os.environ, "STREAMJOIN_SPARK_MASTER": cluster.master_url, "SPARK_LOCAL_IP": HOST,
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "wb") as stderr:
        process = subprocess.Popen([sys.executable, str(DRIVER), str(ui_port), SHORT_LIVED], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=PROJECT_ROOT)
    try:
        session = Driver(process, ui_port, log)
        yield session
        session.stop()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
