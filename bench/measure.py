"""Measuring helpers: peak memory of a process tree, load average, folder sizes, a profiler.

``Profiler`` wraps streamjoin functions (by patching their module or class attribute)
and records the *exclusive* wall time spent in each, so nested phases do not count
twice; ``spark_job_seconds`` adds the time Spark spent running jobs in a window, read
from the driver's status store, and ``catalyst_seconds`` the time Catalyst's rules planned
queries. ``CpuUse`` splits the CPU time of the driver and its JVM by what used it (on a
2-core machine the JIT compilers take a core's worth while a warm session's runs go on).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def folder_bytes(path: str) -> int:
    """Total size of the files under ``path`` (0 if it does not exist)."""
    size = 0
    for folder, _, files in os.walk(path):
        size += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return size


class PeakMemory:
    """Samples the resident memory of a process and its children every ``interval`` s."""

    def __init__(self, pid: int | None = None, interval: float = 0.25) -> None:
        self.pid = pid or os.getpid()
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> int:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())


class Profiler:
    """Exclusive wall time per wrapped function, accumulated until ``take()``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # per active call: [child seconds]
        self._lock = threading.Lock()
        self._patched: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        """Time ``owner.attr`` under ``label`` (kept until ``restore()``)."""
        original = getattr(owner, attr)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return original(*args, **kwargs)
            self._stack.append([0.0])
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                (children,) = self._stack.pop()
                with self._lock:
                    self.seconds[label] += elapsed - children
                    self.calls[label] += 1
                if self._stack:
                    self._stack[-1][0] += elapsed

        setattr(owner, attr, timed)
        self._patched.append((owner, attr, original))

    def restore(self) -> None:
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched.clear()

    def take(self) -> dict[str, dict[str, float]]:
        """The phases recorded since the last ``take()``, and reset."""
        out = {k: {"seconds": round(v, 3), "calls": self.calls[k]} for k, v in self.seconds.items()}
        self.seconds.clear()
        self.calls.clear()
        return out


def streamjoin_profiler() -> Profiler:
    """A profiler over the phases of ``streamjoin.run_once``."""
    from streamjoin.storage import delta_log, state, writes
    from streamjoin.runtime import executor, run
    from streamjoin.operators import regular

    profiler = Profiler()
    for owner, attr, label in (
        (run.Run, "prepare", "plan run: read Delta logs, offsets"),
        (run.Run, "read_inputs", "read input changes"),
        (run.Run, "kept_changes", "validate + keep input changes"),
        (executor.Executor, "output", "join: build plan"),
        (regular.RegularJoin, "run", "join: regular operator"),
        (state.StateTable, "read", "state: read touched keys"),
        (executor.Executor, "stage_state", "state: stage appends"),
        (run, "stage_changelog", "changelog table: stage"),
        (run, "stage_result", "result table: stage"),
        (writes.RunWriter, "run", "write pass: every table's files, one Spark job"),
        (delta_log, "write_small", "write small files (run log)"),
        (delta_log, "commit", "Delta commits"),
        (run.Run, "execute", "other driver work in run_once"),
    ):
        profiler.wrap(owner, attr, label)
    return profiler


def catalyst_seconds(spark: Any) -> float:
    """Seconds Catalyst's rules (analysis, optimization, adaptive re-planning) have run in the driver's
    JVM so far, all threads together: read before and after a run, the planning part of its driver time."""
    return spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.getCurrentMetrics().time() / 1e9


#: The driver JVM's threads by what they do, by a part of their names (Linux keeps their first 15 characters).
JVM_THREADS = (("CompilerThre", "jit"), ("Executor task", "tasks"), ("Thread-", "calls"))
#: Where a run's CPU time goes (`CpuUse`), and how the report names each part: the driver's Python (with
#: delta-rs), the driver JVM's threads that answer its Py4J calls (building, analysing and planning queries),
#: the JIT compilers, task threads, Spark's Python workers, and the rest of the JVM (GC, scheduler, threads
#: that ended).
CPU_PARTS = {"python": "driver Python (with delta-rs)", "calls": "JVM: answering Py4J calls",
             "jit": "JVM: JIT compilers", "tasks": "JVM: tasks", "workers": "Python workers",
             "jvm_other": "JVM: other (GC, scheduler)"}


