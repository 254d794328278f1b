"""Run the example project through its Airflow DAG for a few intervals and show what every run did.

    python scripts/demo_airflow.py [--batches 3] [--local-dir .streamjoin/demo_airflow] [--summary out.json] [--rows]
                                   [--executor local] [--select MODEL ...]

Starts from empty state (the folder is wiped) with a throwaway Airflow home (SQLite) inside
it, loads the DAG file (which parses the dbt project), then per batch: append the batch to every input
(scripts/load_batch.py) and run the DAG `streamjoin_example` for the next 15-minute interval
with `dag.test()` (tasks in this process: one SparkSession for all), printing per model run the
changes it consumed and the changelog it emitted (`--rows`: the rows too), and per DAG run the
outcome of the dbt tests; then a summary per batch and where to look next. `--executor local` runs
the tasks under Airflow's LocalExecutor instead (each in a process of its own, two at a time, through
an Airflow API server this script starts on 127.0.0.1 and stops). Spark's, dbt's and
Airflow's own logs stay off the console unless STREAMJOIN_LOG_LEVEL is set (Spark's go to
<local-dir>/logs/spark.log).
`--select` runs only the named models (or tag:<tag>) and their tests. `--summary` writes every DAG
run's task states, spans and test outcomes as JSON (the tests read it).
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import multiprocessing
import os
import secrets
import shutil
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from streamjoin import logs, metastore, processes

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_report  # noqa: E402  (reads the models' run logs and changelogs)
import load_batch  # noqa: E402

PROJECT = load_batch.PROJECT
DAG_FILE = load_batch.REPO / "dags" / "streamjoin_example.py"
INTERVAL = dt.timedelta(minutes=15)


def prepare_environment(local_dir: Path, executor: str, select: list[str]) -> None:
    """Point the project, dbt and a fresh Airflow home (SQLite) at `local_dir`, and the DAG file at the
    `select`ed models; before Airflow is imported. (Under the LocalExecutor, `dag.test()` warns each
    time it polls tasks that other processes run: Airflow's own log shows errors only.)"""
    os.environ.update({
        "STREAMJOIN_LOCAL_DIR": str(local_dir),
        "STREAMJOIN_SELECT": " ".join(select),
        "AIRFLOW_HOME": str(local_dir / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FILE.parent),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "false",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "JAVA_TOOL_OPTIONS": os.environ.get("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"),
    })
    if not os.environ.get(logs.ENV_VAR):  # the demo prints its own report; STREAMJOIN_LOG_LEVEL brings the rest
        os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "ERROR" if executor == "local" else "WARNING")
        os.environ.setdefault("DBT_QUIET", "true")
        # Airflow's dag.test() imports Starlette's test client, which warns about its own dependency
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")


@contextmanager
def local_executor(local_dir: Path, parallelism: int = 2) -> Iterator[None]:
    """Airflow's LocalExecutor for the block: its settings, and the API server its task processes
    report to, on a free 127.0.0.1 port (stopped by PID at the end; its log in the Airflow home).

    Its workers are spawned, not forked: this process wrote the batches with delta-rs, whose runtime
    a forked child cannot use (a scheduler, which never touches delta-rs, may fork them)."""
    multiprocessing.set_start_method("spawn", force=True)
    # the executor's queues are left to the resource tracker, which would warn at exit
    os.environ["PYTHONWARNINGS"] = "ignore:resource_tracker:UserWarning"
    port = processes.free_port()
    os.environ.update({
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{processes.HOST}:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
    })
    log = local_dir / "airflow" / "api-server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        server = subprocess.Popen([str(Path(sys.executable).with_name("airflow")), "api-server", "--host",
                                   processes.HOST, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not processes.listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Airflow's API server did not start:\n{processes.tail(log)}")
            time.sleep(0.5)
        yield
    finally:
        processes.terminate(server.pid)


