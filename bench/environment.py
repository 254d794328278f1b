"""What the benchmark ran on: machine, software versions, Spark and Flink settings."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from typing import Any

import psutil

from bench.systems import FLINK_PYTHON, ROOT


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _command(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
        return (done.stdout or done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable: {error}"


def describe(spark: Any) -> dict[str, Any]:
    """The machine, the versions of every system, and the settings that matter."""
    versions = {name: metadata.version(name) for name in
                ("pyspark", "deltalake", "pyarrow", "numpy", "streamjoin", "matplotlib", "psutil")}
    versions["python"] = platform.python_version()
    versions["java"] = _command(["java", "-version"]).splitlines()[0]
    versions["apache-flink"] = _command([str(FLINK_PYTHON), "-c",
                                         "import importlib.metadata as m; print(m.version('apache-flink'))"])
    versions["git_commit"] = _command(["git", "rev-parse", "--short", "HEAD"])
    versions["git_dirty_files"] = len(_command(["git", "status", "--porcelain"]).splitlines())
    conf = spark.sparkContext.getConf()
    return {
        "machine": {"platform": platform.platform(), "cpu": _cpu_model(), "cores": os.cpu_count(),
                    "memory_bytes": psutil.virtual_memory().total},
        "versions": versions,
        "spark": {"master": conf.get("spark.master"), "cores": spark.sparkContext.defaultParallelism,
                  "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                  "driver_memory": conf.get("spark.driver.memory", "default (1g)")},
    }