def _thread_times(pid: int) -> dict[int, tuple[str, float]]:
    """{thread id: (name, CPU seconds)} of a live process's threads, exact to the nanosecond (the scheduler's
    own run time, not /proc's 10 ms ticks, whose rounding adds up over a JVM's many threads)."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text()
            threads[int(task.name)] = (name, int((task / "schedstat").read_text().split()[0]) / 1e9)
        except (FileNotFoundError, ProcessLookupError):  # the thread ended since
            continue
    return threads


@dataclass(frozen=True)
class _Reading:
    """One reading of a driver and its JVM. The JVM's own and reaped children's times are read before and
    after the rest, so that a block's figures take in whatever ran while the rest was read."""

    python: float
    jvm: tuple[float, float]  # the JVM's own CPU seconds, read first and last
    reaped: tuple[float, float]  # the JVM's children that it reaped: their CPU seconds, read first and last
    threads: dict[int, tuple[str, float]]  # the JVM's threads: {id: (name, seconds)}
    workers: dict[tuple[int, float], tuple[int, float]]  # its descendants: {(pid, start): (parent pid, seconds)}


class CpuUse:
    """CPU seconds the driver and its JVM used inside the block, split as `CPU_PARTS` (`parts`; empty
    where /proc cannot say, as off Linux). Only a local master's tasks run in the driver's JVM."""

    def __init__(self, spark: Any) -> None:
        self.pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.parts: dict[str, float] = {}
        self._before: _Reading | None = None

    def _sample(self) -> _Reading | None:
        """One reading of every figure, or None if /proc cannot say."""
        try:
            jvm = psutil.Process(self.pid)
            first = jvm.cpu_times()
            threads = _thread_times(self.pid)
            workers = {}
            for child in jvm.children(recursive=True):
                with child.oneshot():
                    workers[(child.pid, child.create_time())] = (child.ppid(), sum(child.cpu_times()[:2]))
            last = jvm.cpu_times()
        except (OSError, psutil.Error):
            return None
        times = os.times()
        return _Reading(times.user + times.system, (first.user + first.system, last.user + last.system),
                        (first.children_user + first.children_system, last.children_user + last.children_system),
                        threads, workers)

    def __enter__(self) -> CpuUse:
        self._before = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        after, before = self._sample(), self._before
        if after is None or before is None:
            return
        parts = dict.fromkeys(CPU_PARTS, 0.0)
        parts["python"] = after.python - before.python
        for tid, (name, used) in after.threads.items():  # a thread that ended stays in the JVM's total: jvm_other
            part = next((part for prefix, part in JVM_THREADS if prefix in name), None)
            if part is not None:
                name0, used0 = before.threads.get(tid, (name, 0.0))
                same = name0 == name and used0 <= used  # else a new thread took an ended one's id
                parts[part] += used - (used0 if same else 0.0)
        parts["jvm_other"] = after.jvm[1] - before.jvm[0] - parts["jit"] - parts["tasks"] - parts["calls"]
        # Python workers: each one's time in the block; one that the JVM reaped meanwhile left all its time to
        # the JVM's reaped children's. The daemon ignores SIGCHLD, so a worker it forked (and stopped when idle
        # for a minute) takes the time it used in the block with it when it exits.
        parts["workers"] = after.reaped[1] - before.reaped[0] + sum(
            used - before.workers.get(key, (parent, 0.0))[1] for key, (parent, used) in after.workers.items()) - sum(
            used for key, (parent, used) in before.workers.items() if key not in after.workers and parent == self.pid)
        self.parts = {k: round(v, 3) for k, v in parts.items()}


def spark_job_seconds(spark: Any, since_ms: int, until_ms: int) -> tuple[int, float]:
    """How many Spark jobs ran in ``[since_ms, until_ms]`` and the union of their run time."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    spans = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        submitted, completed = job.submissionTime(), job.completionTime()
        if submitted.isEmpty() or completed.isEmpty():
            continue
        start, end = submitted.get().getTime(), completed.get().getTime()
        if start >= since_ms and end <= until_ms:
            spans.append((start, end))
    busy, edge = 0, 0
    for start, end in sorted(spans):
        start = max(start, edge)
        if end > start:
            busy += end - start
            edge = end
    return len(spans), busy / 1000


@contextmanager
def wall() -> Iterator[Callable[[], float]]:
    """``with wall() as elapsed: ...; elapsed()`` gives the seconds since entering."""
    started = time.perf_counter()
    ended: list[float] = []
    yield lambda: (ended[0] if ended else time.perf_counter()) - started
    ended.append(time.perf_counter())
