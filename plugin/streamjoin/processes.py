"""Local daemon processes (the test cluster's, the embedded metastore's): ports, liveness, stopping by PID."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        sock.settimeout(2.0)
        return sock.connect_ex((HOST, port)) == 0


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a child of ours that exited is reaped, so it does not linger as a zombie)."""
    if pid <= 0:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass  # not our child: ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def send_signal(pid: int, sig: signal.Signals) -> None:
    """Signal `pid` if it still exists."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `pid` to exit; whether it did."""
    deadline = time.time() + timeout
    while alive(pid):
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


def terminate(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if the process outlives `timeout`."""
    send_signal(pid, signal.SIGTERM)
    if not wait_exit(pid, timeout):
        send_signal(pid, signal.SIGKILL)
        wait_exit(pid, 5.0)


def tail(log: Path, lines: int = 20) -> str:
    """The last `lines` lines of a log file ("" if there is none)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])
