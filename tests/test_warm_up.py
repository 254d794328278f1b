"""A new Spark application runs one warm-up job in the background, once, in a job group of its own."""
from __future__ import annotations

from streamjoin import warm_up


def test_an_application_is_warmed_up_once_by_a_job_that_no_run_counts(spark):
    app = spark.sparkContext.applicationId
    assert app in warm_up._started, "local_session starts the warm-up of the application it creates"
    assert warm_up.start(spark) is None

    warm_up._started.discard(app)  # as if the application were new: see its warm-up run
    thread = warm_up.start(spark)
    assert thread is not None and warm_up.start(spark) is None
    thread.join(timeout=300)
    assert not thread.is_alive()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # the status store has seen every job end
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(warm_up.JOB_GROUP)]
    assert jobs and {job.status for job in jobs} == {"SUCCEEDED"}
    # the warm-up set its group in its own thread; the caller's keeps its own
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") != warm_up.JOB_GROUP
