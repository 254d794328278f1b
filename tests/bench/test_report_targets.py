"""The throughput target holds only if every batch of >= 100k changes reaches Flink's best rate."""

from __future__ import annotations

from bench import report
from bench.measure import CPU_PARTS


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
    assert report._jobs_per_run(_job_results({"q20": [1, 1], "q20_churn": [2, 1], "q20_left_churn": [2]}))["met"]
    assert not report._jobs_per_run(_job_results({"q20": [1, 2], "q20_churn": [1], "q20_left_churn": [1]}))["met"]
    worst = report._jobs_per_run(_job_results({"q20": [1], "q20_churn": [3], "q20_left_churn": [2]}))
    assert not worst["met"] and worst["measured"] == 3
    unmeasured = report._jobs_per_run(_job_results({"q20": [1], "q20_left_churn": [1]}))
    assert not unmeasured["met"] and "q20_churn" in unmeasured["status"]


def test_jobs_per_run_count_the_small_runs_too() -> None:
    results = _job_results({"q20": [1], "q20_churn": [1], "q20_left_churn": [1]})
    results["series"] = [{"workload": "q20_left_churn", "runs": [{"spark_jobs": 1}, {"spark_jobs": 3}]}]
    assert not report._jobs_per_run(results)["met"]


def _series(workload: str, state: int, seconds: list[float]) -> dict:
    return {"workload": workload, "state": state, "batch": 1_000,
            "runs": [{"seconds": s, "spark_jobs": 1, "spark_job_seconds": s / 2, "load_before": [0.0, 0.0, 0.0]}
                     for s in seconds]}


def test_the_fixed_cost_is_the_median_of_the_small_runs() -> None:
    fast = report._fixed_cost({"series": [_series("q20", 20_000, [2.0, 0.4, 0.3, 0.45, 0.5])]})
    assert fast["met"] and fast["measured"] == 0.45 and fast["ratio"] == 0.9
    slow = report._fixed_cost({"series": [_series("q20", 20_000, [0.4, 0.7, 0.8, 0.3])]})
    assert not slow["met"] and slow["measured"] == 0.55  # the mean of the middle two
    assert report._fixed_cost({"series": []})["status"].startswith("not run")


def test_the_small_runs_table_splits_a_run_into_jobs_and_planning() -> None:
    measured = _series("q20", 20_000, [1.0, 1.2, 1.4])
    for run, planned in zip(measured["runs"], [0.3, 0.5, 0.4]):
        run["catalyst_seconds"] = planned
    older = _series("q20_churn", 20_000, [1.0])  # measured before Catalyst's time was recorded
    rows = [line for line in report._small_runs({"series": [measured, older]}) if line.startswith("| q20")]
    assert rows[0].split(" | ")[9:11] == ["0.60", "0.40"]  # medians: jobs (half of each run here), Catalyst
    assert rows[1].split(" | ")[9:11] == ["0.50", "-"]


def test_a_series_after_a_large_run_is_shown_as_such_and_is_not_the_fixed_cost() -> None:
    steady = _series("q20", 20_000, [0.3, 0.4, 0.5])
    after = {**_series("q20", 1_020_000, [5.0, 1.0, 0.9]), "after": 1_000_000}
    assert report._fixed_cost({"series": [steady, after]})["measured"] == 0.4
    rows = [line for line in report._small_runs({"series": [steady, after]}) if line.startswith("| q20")]
    assert rows[1].split(" | ")[1:6] == ["1,020,000 (after a 1,000,000-change run)", "1,000", "3", "5.00", "1.00"]


