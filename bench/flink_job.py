"""Run benchmark queries in PyFlink over JSON files; print one JSON line of timings per job.

Runs with the Flink virtualenv's interpreter, never the main one::

    .venv-flink/bin/python bench/flink_job.py < job.json

Each job of the JSON list on stdin names the SQL, the inputs (a folder of JSON-lines files each, in
``debezium-json`` for changelogs or plain ``json`` for insert-only streams, with the
event-time column for a watermark and the primary key a versioned table needs) and an output folder with the result's columns. The result is written as a
``debezium-json`` changelog (``op`` ``c`` adds ``after``, ``d`` retracts ``before``), so
the caller can rebuild the final multiset and checksum it. Flink runs in streaming
mode; sources read with parallelism 1 (one file each, so every input keeps its order).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _ddl(table: str, columns: list[list[str]], options: dict[str, str],
         event_time: str | None, primary_key: list[str] | None = None) -> str:
    cols = [f"`{name}` {flink_type}" for name, flink_type in columns]
    if primary_key:
        cols.append(f"PRIMARY KEY ({', '.join(f'`{k}`' for k in primary_key)}) NOT ENFORCED")
    if event_time:
        cols.append(f"WATERMARK FOR `{event_time}` AS `{event_time}`")
    opts = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
    return f"CREATE TABLE `{table}` ({', '.join(cols)}) WITH ({opts})"


def _source_options(spec: dict[str, Any]) -> dict[str, str]:
    fmt = spec["format"]
    options = {"connector": "filesystem", "path": spec["path"], "format": fmt,
               "source.path.regex-pattern": ".*\\.json"}
    prefix = "debezium-json" if fmt == "debezium-json" else "json"
    options[f"{prefix}.timestamp-format.standard"] = "SQL"
    return options


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Create the tables, run ``INSERT INTO result <sql>`` to completion, time it."""
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    started = time.perf_counter()
    conf = Configuration()
    conf.set_string("parallelism.default", str(job["parallelism"]))
    conf.set_string("rest.bind-port", "0")
    conf.set_string("taskmanager.memory.process.size", job.get("memory", "2g"))
    settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build()
    t_env = TableEnvironment.create(settings)
    for key, value in job.get("options", {}).items():
        t_env.get_config().set(key, value)
    for spec in job["inputs"]:
        t_env.execute_sql(_ddl(spec["name"], spec["columns"], _source_options(spec),
                               spec.get("event_time"), spec.get("primary_key")))
    query = t_env.sql_query(job["sql"])
    sink = {"connector": "filesystem", "path": job["output"], "format": "debezium-json",
            "debezium-json.timestamp-format.standard": "SQL"}
    t_env.execute_sql(_ddl("__result", job["result_columns"], sink, None))
    ready = time.perf_counter()
    query.execute_insert("__result").wait()
    finished = time.perf_counter()
    return {"setup_seconds": ready - started, "job_seconds": finished - ready}


def main() -> int:
    """Run every job of the JSON list on stdin in turn (one JVM); one report line each."""
    ok = True
    for job in json.load(sys.stdin):
        try:
            report = {"name": job["name"], "ok": True, **run(job)}
        except Exception as error:  # report Flink's message to the caller, not a traceback
            lines = [ln for ln in str(error).splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
            report = {"name": job["name"], "ok": False, "error": "\n".join(lines[:15]) or type(error).__name__}
        ok &= report["ok"]
        print(json.dumps(report), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
