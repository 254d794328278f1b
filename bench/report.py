"""Targets, REPORT.md and plots, computed from a harness run's measurements (never typed in)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.measure import CPU_PARTS

NOT_RUN = "not run"
#: The status of a target that is not met and that Spark's own floor for its batch (`spark_floor`) misses too.
BEYOND_FLOOR = "not met; beyond Spark's floor"


def _throughput(changes: float, seconds: float) -> float:
    return changes / seconds if seconds > 0 else 0.0


def _points(results: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    return [p for p in results["points"] if p["workload"] == workload]


def _series(results: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    """The workload's series of small runs from a loaded state (not those following a large run)."""
    return [s for s in results.get("series", []) if s["workload"] == workload and "after" not in s]


def _series_figures(series: dict[str, Any]) -> dict[str, list[Any]]:
    """Each run's seconds and Spark jobs of a series of small runs."""
    return {"seconds": [round(r["seconds"], 3) for r in series["runs"]],
            "spark_jobs": [r["spark_jobs"] for r in series["runs"]]}


def median_seconds(series: dict[str, Any]) -> float:
    """The median run time of a series of small runs."""
    return statistics.median(r["seconds"] for r in series["runs"])


def _comparison(results: dict[str, Any], workload: str, changes: int | None = None) -> dict[str, Any] | None:
    found = [c for c in results["comparisons"] if c["workload"] == workload
             and (changes is None or c["changes"] == changes)]  # fmt: skip
    return found[-1] if found else None


def equal(comparison: dict[str, Any]) -> bool:
    """Whether every system that produced a result has the same row count and checksum."""
    prints = [s for s in comparison["systems"].values() if "error" not in s]
    return len(prints) >= 2 and all(
        (p["rows"], p["checksum"], p["negative_rows"]) == (prints[0]["rows"], prints[0]["checksum"], 0)
        for p in prints)  # fmt: skip


def spark_floor(results: dict[str, Any], workload: str, batch: int) -> float | None:
    """Spark's floor for a batch of the workload, in seconds (the harness's `floor`; the lowest if
    measured more than once), or None when it was not measured."""
    found = [f["seconds"] for f in results.get("floors", []) if f["workload"] == workload and f["batch"] == batch]
    return min(found) if found else None


def _floor_rate(results: dict[str, Any], workload: str, batch: int) -> float | None:
    """Spark's floor for a batch of the workload as records/s, or None when it was not measured."""
    seconds = spark_floor(results, workload, batch)
    return _throughput(batch, seconds) if seconds else None


def _status(met: bool, floor_misses: bool) -> str:
    """A target's status: met, not met, or not met with Spark's floor for its batch missing it too."""
    return "met" if met else BEYOND_FLOOR if floor_misses else "not met"


def _target(name: str, description: str, measured: float | None, peer: float | None, ratio: float | None,
            met: bool, status: str, figures: dict[str, Any], floor: float | None = None) -> dict[str, Any]:
    """A target's row; `floor` is Spark's floor in the unit of `measured` (seconds or records/s)."""
    return {"name": name, "description": description, "measured": measured, "peer": peer,
            "ratio": None if ratio is None else round(ratio, 4), "met": met, "status": status,
            "floor": None if floor is None else round(floor, 3), "figures": figures}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issues' targets, each met or not, with its ratio and the figures behind it."""
    return [_vs_flink(results), _vs_recompute(results), _state_growth(results), _vs_streaming(results),
            _jobs_per_run(results), _fixed_cost(results), *_retractions(results),
            _stream_vs_flink(results, "temporal", "the temporal join (bids with the auction version valid at bid time)"),
            _stream_vs_flink(results, "window", "the tumbling window join (bids and auctions per 10-second window)")]