def test_the_small_runs_split_their_cpu_by_what_used_it() -> None:
    measured = _series("q20", 20_000, [1.0, 1.2, 1.4])
    for run, jit in zip(measured["runs"], [0.9, 1.1, 1.3]):
        run["cpu_seconds"] = {**dict.fromkeys(CPU_PARTS, 0.1), "jit": jit}
    older = _series("q20_churn", 20_000, [1.0])  # measured before CPU was recorded: no row
    lines = report._small_runs({"series": [measured, older]})
    header = next(line for line in lines if "JIT" in line).split(" | ")
    row = [line for line in lines if line.startswith("| q20")][-1].split(" | ")
    assert row[0] == "| q20" and row[header.index("JVM: JIT compilers")] == "1.10"
    assert row[header.index("driver Python (with delta-rs)")] == "0.10"
    assert report._small_runs({"series": [older]})[-2].startswith("Spark jobs: ")  # no CPU table


def _churn(small: list[float], big: list[float], recompute: float) -> dict:
    same = {"streamjoin": {"rows": 1, "checksum": "7", "negative_rows": 0},
            "spark_batch": {"rows": 1, "checksum": "7", "negative_rows": 0}}
    return {"series": [_series("q20_left_churn", 1_000, small), _series("q20_left_churn", 10_000, big)],
            "comparisons": [{"workload": "q20_left_churn", "changes": 20_000, "snapshot_rows": 9_000,
                             "spark_batch": {"seconds": recompute}, "systems": same}]}


def test_retractions_hold_only_with_flat_growth_and_a_small_share_of_the_recompute() -> None:
    growth, share = report._retractions(_churn([1.0, 1.0, 1.0], [1.2, 1.2, 1.2], 30.0))
    assert growth["met"] and growth["ratio"] == 1.2
    assert share["met"] and share["ratio"] == 0.04
    growth, share = report._retractions(_churn([1.0, 1.0, 1.0], [1.4, 1.4, 1.4], 20.0))
    assert not growth["met"] and not share["met"] and share["ratio"] == 0.07
    missing = report._retractions({"series": [_series("q20_left_churn", 1_000, [1.0])], "comparisons": []})
    assert all(t["status"].startswith("not run") for t in missing)


def _floors(workload: str, batch: int, seconds: float) -> list[dict]:
    return [{"workload": workload, "state": 20_000, "batch": batch, "seconds": seconds, "repeats_s": [seconds]}]


def test_a_fixed_cost_below_sparks_floor_is_marked_beyond_it() -> None:
    slow = {"series": [_series("q20", 20_000, [0.9, 1.0, 1.1])]}
    beyond = report._fixed_cost({**slow, "floors": _floors("q20", 1_000, 0.6)})  # Spark alone takes 0.6 s > 0.5
    assert not beyond["met"] and beyond["status"] == report.BEYOND_FLOOR and beyond["floor"] == 0.6
    within = report._fixed_cost({**slow, "floors": _floors("q20", 1_000, 0.3)})
    assert within["status"] == "not met" and within["floor"] == 0.3
    assert report._fixed_cost(slow)["status"] == "not met" and report._fixed_cost(slow)["floor"] is None


def test_a_rate_beyond_sparks_floor_is_marked_so_in_records_per_second() -> None:
    results = _results({100_000: 4.0, 1_000_000: 5.0})  # Flink's best: 100k/s
    results["floors"] = _floors("q20", 100_000, 2.0)  # Spark alone: 50k/s
    target = report._vs_flink(results)
    assert target["status"] == report.BEYOND_FLOOR and target["floor"] == 50_000.0
    results["floors"] = _floors("q20", 100_000, 0.5)  # 200k/s: Spark could
    assert report._vs_flink(results)["status"] == "not met"


def test_a_share_of_the_recompute_below_sparks_floor_is_marked_beyond_it() -> None:
    results = _churn([1.0, 1.0, 1.0], [1.4, 1.4, 1.4], 20.0)  # the limit: 0.05 * 20 s = 1 s
    _, share = report._retractions({**results, "floors": _floors("q20_left_churn", 1_000, 1.5)})
    assert share["status"] == report.BEYOND_FLOOR
    _, share = report._retractions({**results, "floors": _floors("q20_left_churn", 1_000, 0.5)})
    assert share["status"] == "not met"