def load_dag_module():
    spec = importlib.util.spec_from_file_location("streamjoin_example_dag", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--local-dir", type=Path, default=PROJECT / ".streamjoin" / "demo_airflow")
    parser.add_argument("--summary", type=Path, default=None)
    parser.add_argument("--rows", action="store_true", help="also print every changelog row each run emitted")
    parser.add_argument("--executor", choices=("in-process", "local"), default="in-process",
                        help="run the tasks in this process (dag.test) or under Airflow's LocalExecutor")
    parser.add_argument("--select", nargs="+", default=[], metavar="MODEL",
                        help="run only these models (names, or tag:<tag>) and the dbt tests of them")
    args = parser.parse_args()
    local_dir = args.local_dir.resolve()
    metastore.stop(local_dir)  # an earlier demo's catalog service, over the folder about to be replaced
    shutil.rmtree(local_dir, ignore_errors=True)
    local_dir.mkdir(parents=True)
    prepare_environment(local_dir, args.executor, args.select)
    try:
        return demo(args, local_dir)
    finally:
        metastore.stop(local_dir)  # the demo was its only user: leave nothing running


def demo(args: argparse.Namespace, local_dir: Path) -> int:
    """Three (`--batches`) DAG runs over the example project in `local_dir`; 0 if every one succeeded."""

    started = time.time()
    from airflow.utils import db

    db.initdb()
    print(f"Airflow metadata database ready in {time.time() - started:.0f}s ({os.environ['AIRFLOW_HOME']})")
    with local_executor(local_dir) if args.executor == "local" else nullcontext():
        return run_batches(args, local_dir)


def run_batches(args: argparse.Namespace, local_dir: Path) -> int:
    """Load the DAG, then per batch: append it to the inputs, run the DAG, report."""
    from streamjoin_airflow import DbtProject

    started = time.time()
    project = DbtProject(PROJECT, state_root=str(local_dir / "state"), target_path=local_dir / "target",
                         env={"STREAMJOIN_LOCAL_DIR": str(local_dir)})
    module = load_dag_module()  # the DAG file runs dbt deps and dbt parse: its manifest is missing
    assert module.project == project, f"the DAG file's project differs: {module.project}"
    dag = module.streamjoin_example
    dag.fileloc = str(DAG_FILE)  # as Airflow's DAG importer sets it (the DAG is built in streamjoin_airflow)
    print(f"dbt parse in {time.time() - started:.0f}s; DAG '{dag.dag_id}': {', '.join(module.plan.model_names)}")

    seen: dict[str, int] = {}
    summary, batches = [], []
    for batch in range(1, args.batches + 1):
        appended = load_batch.load(batch, local_dir / "state")
        print(f"\n=== batch {batch}: appended " + ", ".join(f"{n} +{k}" for n, k in appended.items() if k))
        started = time.time()
        logical_date = module.START + batch * INTERVAL
        run = dag.test(logical_date=logical_date, use_executor=args.executor == "local")
        instances = run.get_task_instances()
        tasks = {ti.task_id: str(ti.state) for ti in instances}
        results = project.target_path / "run_results.json"
        tests = {r["unique_id"].split(".")[2]: r["status"] for r in json.loads(results.read_text())["results"]
                 if r["unique_id"].startswith("test.")} if results.exists() else {}
        runs = demo_report.new_runs(local_dir / "state" / "models", seen)
        for model_run in runs:
            print(model_run.line(), *(model_run.rows() if args.rows else ()), sep="\n")
        failed = sorted(t for t, s in tasks.items() if s != "success")
        outcome = demo_report.Batch(batch, str(run.state), runs, tests, time.time() - started)
        print(f"DAG run {logical_date:%Y-%m-%d %H:%M}: {run.state} in {outcome.seconds:.0f}s; "
              f"{len(runs)} models run; dbt tests passed: {outcome.tests_passed}/{len(tests)}"
              + (f"; tasks not successful: {failed}" if failed else ""))
        batches.append(outcome)
        summary.append({"batch": batch, "logical_date": logical_date.isoformat(), "state": str(run.state),
                        "tasks": tasks, "tests": tests, "runs": {r.model: r.run_id for r in runs},
                        "spans": {ti.task_id: [ti.start_date.timestamp(), ti.end_date.timestamp()]
                                  for ti in instances if ti.start_date and ti.end_date},
                        "seconds": round(outcome.seconds, 1)})
    print(*demo_report.summary(batches, local_dir=local_dir, models=len(module.plan.model_names)), sep="\n")
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=2))
    return 0 if all(s["state"] == "success" for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