def _stream_vs_flink(results: dict[str, Any], workload: str, join: str) -> dict[str, Any]:
    """An event-time join run by run against Flink's rate on the whole stream, with the same result."""
    name = f"{workload}_vs_flink"
    batch = results["sizes"]["interval_batch"]
    note = "" if batch >= 100_000 else f" (this mode's batch, {batch:,} changes, stands in for the issue's 100k)"
    what = f"{join}: streamjoin's throughput at {batch:,}-change runs >= Flink's, same results{note}"
    cmp = _comparison(results, workload)
    flink = (cmp or {}).get("flink") or {}
    peer = round(_throughput(cmp["changes"], flink["job_seconds"]), 1) if flink.get("ok") else None
    runs = [p["run"] for p in _points(results, workload)]
    figures = {"runs": len(runs), "flink": flink, "results_equal": equal(cmp) if cmp else None}
    if workload in results["skipped"] or not runs or peer is None:
        reason = results["skipped"].get(workload, f"{NOT_RUN}: no runs of {workload} with a Flink run to compare")
        return _target(name, what, None, peer, None, False, reason, figures)
    mine = _throughput(sum(r["changes"] for r in runs), sum(r["seconds"] for r in runs))
    ratio = mine / peer
    met = ratio >= 1 and bool(figures["results_equal"])
    floor = _floor_rate(results, workload, batch)
    return _target(name, what, round(mine, 1), peer, ratio, met, _status(met, floor is not None and floor < peer),
                   figures, floor)


def _vs_flink(results: dict[str, Any]) -> dict[str, Any]:
    """Every streamjoin batch of >= 100k changes against Flink's best whole-stream rate on the workload."""
    name, what = "throughput_vs_flink", "at batches >= 100k changes, streamjoin's throughput >= Flink's"
    sizes = results["sizes"]
    threshold = min(100_000, max(sizes["batch_sizes"]))
    rows = []
    for workload in sorted({p["workload"] for p in results["points"]}):
        flink_runs = [c for c in results["comparisons"]
                      if c["workload"] == workload and (c.get("flink") or {}).get("ok")]  # fmt: skip
        if not flink_runs:
            continue
        cmp = max(flink_runs, key=lambda c: _throughput(c["changes"], c["flink"]["job_seconds"]))
        theirs = _throughput(cmp["changes"], cmp["flink"]["job_seconds"])
        for point in sorted(_points(results, workload), key=lambda p: p["batch"]):
            if point["batch"] < threshold:
                continue
            mine = _throughput(point["run"]["changes"], point["run"]["seconds"])
            floor = _floor_rate(results, workload, point["batch"])
            rows.append({"workload": workload, "batch": point["batch"], "state": point["state"],
                         "streamjoin_records_per_s": round(mine, 1), "flink_records_per_s": round(theirs, 1),
                         "spark_floor_records_per_s": None if floor is None else round(floor, 1),
                         "flink_changes": cmp["changes"], "flink_job_seconds": cmp["flink"]["job_seconds"],
                         "ratio": round(mine / theirs, 4) if theirs else None,
                         "load": point["run"]["load_before"], "results_equal": equal(cmp)})
    if not rows:
        return _target(name, what, None, None, None, False, f"{NOT_RUN}: no batch >= {threshold:,} with a Flink run",
                       {})
    worst = min(rows, key=lambda r: r["ratio"] if r["ratio"] is not None else 0.0)
    met = all(r["ratio"] is not None and r["ratio"] >= 1 for r in rows)
    note = "" if threshold == 100_000 else f" (this mode's largest batch, {threshold:,}, stands in for 100k)"
    note += (f"; every such batch against Flink's best whole-stream rate; shown: the lowest ratio "
             f"({worst['workload']}, batch {worst['batch']:,})")
    floor = worst["spark_floor_records_per_s"]
    return _target(name, what + note, worst["streamjoin_records_per_s"], worst["flink_records_per_s"],
                   worst["ratio"], met, _status(met, floor is not None and floor < worst["flink_records_per_s"]),
                   {"per_batch": rows}, floor)


