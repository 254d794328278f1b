"""The Spark jobs a run starts, and their stages, counted from the driver's status store by job group.

A run tags every job it starts (also those its writer threads start, which inherit the
group) with a job group of its own; once the run's jobs are done, the status store lists
them. The counts go into the run log, so a change that adds a job or a stage shows there.
"""
from __future__ import annotations

import uuid

from pyspark.sql import SparkSession

_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


class JobGroup:
    """Tags the Spark jobs started in a block (and its inheriting threads) with one job group."""

    def __init__(self, spark: SparkSession, description: str) -> None:
        self.sc = spark.sparkContext
        self.description = description
        self.id = f"streamjoin-{uuid.uuid4().hex[:12]}"
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> JobGroup:
        self._saved = {p: self.sc.getLocalProperty(p) for p in _GROUP_PROPERTIES}
        self.sc.setJobGroup(self.id, self.description, interruptOnCancel=False)
        return self

    def __exit__(self, *exc: object) -> None:
        for prop, value in self._saved.items():
            self.sc.setLocalProperty(prop, value)  # type: ignore[arg-type]  # None clears it

    def jobs(self) -> int:
        """How many jobs of this group the driver has started, once its listeners caught up."""
        try:
            self.sc._jsc.sc().listenerBus().waitUntilEmpty()
        except Exception:  # noqa: BLE001 — an internal API: without it the count may lag, never fail a run
            pass
        return len(self.sc.statusTracker().getJobIdsForGroup(self.id))

    def stages(self) -> int:
        """How many stages the group's jobs ran (a stage whose output a job found computed is not
        counted); call after `jobs`, which waits for the listeners."""
        store = self.sc._jsc.sc().statusStore()
        ran = 0
        for job in self.sc.statusTracker().getJobIdsForGroup(self.id):
            data = store.job(job)
            ran += data.numCompletedStages() + data.numFailedStages() + data.numActiveStages()
        return ran
