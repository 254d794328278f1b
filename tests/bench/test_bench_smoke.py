"""The benchmark harness end to end on tiny sizes: results.json's shape, and that systems were compared."""

from __future__ import annotations

import json

import pytest

from bench import harness, report
from bench.measure import CPU_PARTS

TARGETS = {"throughput_vs_flink", "one_percent_vs_recompute", "state_growth", "interval_vs_spark_streaming",
           "spark_jobs_per_run", "fixed_cost", "retraction_state_growth", "retraction_vs_recompute",
           "temporal_vs_flink", "window_vs_flink"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench")
    assert harness.main(["--mode", "tiny", "--out", str(out)]) == 0
    assert (out / "REPORT.md").read_text().startswith("# streamjoin benchmarks")
    assert (out / "plots").is_dir()
    return json.loads((out / "results.json").read_text())


def test_every_target_has_its_entry(results: dict) -> None:
    assert {t["name"] for t in results["targets"]} == TARGETS
    for target in results["targets"]:
        assert set(target) >= {"name", "measured", "ratio", "met", "status", "figures"}
        assert isinstance(target["met"], bool)
        assert target["status"] in ("met", "not met", report.BEYOND_FLOOR) or target["status"].startswith("not run")
        if not target["status"].startswith("not run"):
            assert target["met"] == (target["status"] == "met")
            assert target["ratio"] is not None and target["measured"] is not None


def test_systems_were_compared_and_agree(results: dict) -> None:
    comparison = next(c for c in results["comparisons"] if c["workload"] == "q20_churn")
    systems = comparison["systems"]
    assert {"streamjoin", "spark_batch", "flink"} <= set(systems), systems
    assert all("error" not in fp for fp in systems.values()), systems
    assert systems["streamjoin"]["rows"] > 0
    assert report.equal(comparison)
    assert comparison["flink"]["ok"] and comparison["flink"]["job_seconds"] > 0


@pytest.mark.parametrize("workload", ["temporal", "window"])
def test_event_time_joins_end_where_flink_and_the_batch_end(results: dict, workload: str) -> None:
    """The temporal and window joins, run by run up to the closing rows, against Flink on the whole
    stream and Spark's batch form of the query."""
    comparison = next(c for c in results["comparisons"] if c["workload"] == workload)
    systems = comparison["systems"]
    assert set(systems) == {"streamjoin", "spark_batch", "flink"} and all("error" not in fp for fp in systems.values()), systems
    assert systems["streamjoin"]["rows"] > 0 and report.equal(comparison)
    assert len([p for p in results["points"] if p["workload"] == workload]) >= 2  # several runs


def test_runs_carry_figures_and_load(results: dict) -> None:
    runs = results["runs"]
    assert runs and all(r["seconds"] > 0 and r["changes"] > 0 for r in runs)
    assert all(len(r["load_before"]) == 3 and r["peak_rss_bytes"] > 0 for r in runs)
    assert any(r.get("phases") for r in runs)
    # every run plans queries, and Catalyst's rules take part of a run's time, never more than all of it
    assert all(0 < r["catalyst_seconds"] < r["seconds"] for r in runs)
    # every run uses CPU in the driver's Python and in the JVM threads that answer its calls; no part is
    # negative (beyond /proc's 10 ms ticks), and none is missing
    assert all(set(r["cpu_seconds"]) == set(CPU_PARTS) for r in runs)
    assert all(r["cpu_seconds"]["python"] > 0 and r["cpu_seconds"]["calls"] > 0 for r in runs)
    assert all(min(r["cpu_seconds"].values()) > -0.05 for r in runs), [
        {part: used for part, used in r["cpu_seconds"].items() if used <= -0.05} for r in runs]
    assert results["environment"]["versions"]["apache-flink"].startswith("2.")


def test_the_time_and_rate_targets_carry_sparks_floor_for_their_batch(results: dict) -> None:
    """Spark's floor is measured beside the runs (the model's query over the batch alone, written once)
    for every time or rate target this mode measured (here the event-time joins')."""
    assert results["floors"] and all(f["seconds"] > 0 and len(f["repeats_s"]) == harness.FLOOR_REPEATS
                                     for f in results["floors"])
    measured = [t for t in results["targets"] if not t["status"].startswith("not run") and t["name"] in (
        "throughput_vs_flink", "one_percent_vs_recompute", "fixed_cost", "retraction_vs_recompute",
        "temporal_vs_flink", "window_vs_flink")]
    assert {"temporal_vs_flink", "window_vs_flink"} <= {t["name"] for t in measured}
    assert all(t["floor"] is not None and t["floor"] > 0 for t in measured), measured
