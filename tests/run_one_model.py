"""Child process of test_exactly_once: one incremental run of a conformance-style case's model.

    python run_one_model.py CASE_JSON ROOT [--hold-after-first-commit]

With the flag the child says "committed" after its first commit to one of the model's own tables
(a rebuild's shadow tables do not count: see `runtime.rebuild`) and waits there to be killed, so a
kill lands between two commits however loaded the machine.
"""
import json
import sys
import time

from jvm_options import SHORT_LIVED  # this folder, the script's own
from streamjoin.conformance import CaseRunner
from streamjoin.runtime.rebuild import REBUILD_FOLDER
from streamjoin.runtime.run import run_once
from streamjoin.session import local_session
from streamjoin.storage import delta_log


def hold_after_first_commit() -> None:
    real = delta_log.commit

    def commit(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if f"/{REBUILD_FOLDER}/" not in path:
            print("committed", flush=True)
            time.sleep(3600)

    delta_log.commit = commit


if __name__ == "__main__":
    case, root = json.loads(sys.argv[1]), sys.argv[2]
    if "--hold-after-first-commit" in sys.argv[3:]:
        hold_after_first_commit()
    spark = local_session(app_name="streamjoin-killed-run", conf={"spark.sql.shuffle.partitions": "1",
                                                                   "spark.driver.extraJavaOptions": SHORT_LIVED})
    runner = CaseRunner(spark, case, root)
    print("running", flush=True)
    run_once(spark, runner.plan, runner.tables)