def _vs_recompute(results: dict[str, Any]) -> dict[str, Any]:
    name = "one_percent_vs_recompute"
    what = "a run with changes = 1% of a 10M-row state takes <= 1/10 of the batch recompute"
    points = _points(results, "q20")
    top = max(results["sizes"]["state_sizes"])
    batch = max(1, top // 100)
    point = next((p for p in points if p["state"] == top and p["batch"] == batch), None)
    cmp = _comparison(results, "q20", top + batch)
    if point is None or cmp is None:
        return _target(name, what, None, None, None, False, f"{NOT_RUN}: q20 was not run", {})
    ratio = point["run"]["seconds"] / cmp["spark_batch"]["seconds"]
    note = "" if top == 10_000_000 else f" (measured at a {top:,}-change state, this mode's largest)"
    floor = spark_floor(results, "q20", batch)
    beyond = floor is not None and floor > 0.1 * cmp["spark_batch"]["seconds"]
    return _target(name, what + note, round(point["run"]["seconds"], 3), round(cmp["spark_batch"]["seconds"], 3),
                   ratio, ratio <= 0.1, _status(ratio <= 0.1, beyond),
                   {"state": top, "batch": batch, "snapshot_rows": cmp["snapshot_rows"],
                    "streamjoin_load": point["run"]["load_before"], "batch_load": cmp["spark_batch"]["load_before"],
                    "results_equal": equal(cmp)}, floor)  # fmt: skip


def _state_growth(results: dict[str, Any]) -> dict[str, Any]:
    name = "state_growth"
    what = "at a fixed 10k-change batch, growing state from 1M to 10M rows grows run time < 2x"
    batch = results["sizes"]["state_batch"]
    by_state = {p["state"]: p for p in _points(results, "q20") if p["batch"] == batch}
    if len(by_state) < 2:
        return _target(name, what, None, None, None, False, f"{NOT_RUN}: fewer than two state sizes", {})
    small = min(by_state)
    big = small * 10 if small * 10 in by_state else max(by_state)
    t_small, t_big = by_state[small]["run"]["seconds"], by_state[big]["run"]["seconds"]
    ratio = t_big / t_small
    note = "" if (small, big, batch) == (1_000_000, 10_000_000, 10_000) else (
        f" (measured from {small:,} to {big:,} changes of state ({big / small:.0f}x) at a {batch:,}-change batch)")
    return _target(name, what + note, round(t_big, 3), round(t_small, 3), ratio, ratio < 2,
                   "met" if ratio < 2 else "not met",
                   {"batch": batch, "seconds_by_state": {str(s): round(p["run"]["seconds"], 3)
                                                          for s, p in sorted(by_state.items())},
                    "load_by_state": {str(s): p["run"]["load_before"] for s, p in sorted(by_state.items())}})


#: Most Spark jobs a measured run may take: insert-only (q20) and with retractions (the churn workloads).
JOB_LIMITS = {"q20": 1, "q20_churn": 2, "q20_left_churn": 2}
#: The fixed cost of a run: the most seconds a small q20 run may take (median over a series).
FIXED_COST_LIMIT = 0.5
#: A LEFT join's small runs with retractions: most growth of run time for 10x the state, and most
#: share of the recompute of the largest state.
RETRACTION_GROWTH_LIMIT, RETRACTION_RECOMPUTE_LIMIT = 1.3, 0.05


def _fixed_cost(results: dict[str, Any]) -> dict[str, Any]:
    name = "fixed_cost"
    found = _series(results, "q20")
    if not found:
        return _target(name, f"a small q20 run takes <= {FIXED_COST_LIMIT} s", None, FIXED_COST_LIMIT, None, False,
                       f"{NOT_RUN}: no series of small q20 runs", {})
    series = found[-1]
    what = (f"a {series['batch']:,}-change q20 run on a {series['state']:,}-change state takes <= {FIXED_COST_LIMIT} s "
            f"(median of {len(series['runs'])} consecutive runs in a warm session; the issue's state is 1M changes)")
    median = median_seconds(series)
    floor = spark_floor(results, "q20", series["batch"])
    met = median <= FIXED_COST_LIMIT
    return _target(name, what, round(median, 3), FIXED_COST_LIMIT, median / FIXED_COST_LIMIT,
                   met, _status(met, floor is not None and floor > FIXED_COST_LIMIT),
                   {**_series_figures(series), "spark_job_seconds": [r["spark_job_seconds"] for r in series["runs"]],
                    "catalyst_seconds": [r.get("catalyst_seconds") for r in series["runs"]],
                    "load": [r["load_before"] for r in series["runs"]]}, floor)


def _retractions(results: dict[str, Any]) -> list[dict[str, Any]]:
    growth, share = "retraction_state_growth", "retraction_vs_recompute"
    by_state = {s["state"]: s for s in _series(results, "q20_left_churn")}
    what_growth = f"a small LEFT-join run with 10% retractions: 10x the state grows its time < {RETRACTION_GROWTH_LIMIT}x"
    what_share = f"that run on the larger state takes <= {RETRACTION_RECOMPUTE_LIMIT} of the recompute"
    if len(by_state) < 2:
        missing = f"{NOT_RUN}: q20_left_churn was not measured on two states"
        return [_target(growth, what_growth, None, None, None, False, missing, {}),
                _target(share, what_share, None, None, None, False, missing, {})]
    small, big = min(by_state), max(by_state)
    t_small, t_big = median_seconds(by_state[small]), median_seconds(by_state[big])
    scope = (f" (median of {len(by_state[big]['runs'])} runs of {by_state[big]['batch']:,} changes, states {small:,} "
             f"and {big:,} changes; the issue's are 1M and 10M)")
    figures = {str(s): _series_figures(v) for s, v in sorted(by_state.items())}
    ratio = t_big / t_small
    out = [_target(growth, what_growth + scope, round(t_big, 3), round(t_small, 3), ratio,
                   ratio < RETRACTION_GROWTH_LIMIT, "met" if ratio < RETRACTION_GROWTH_LIMIT else "not met", figures)]
    cmp = _comparison(results, "q20_left_churn")
    if cmp is None:
        return out + [_target(share, what_share, round(t_big, 3), None, None, False, f"{NOT_RUN}: no recompute", {})]
    recompute = cmp["spark_batch"]["seconds"]
    ratio = t_big / recompute
    met = ratio <= RETRACTION_RECOMPUTE_LIMIT
    floor = spark_floor(results, "q20_left_churn", by_state[big]["batch"])
    beyond = floor is not None and floor > RETRACTION_RECOMPUTE_LIMIT * recompute
    return out + [_target(share, what_share + scope, round(t_big, 3), round(recompute, 3), ratio, met,
                          _status(met, beyond), {"snapshot_rows": cmp["snapshot_rows"], "results_equal": equal(cmp)},
                          floor)]


def _jobs_per_run(results: dict[str, Any]) -> dict[str, Any]:
    name = "spark_jobs_per_run"
    what = ("Spark jobs per run (run log, counted by job group): <= 1 for an insert-only binary join (q20), "
            "<= 2 for one whose changes hold retractions (q20_churn, q20_left_churn); shown: the most of any")
    most = {w: max((r["spark_jobs"] for r in [p["run"] for p in _points(results, w)]
                    + [r for s in _series(results, w) for r in s["runs"]]), default=None)
            for w in JOB_LIMITS}
    figures = {"most_jobs": most, "limits": JOB_LIMITS}
    if None in most.values():
        missing = ", ".join(w for w, n in most.items() if n is None)
        return _target(name, what, None, None, None, False, f"{NOT_RUN}: no batch run of {missing}", figures)
    met = all(most[w] <= limit for w, limit in JOB_LIMITS.items())
    worst = max(JOB_LIMITS, key=lambda w: most[w] / JOB_LIMITS[w])
    return _target(name, what, most[worst], JOB_LIMITS[worst], most[worst] / JOB_LIMITS[worst],
                   met, "met" if met else "not met", figures)


def _vs_streaming(results: dict[str, Any]) -> dict[str, Any]:
    name = "interval_vs_spark_streaming"
    what = "the interval join's throughput >= Spark Structured Streaming's"
    cmp = _comparison(results, "interval")
    ss = (cmp or {}).get("spark_streaming")
    peer = round(_throughput(ss["changes"], ss["seconds"]), 1) if ss else None
    figures = {"spark_streaming": ss, "results_equal": equal(cmp) if cmp else None}
    if "interval" in results["skipped"] or not _points(results, "interval"):
        reason = results["skipped"].get("interval", f"{NOT_RUN}: the interval workload was not in this run")
        return _target(name, what, None, peer, None, False, reason, figures)
    runs = [p["run"] for p in _points(results, "interval")]
    mine = _throughput(sum(r["changes"] for r in runs), sum(r["seconds"] for r in runs))
    ratio = mine / peer if peer else None
    met = ratio is not None and ratio >= 1
    return _target(name, what, round(mine, 1), peer, ratio, met, "met" if met else "not met", figures)


# --- REPORT.md ----------------------------------------------------------------------------


def _n(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _mb(x: float | None) -> str:
    return "-" if not x else f"{x / (1 << 20):,.0f} MB"


def _load(values: list[float] | None) -> str:
    return "-" if not values else "/".join(f"{v:.1f}" for v in values)


def slowest_run(results: dict[str, Any]) -> dict[str, Any] | None:
    """The slowest measured batch run (load runs include the session's first, which warms the JVM up)."""
    runs = [r for r in results["runs"] if r.get("phases")]
    batches = [r for r in runs if r["role"] == "batch"] or runs
    return max(batches, key=lambda r: r["seconds"]) if batches else None


def write(results: dict[str, Any], out: Path) -> None:
    """Render REPORT.md and plots/*.png from ``results``."""
    plots = _plots(results, out / "plots")
    env = results["environment"]
    cores = env["spark"]["cores"]
    lines = [
        "# streamjoin benchmarks", "",
        "Generated by `bench/harness.py` from the measurements in `results.json`; do not edit by hand.", "",
        f"- mode: **{results['mode']}** (scale {results['scale']}), command: `{results['command']}`",
        f"- started {results['started']}, took {results['wall_seconds']:,.0f} s",
        f"- machine: {env['machine']['cpu']}, {env['machine']['cores']} cores, "
        f"{_mb(env['machine']['memory_bytes'])} RAM, {env['machine']['platform']}",
        "- shared machine: the load average (1/5/15 min) is recorded next to each figure",
        f"- Spark: master {env['spark']['master']} ({cores} cores), {env['spark']['shuffle_partitions']} shuffle "
        f"partitions, driver memory {env['spark']['driver_memory']}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()), "",
        "Sizes are in *changes* (rows of the input changelogs, all inputs together); a model's state "
        "holds the rows of the changes loaded so far.", "",
        "```", *(f"{k}: {v}" for k, v in results["sizes"].items()), "```", "",
    ]
    if results["mode"] != "full" or results["scale"] != 1.0:
        lines += ["**Not the full sizes**: this mode uses the smaller sizes above (the issue's figures are "
                  "1M/10M/20M-row states and 10k/100k/1M-change batches: `make bench-full`).", ""]
    lines += ["## Targets", "", "| target | status | measured | peer | ratio | Spark's floor |",
              "| --- | --- | --- | --- | --- | --- |"]
    for t in results["targets"]:
        lines.append(f"| {t['description']} | **{t['status']}** | {_n(t['measured'], 3)} | {_n(t['peer'], 3)} "
                     f"| {_n(t['ratio'], 3)} | {_n(t.get('floor'), 3)} |")
    lines += ["", "Throughput targets compare records/s (higher is better); time targets compare seconds "
              "(ratio = streamjoin / peer).", "",
              "Spark's floor, in the target's unit: the model's query run by Spark batch over the measured batch's "
              "changes alone, its result written once as Parquet, in the same session (median of "
              "warm repeats). No run of that batch on Spark can do less: it reads at least those changes, joins "
              "them and writes what they produce, and a run also reads state and writes four Delta tables. "
              f"*{BEYOND_FLOOR}*: the target asks for less time (or more records/s) than that floor, so no "
              "design on Spark, which the product runs on, meets it on this machine.", ""]
    lines += (_equality(results) + _throughput_table(results, cores) + _scaling(results) + _small_runs(results)
              + _profile(results))
    lines += ["## Multi-way vs. binary joins", "",
              "State rows and bytes and run times of the 3- and 4-way joins under `join_strategy` multi and "
              "binary are measured by `bench/multiway_state.py` and written down in [MULTIWAY.md](MULTIWAY.md).", ""]
    lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    if results["skipped"]:
        lines += ["## Not run", ""] + [f"- {k}: {v}" for k, v in results["skipped"].items()] + [""]
    (out / "REPORT.md").write_text("\n".join(lines))


def _equality(results: dict[str, Any]) -> list[str]:
    lines = ["## Same results", "", "Each comparison runs every system on the same changes; a result is "
             "compared by row count and an order-independent checksum (sum of xxhash64 of each row).", "",
             "| comparison | system | rows | checksum | same |", "| --- | --- | --- | --- | --- |"]
    for c in results["comparisons"]:
        same = "yes" if equal(c) else "**NO**"
        for system, fp in c["systems"].items():
            if "error" in fp:
                lines.append(f"| {c['id']} | {system} | error: {str(fp['error'])[:200]} | | {same} |")
            else:
                lines.append(f"| {c['id']} | {system} | {fp['rows']:,} | {fp['checksum']} | {same} |")
    return lines + [""]


def _throughput_table(results: dict[str, Any], cores: int) -> list[str]:
    lines = ["## Throughput", "", f"streamjoin: changes / run seconds of one run of the given batch on the "
             f"given state (Spark local, {cores} cores). Flink: the whole stream's changes / job seconds "
             "(submission to last result; parallelism noted; all Flink jobs share one JVM, so the first also pays its "
             "warm-up). Spark batch: snapshot rows / seconds of the "
             "recompute (the median of 3 in one session). Spark's floor: the batch's changes alone / seconds of "
             "the query over them by Spark batch, written once (the median of 5; see Targets). Per core = divided "
             "by the cores the system used.", "",
             "| workload | system | state | batch | seconds | records/s | per core | peak RSS | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in results["points"]:
        r = p["run"]
        rate = _throughput(r["changes"], r["seconds"])
        lines.append(f"| {p['workload']} | streamjoin | {p['state']:,} | {p['batch']:,} | {r['seconds']:.2f} | "
                     f"{rate:,.0f} | {rate / cores:,.0f} | {_mb(r['peak_rss_bytes'])} | {_load(r['load_before'])} |")
    for c in results["comparisons"]:
        f = c.get("flink") or {}
        if f.get("ok"):
            rate = _throughput(c["changes"], f["job_seconds"])
            lines.append(f"| {c['workload']} | flink (p={f['parallelism']}) | - | {c['changes']:,} (whole stream) | "
                         f"{f['job_seconds']:.2f} | {rate:,.0f} | {rate / f['parallelism']:,.0f} | "
                         f"{_mb(f['peak_rss_bytes'])} | {_load(f.get('load_before'))} |")
        b = c["spark_batch"]
        rate = _throughput(c["snapshot_rows"], b["seconds"])
        lines.append(f"| {c['workload']} | spark batch | - | {c['snapshot_rows']:,} (snapshot) | {b['seconds']:.2f} | "
                     f"{rate:,.0f} | {rate / cores:,.0f} | {_mb(b['peak_rss_bytes'])} | {_load(b['load_before'])} |")
        s = c.get("spark_streaming")
        if s:
            rate = _throughput(s["changes"], s["seconds"])
            lines.append(f"| {c['workload']} | spark streaming | - | {s['changes']:,} ({s['micro_batches']} "
                         f"micro-batches) | {s['seconds']:.2f} | {rate:,.0f} | {rate / cores:,.0f} | "
                         f"{_mb(s['peak_rss_bytes'])} | {_load(s['load_before'])} |")
    for f in results.get("floors", []):
        rate = _throughput(f["batch"], f["seconds"])
        lines.append(f"| {f['workload']} | spark floor | - | {f['batch']:,} (the batch alone) | {f['seconds']:.2f} | "
                     f"{rate:,.0f} | {rate / cores:,.0f} | - | - |")
    flink_peaks = [(c.get("flink") or {}).get("peak_rss_bytes") or 0 for c in results["comparisons"]]
    sj_peak = max((r["peak_rss_bytes"] for r in results["runs"]), default=0)
    lines += ["", f"Peak memory (resident, process tree): streamjoin driver + Spark JVM {_mb(sj_peak)}; "
              f"Flink process {_mb(max(flink_peaks, default=0))}. Flink is started once for all its jobs, so its "
              "peak covers them all.", ""]
    return lines


def _scaling(results: dict[str, Any]) -> list[str]:
    lines = ["## State size and batch size (q20)", "",
             "| state (changes) | state bytes | bytes per input row | batch | run seconds | load |",
             "| --- | --- | --- | --- | --- | --- |"]
    for p in sorted(_points(results, "q20"), key=lambda p: (p["state"], p["batch"])):
        per_row = p["state_bytes"] / p["state"] if p["state"] else 0
        lines.append(f"| {p['state']:,} | {_mb(p['state_bytes'])} | {per_row:,.0f} | {p['batch']:,} | "
                     f"{p['run']['seconds']:.2f} | {_load(p['run']['load_before'])} |")
    return lines + ["", "State bytes: the Delta state tables' files after loading the state (before the batch).", ""]


def _small_runs(results: dict[str, Any]) -> list[str]:
    if not results.get("series"):
        return []
    lines = ["## Small runs (the fixed cost of a run)", "",
             "Consecutive runs of a small batch each on a warm session, from the given state. A series after a "
             "large run starts right after it: its first run reads and folds the large run's rows.", "",
             "| workload | state | batch | runs | first s | median s | fastest s | slowest s | Spark jobs per run | "
             "median s in Spark jobs | median s in Catalyst's rules | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in results["series"]:
        times = [r["seconds"] for r in s["runs"]]
        jobs = sorted({r["spark_jobs"] for r in s["runs"]})
        lines.append(f"| {s['workload']} | {_state(s)} | {s['batch']:,} | {len(times)} | {times[0]:.2f} | "
                     f"{median_seconds(s):.2f} | "
                     f"{min(times):.2f} | {max(times):.2f} | {'/'.join(map(str, jobs))} | "
                     f"{_median_of(s['runs'], 'spark_job_seconds')} | {_median_of(s['runs'], 'catalyst_seconds')} | "
                     f"{_load(s['runs'][0]['load_before'])} |")
    return lines + ["", "Spark jobs: wall time with a job running. Catalyst's rules: analysis, optimization and "
                    "adaptive re-planning on the driver (some of it inside the jobs).", "", *_cpu_split(results)]


def _state(series: dict[str, Any]) -> str:
    """A series' state, and the large run it follows."""
    after = f" (after a {series['after']:,}-change run)" if "after" in series else ""
    return f"{series['state']:,}{after}"


def _cpu_split(results: dict[str, Any]) -> list[str]:
    """Median CPU seconds per run of each series, by what used them (`bench.measure.CpuUse`)."""
    measured = [s for s in results["series"] if any(r.get("cpu_seconds") for r in s["runs"])]
    if not measured:
        return []
    lines = ["Median CPU seconds per run by what used them (this machine has 2 cores: CPU beside the run's "
             "own chain of work competes with it):", "",
             "| workload | state | batch | median s | " + " | ".join(CPU_PARTS.values()) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in CPU_PARTS) + " |"]
    for s in measured:
        runs = [r["cpu_seconds"] for r in s["runs"] if r.get("cpu_seconds")]
        cells = [f"{statistics.median(r[part] for r in runs):.2f}" for part in CPU_PARTS]
        lines.append(f"| {s['workload']} | {_state(s)} | {s['batch']:,} | {median_seconds(s):.2f} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def _median_of(runs: list[dict[str, Any]], key: str) -> str:
    """The median of a figure over runs, or "-" where the runs were measured before it was recorded."""
    values = [r[key] for r in runs if r.get(key) is not None]
    return f"{statistics.median(values):.2f}" if values else "-"


def _profile(results: dict[str, Any]) -> list[str]:
    run = slowest_run(results)
    if run is None:
        return []
    phases = run["phases"]
    commits = phases.get("Delta commits", {}).get("seconds", 0.0)
    spark = run["spark_job_seconds"]
    driver = max(0.0, run["seconds"] - spark - commits)
    lines = ["## Profile of the slowest batch run", "",
             f"{run['workload']} {run['role']} run, state {run['state']:,}, batch {run['batch']:,}: "
             f"{run['seconds']:.2f} s at load {_load(run['load_before'])}.", "",
             f"- Spark jobs: {run['spark_jobs']} jobs, {spark:.2f} s of wall time with a job running "
             f"({100 * spark / run['seconds']:.0f}%)",
             f"- Delta commits (delta-rs): {commits:.2f} s ({100 * commits / run['seconds']:.0f}%)",
             *([f"- Catalyst's rules planning its queries (driver JVM; counted in the rest below, some of it inside "
                f"the jobs): "
                f"{run['catalyst_seconds']:.2f} s"] if run.get("catalyst_seconds") is not None else []),
             f"- the rest, Python and Py4J on the driver (planning, analysis, Delta log reads, bookkeeping): "
             f"{driver:.2f} s ({100 * driver / run['seconds']:.0f}%)", "",
             "Exclusive wall time per phase (nested phases subtracted; Spark jobs run inside them):", "",
             "| phase | seconds | calls |", "| --- | --- | --- |"]
    for label, v in sorted(phases.items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| {label} | {v['seconds']:.2f} | {v['calls']} |")
    return lines + [""]


def _plots(results: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    cores = results["environment"]["spark"]["cores"]
    made = []
    q20 = _points(results, "q20")
    fixed = results["sizes"]["fixed_state"]
    sweep = sorted((p for p in q20 if p["state"] == fixed), key=lambda p: p["batch"])
    if sweep:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p["batch"] for p in sweep],
                [_throughput(p["run"]["changes"], p["run"]["seconds"]) / cores for p in sweep], "o-",
                label="streamjoin")  # fmt: skip
        cmp = _comparison(results, "q20", fixed + max(results["sizes"]["batch_sizes"]))
        flink = (cmp or {}).get("flink") or {}
        if flink.get("ok"):
            ax.axhline(_throughput(cmp["changes"], flink["job_seconds"]) / flink["parallelism"], color="red",
                       linestyle="--", label="Flink (whole stream)")
        _finish(ax, "batch (changes)", "records/s per core", f"q20 throughput, state {fixed:,}")
        made.append(_save(fig, folder / "throughput.png"))
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p["batch"] for p in sweep], [p["run"]["seconds"] for p in sweep], "o-", label="streamjoin")
        _finish(ax, "batch (changes)", "run seconds", f"q20 run time vs batch, state {fixed:,}")
        made.append(_save(fig, folder / "batch_scaling.png"))
    batch = results["sizes"]["state_batch"]
    states = sorted((p for p in q20 if p["batch"] == batch), key=lambda p: p["state"])
    if states:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p["state"] for p in states], [p["run"]["seconds"] for p in states], "o-", label="streamjoin")
        _finish(ax, "state (changes)", "run seconds", f"q20 run time vs state, batch {batch:,}")
        made.append(_save(fig, folder / "state_scaling.png"))
    run = slowest_run(results)
    if run:
        phases = sorted(run["phases"].items(), key=lambda kv: kv[1]["seconds"])
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.barh([k for k, _ in phases], [v["seconds"] for _, v in phases])
        ax.set_xlabel("exclusive seconds")
        ax.set_title(f"slowest run: {run['workload']}, {run['seconds']:.1f} s")
        fig.tight_layout()
        made.append(_save(fig, folder / "profile.png"))
    return made


def _finish(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
