"""Run the example project through its Airflow DAG on a standalone Spark cluster on this machine.

    python scripts/cluster_demo.py [--workers 2] [--home .streamjoin/cluster] [demo_airflow.py options]

Starts a Spark master and workers (1 core, 1g each) on 127.0.0.1 (`streamjoin.local_cluster`),
runs scripts/demo_airflow.py with `STREAMJOIN_SPARK_MASTER` pointing at the master (dbt's
session and every run use it; executors run this virtualenv's Python), then stops the cluster,
also when the demo fails or is interrupted. The daemons' logs and work folders stay in `--home`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from streamjoin import local_cluster

SCRIPTS = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--home", type=Path, default=SCRIPTS.parent / ".streamjoin" / "cluster",
                        help="the daemons' logs, work and scratch folders (wiped first)")
    args, demo_args = parser.parse_known_args()
    shutil.rmtree(args.home, ignore_errors=True)
    print(f"Starting a Spark master and {args.workers} workers on {local_cluster.HOST} (logs in {args.home})")
    with local_cluster.running(args.home.resolve(), workers=args.workers) as cluster:
        print(f"Cluster up: {cluster.master_url} (status: {cluster.master_ui}/json/)", flush=True)
        env = {**os.environ, "STREAMJOIN_SPARK_MASTER": cluster.master_url, "SPARK_LOCAL_IP": local_cluster.HOST,
               "PYSPARK_PYTHON": sys.executable}
        demo = subprocess.run([sys.executable, str(SCRIPTS / "demo_airflow.py"), *demo_args], env=env)
        apps = [f"{app['name']} ({app['cores']} cores)" for app in cluster.status()["completedapps"]]
        print(f"Applications the master ran: {', '.join(apps) or 'none'}")
    print("Cluster stopped.")
    return demo.returncode


if __name__ == "__main__":
    sys.exit(main())
