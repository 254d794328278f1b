"""A dbt process whose streamjoin run waits, at its first Delta commit, until PARTIES processes got there.

    python dbt_at_a_barrier.py BARRIER_DIR PARTIES <dbt arguments>

Each process leaves a file in BARRIER_DIR when it reaches the commit and waits for PARTIES files: the
runs have planned against the same table versions, and Delta's conflict check decides between them.
"""
import os
import sys
import time
from pathlib import Path

from streamjoin.storage import delta_log


def wait_at_first_commit(barrier: Path, parties: int) -> None:
    real = delta_log.commit
    waited: list[bool] = []

    def commit(*args, **kwargs):
        if not waited:
            waited.append(True)
            (barrier / str(os.getpid())).touch()
            deadline = time.time() + 300
            while len(list(barrier.iterdir())) < parties and time.time() < deadline:
                time.sleep(0.2)
        return real(*args, **kwargs)

    delta_log.commit = commit


if __name__ == "__main__":
    # dbt imports every module named dbt_* on sys.path as a plugin: not this folder's test helpers
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != here]
    wait_at_first_commit(Path(sys.argv[1]), int(sys.argv[2]))
    from dbt.cli.main import cli

    sys.argv = ["dbt", *sys.argv[3:]]
    cli()
