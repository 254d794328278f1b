"""The throughput target holds only if every batch of >= 100k changes reaches Flink's best rate."""

from __future__ import annotations

from bench import report


def _results(runs: dict[int, float]) -> dict:
    """q20 runs (batch -> seconds) on a 20k state, and two Flink runs of 500k and 1M changes."""
    points = [{"workload": "q20", "state": 20_000, "batch": batch,
               "run": {"changes": batch, "seconds": seconds, "load_before": [0.0, 0.0, 0.0]}}
              for batch, seconds in runs.items()]
    same = {"streamjoin": {"rows": 1, "checksum": "7", "negative_rows": 0},
            "flink": {"rows": 1, "checksum": "7", "negative_rows": 0}}
    comparisons = [{"workload": "q20", "changes": n, "flink": {"ok": True, "job_seconds": s}, "systems": same}
                   for n, s in ((500_000, 10.0), (1_000_000, 10.0))]  # 50k/s and 100k/s
    return {"sizes": {"batch_sizes": sorted(runs)}, "points": points, "comparisons": comparisons}


def test_every_large_batch_must_reach_flinks_best_rate() -> None:
    target = report._vs_flink(_results({10_000: 100.0, 100_000: 1.0, 1_000_000: 5.0}))  # 100/s, 100k/s, 200k/s
    assert target["met"] and target["ratio"] == 1.0  # the lowest ratio of the large batches
    assert [r["batch"] for r in target["figures"]["per_batch"]] == [100_000, 1_000_000]


def test_one_slow_large_batch_fails_the_target() -> None:
    target = report._vs_flink(_results({100_000: 4.0, 1_000_000: 5.0}))  # 25k/s, then 200k/s
    assert not target["met"]
    assert target["peer"] == 100_000.0 and target["ratio"] == 0.25


def _job_results(jobs: dict[str, list[int]]) -> dict:
    return {"points": [{"workload": w, "state": 20_000, "batch": 10_000, "run": {"spark_jobs": n}}
                       for w, counts in jobs.items() for n in counts]}


def test_jobs_per_run_hold_only_if_every_run_keeps_to_its_limit() -> None:
    assert report._jobs_per_run(_job_results({"q20": [1, 1], "q20_churn": [2, 1]}))["met"]
    assert not report._jobs_per_run(_job_results({"q20": [1, 2], "q20_churn": [1]}))["met"]
    assert not report._jobs_per_run(_job_results({"q20": [1], "q20_churn": [3]}))["met"]
    unmeasured = report._jobs_per_run(_job_results({"q20": [1]}))
    assert not unmeasured["met"] and "q20_churn" in unmeasured["status"]
