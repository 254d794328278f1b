"""Child process of test_exactly_once: one incremental run of a conformance-style case's model.

    python run_one_model.py CASE_JSON ROOT
"""
import json
import sys

from streamjoin.conformance import CaseRunner
from streamjoin.runtime.run import run_once
from streamjoin.session import local_session

if __name__ == "__main__":
    case, root = json.loads(sys.argv[1]), sys.argv[2]
    spark = local_session(app_name="streamjoin-killed-run", conf={"spark.sql.shuffle.partitions": "1"})
    runner = CaseRunner(spark, case, root)
    print("running", flush=True)
    run_once(spark, runner.plan, runner.tables)
