"""The benchmark harness: streamjoin against Flink, Spark batch recompute and Spark SS.

    .venv/bin/python -m bench.harness --mode quick            # `make bench`, < 10 minutes
    .venv/bin/python -m bench.harness --mode full             # `make bench-full`, hours
    .venv/bin/python -m bench.harness --mode full --scale 0.01  # the full plan, shrunk

Writes ``results.json``, ``REPORT.md`` and ``plots/*.png`` into ``--out`` (default
``bench/``). Every figure is measured in this run; every comparison checks that the
systems produced the same result (row count and order-independent checksum).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: `python bench/harness.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import dataclasses
import json
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from bench import environment, report, systems
from bench import workloads as wl
from bench.measure import load_average, streamjoin_profiler
from streamjoin import StreamJoinError

MB = 1 << 20
#: Batches of at least this many changes get Spark's floor measured (the throughput target's batches).
FLOOR_BATCH = 100_000
#: Warm repeats of a floor's query; its median is the floor.
FLOOR_REPEATS = 5


@dataclass(frozen=True)
class Sizes:
    """How big each experiment is (changes = rows of the input changelogs, all inputs)."""

    fixed_state: int  # q20 state for the run-time-vs-batch-size sweep
    batch_sizes: tuple[int, ...]  # batch sizes of that sweep
    state_sizes: tuple[int, ...]  # q20 states for the run-time-vs-state sweep
    state_batch: int  # batch of that sweep
    other_state: int  # state of the other workloads
    other_batch: int  # their measured batch
    interval_changes: int  # event-time joins (interval, temporal, window): whole stream
    interval_batch: int  # event-time joins: changes per run / micro-batch
    load_chunk: int  # state is loaded in runs of at most this many changes
    small_batch: int  # the fixed-cost and retraction experiments' batch
    small_runs: int  # how many such runs each measures (their median counts)
    churn_states: tuple[int, ...]  # q20_left_churn: states whose small runs are compared (10x apart)
    workloads: tuple[str, ...]
    overlap_flink: bool = False  # run Flink while Spark works (tiny mode only: timings are void)
    budget_seconds: float | None = None  # start no experiment after this (Flink's jobs still run)

    def scaled(self, factor: float) -> Sizes:
        def s(n: int) -> int:
            return max(1_000, int(n * factor))

        return dataclasses.replace(
            self, fixed_state=s(self.fixed_state), batch_sizes=tuple(sorted({s(b) for b in self.batch_sizes})),
            state_sizes=tuple(sorted({s(x) for x in self.state_sizes})), state_batch=s(self.state_batch),
            other_state=s(self.other_state), other_batch=s(self.other_batch),
            interval_changes=s(self.interval_changes), interval_batch=s(self.interval_batch),
            load_chunk=s(self.load_chunk), small_batch=s(self.small_batch),
            churn_states=tuple(sorted({s(x) for x in self.churn_states})))  # fmt: skip


ALL = ("q20", "q3", "q20_churn", "q3_churn", "q20_left_churn", "interval", "temporal", "window", "fourway_binary",
       "fourway_multi")
MODES: dict[str, Sizes] = {
    "tiny": Sizes(fixed_state=1_000, batch_sizes=(1_000,), state_sizes=(1_000,), state_batch=1_000,
                  other_state=1_000, other_batch=1_000, interval_changes=2_000, interval_batch=1_000,
                  load_chunk=1_000, small_batch=1_000, small_runs=2, churn_states=(1_000,),
                  workloads=("q20_churn", "temporal", "window"), overlap_flink=True),
    "quick": Sizes(fixed_state=20_000, batch_sizes=(10_000, 100_000, 1_000_000), state_sizes=(20_000, 200_000),
                   state_batch=10_000, other_state=20_000, other_batch=10_000, interval_changes=40_000,
                   interval_batch=10_000, load_chunk=100_000, small_batch=1_000, small_runs=10,
                   churn_states=(20_000, 200_000), budget_seconds=360,
                   workloads=("q20", "interval", "q20_churn", "q20_left_churn", "q3", "q3_churn",
                              "fourway_binary", "fourway_multi", "temporal", "window")),
    "full": Sizes(fixed_state=1_000_000, batch_sizes=(10_000, 100_000, 1_000_000),
                  state_sizes=(1_000_000, 10_000_000, 20_000_000), state_batch=10_000,
                  other_state=1_000_000, other_batch=100_000, interval_changes=2_000_000,
                  interval_batch=100_000, load_chunk=1_000_000, small_batch=1_000, small_runs=10,
                  churn_states=(1_000_000, 10_000_000), workloads=ALL),
}  # fmt: skip


class Bench:
    """Runs the experiments of one mode and collects every figure into ``self.results``."""

    def __init__(self, spark: Any, sizes: Sizes, work: Path, flink_parallelism: int) -> None:
        self.spark, self.sizes, self.work = spark, sizes, work
        self.flink_parallelism = flink_parallelism
        self.profiler = streamjoin_profiler()
        self.runs: list[dict[str, Any]] = []
        self.points: list[dict[str, Any]] = []  # measured batches: (workload, state, batch) -> run
        self.series: list[dict[str, Any]] = []  # consecutive small runs on one state (their median counts)
        self.comparisons: list[dict[str, Any]] = []
        self.floors: list[dict[str, Any]] = []  # Spark's floor for a batch (see `floor`)
        self.peers: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}
        self.flink_jobs: list[dict[str, Any]] = []
        self.pending: list[tuple[str, str, Any, Path]] = []  # (comparison id, job name, schema, folder)
        self.started = time.perf_counter()

    def out_of_time(self, what: str) -> bool:
        """True (and ``what`` is marked not run) once the mode's time budget is spent."""
        budget = self.sizes.budget_seconds
        if budget is None or time.perf_counter() - self.started < budget:
            return False
        self.skipped[what] = f"not run: the mode's time budget ({budget:.0f} s before Flink) was spent"
        print(f"  {what}: {self.skipped[what]}", flush=True)
        return True

    # --- streamjoin -----------------------------------------------------------------------

    def _run(self, model: systems.StreamjoinModel, role: str, state: int, batch: int) -> dict[str, Any]:
        before = load_average()
        run = model.run(self.profiler)
        run.update(workload=model.workload.name, role=role, state=state, batch=batch,
                   load_before=before, load_after=load_average())
        self.runs.append(run)
        print(f"  streamjoin {model.workload.name} {role} state={state:,} batch={batch:,}: "
              f"{run['seconds']:.1f}s ({run['changes']:,} changes) load={before[0]}", flush=True)
        return run

    def load(self, workload: wl.Workload, stream: dict[str, pa.Table], state: int, root: Path
             ) -> systems.StreamjoinModel:
        """A fresh model with the first ``state`` changes applied (runs of <= load_chunk)."""
        shutil.rmtree(root, ignore_errors=True)
        model = systems.StreamjoinModel(self.spark, workload, root)
        for start in range(0, state, self.sizes.load_chunk):
            stop = min(state, start + self.sizes.load_chunk)
            model.append(wl.cut(stream, start, stop))
            self._run(model, "load", start, stop - start)
        return model

    def sweep(self, workload: wl.Workload, stream: dict[str, pa.Table], state: int, batches: list[int],
              compare_at: set[int], *, small_runs: bool = False, floors: bool = False) -> None:
        """Load ``state``, then run each batch from that same state (restored from a copy); with
        ``small_runs``, then the series of small runs from it too (see `small`); with ``floors``,
        Spark's floor (`floor`) of each compared batch and of each of at least ``FLOOR_BATCH``."""
        root = self.work / workload.name / f"state-{state}"
        model = self.load(workload, stream, state, root)
        saved = root.with_name(root.name + ".saved")
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(root, saved)
        point = {"workload": workload.name, "state": state,
                 "state_bytes": model.state_bytes(), "model_bytes": model.model_bytes()}

        def restore() -> None:
            shutil.rmtree(root)
            shutil.copytree(saved, root)

        for index, batch in enumerate(batches):
            if index:
                restore()
            model.append(wl.cut(stream, state, state + batch))
            run = self._run(model, "batch", state, batch)
            self.points.append({**point, "batch": batch, "run": run})
            if batch in compare_at:
                self.compare(workload, stream, state + batch, model)
            if floors and (batch in compare_at or batch >= FLOOR_BATCH):
                self.floor(workload, stream, state, batch)
            if small_runs and batch == max(batches):  # what the runs after a large one pay for it
                self.small(model, stream, state + batch, after=batch)
        if small_runs:
            restore()
            self.small(model, stream, state)
        shutil.rmtree(saved, ignore_errors=True)

    def floor(self, workload: wl.Workload, stream: dict[str, pa.Table], state: int, batch: int) -> None:
        """Spark's floor for a batch: the model's query by Spark batch over the batch's change rows alone
        (each as a plain row, whatever its kind), its result written once as Parquet, in this session
        (median of warm repeats). Any run of that batch on Spark reads at least those changes, joins them
        and writes what they produce, so no Spark-based run of it can be faster: a target beyond the floor
        is out of reach on Spark."""
        folder = self.work / "floors" / f"{workload.name}@{state}+{batch}"
        systems.write_snapshots(workload, wl.cut(stream, state, state + batch), folder / "snapshot", every_change=True)
        timed = systems.spark_batch(self.spark, workload, folder / "snapshot", folder / "out", repeats=FLOOR_REPEATS)
        self.floors.append({"workload": workload.name, "state": state, "batch": batch, "seconds": timed["seconds"],
                            "repeats_s": timed["repeats_s"]})
        print(f"  spark floor {workload.name} batch={batch:,}: {timed['seconds']:.2f}s", flush=True)
        shutil.rmtree(folder, ignore_errors=True)

    def small(self, model: systems.StreamjoinModel, stream: dict[str, pa.Table], state: int,
              after: int | None = None) -> int:
        """``small_runs`` consecutive runs of ``small_batch`` changes each on a warm session, from
        ``state``: the fixed cost of a run; ``after``: the changes of the large run they follow (its
        rows are still in level 0: the first of them folds them). Returns the changes the model has
        read after them."""
        batch, runs = self.sizes.small_batch, []
        for i in range(self.sizes.small_runs):
            model.append(wl.cut(stream, state + i * batch, state + (i + 1) * batch))
            runs.append(self._run(model, "small" if after is None else "after", state + i * batch, batch))
        if after is None:
            self.floor(model.workload, stream, state, batch)
        series = {"workload": model.workload.name, "state": state, "batch": batch, "runs": runs}
        self.series.append(series if after is None else {**series, "after": after})
        return state + len(runs) * batch

    def retractions(self, workload: wl.Workload) -> None:
        """A LEFT join whose changes hold retractions: small runs on each of ``churn_states``, and a
        recompute of the largest state's snapshot after them."""
        sizes = self.sizes
        top = max(sizes.churn_states)
        stream = wl.stream(workload, top + sizes.small_batch * sizes.small_runs)
        for state in sizes.churn_states:
            if self.out_of_time(f"{workload.name} at state {state:,}"):
                return
            model = self.load(workload, stream, state, self.work / workload.name / f"state-{state}")
            read = self.small(model, stream, state)
            if state == top:
                self.compare(workload, stream, read, model, flink=False)

    # --- peers and comparisons --------------------------------------------------------------

    def compare(self, workload: wl.Workload, stream: dict[str, pa.Table], changes: int,
                model: systems.StreamjoinModel | None, *, flink: bool = True) -> dict[str, Any]:
        """Check streamjoin's result (if any) against Spark batch now and Flink later."""
        name = f"{workload.name}@{changes}"
        folder = self.work / "peers" / name
        prefix = wl.cut(stream, 0, changes)
        snapshots = folder / "snapshot"
        counts = systems.write_snapshots(workload, prefix, snapshots)
        schema = systems.batch_schema(self.spark, workload, snapshots)
        before = load_average()
        batch = systems.spark_batch(self.spark, workload, snapshots, folder / "batch_out")
        entry: dict[str, Any] = {"id": name, "workload": workload.name, "changes": changes,
                                 "snapshot_rows": sum(counts.values()), "systems": {}}
        entry["spark_batch"] = {**batch, "load_before": before, "load_after": load_average()}
        result = systems.plain(self.spark.read.schema(schema).parquet(str(folder / "batch_out")))
        entry["systems"]["spark_batch"] = systems.fingerprint(result, schema)
        if model is not None:
            entry["systems"]["streamjoin"] = systems.fingerprint(model.result(), schema)
        print(f"  compare {name}: spark batch {batch['seconds']:.1f}s", flush=True)
        if flink:
            job = systems.flink_job(name, workload, prefix, schema, folder / "flink",
                                    parallelism=self.flink_parallelism)
            self.flink_jobs.append(job)
            self.pending.append((name, name, schema, folder / "flink"))
        self.comparisons.append(entry)
        return entry

    def event_time(self, workload: wl.Workload) -> None:
        """An event-time join (interval, temporal, window) run by run on a stream: streamjoin (if its
        operator exists), Flink, Spark batch, and for the interval join Spark Structured Streaming.
        A stream whose results wait for the watermark ends with ``closing`` rows."""
        sizes = self.sizes
        stream = wl.stream(workload, sizes.interval_changes)
        if workload.waits_for_watermark:
            closing = wl.closing(workload, stream)
            stream = {name: pa.concat_tables([table, closing[name]]) for name, table in stream.items()}
        changes = wl.total(stream)
        batches = [wl.cut(stream, s, min(changes, s + sizes.interval_batch))
                   for s in range(0, changes, sizes.interval_batch)]
        model = None
        if wl.module_exists(workload.requires):
            root = self.work / workload.name / "stream"
            shutil.rmtree(root, ignore_errors=True)
            model = systems.StreamjoinModel(self.spark, workload, root)
            for index, batch in enumerate(batches):
                model.append(batch)
                run = self._run(model, "batch", index * sizes.interval_batch, wl.total(batch))
                self.points.append({"workload": workload.name, "state": index * sizes.interval_batch,
                                    "batch": wl.total(batch), "run": run,
                                    "state_bytes": model.state_bytes(), "model_bytes": model.model_bytes()})
        else:
            self.skipped[workload.name] = f"not run: operator missing ({workload.requires})"
        entry = self.compare(workload, stream, changes, model)
        self.floor(workload, stream, 0, min(changes, sizes.interval_batch))
        if workload.kind != "interval":  # Spark SS has no temporal join, nor a window join whose result
            return  # keeps the rows' event time next to the window (one event-time column per stream)
        folder = self.work / "peers" / entry["id"] / "spark_streaming"
        shutil.rmtree(folder, ignore_errors=True)
        systems.write_stream_files(batches, folder / "in")
        before = load_average()
        ss = systems.spark_streaming(self.spark, workload, folder)
        entry["spark_streaming"] = {**ss, "changes": changes, "batch": sizes.interval_batch,
                                    "load_before": before, "load_after": load_average()}
        schema = systems.batch_schema(self.spark, workload, self.work / "peers" / entry["id"] / "snapshot")
        entry["systems"]["spark_streaming"] = systems.fingerprint(
            systems.streaming_result(self.spark, folder, schema), schema)
        print(f"  spark streaming {workload.name}: {ss['seconds']:.1f}s", flush=True)

    def finish_flink(self, reports: dict[str, dict[str, Any]]) -> None:
        """Fold Flink's timings and results into the comparisons."""
        by_id = {c["id"]: c for c in self.comparisons}
        for cid, job, schema, folder in self.pending:
            entry, flink = by_id[cid], reports[job]
            entry["flink"] = flink
            if flink.get("ok"):
                entry["systems"]["flink"] = systems.fingerprint(
                    systems.flink_result(self.spark, folder, schema), schema)
            else:
                entry["systems"]["flink"] = {"error": flink.get("error")}
                print(f"  flink {job} failed: {flink.get('error')}", flush=True)

    # --- the plan --------------------------------------------------------------------------

    def run(self) -> None:
        sizes = self.sizes
        flink_thread = None
        for name in sizes.workloads:
            workload = wl.WORKLOADS[name]
            print(f"workload {name}", flush=True)
            if self.out_of_time(name):
                continue
            if workload.event_time:
                self.event_time(workload)
                continue
            if not wl.module_exists(workload.requires):
                self.skipped[name] = f"not run: operator missing ({workload.requires})"
                continue
            try:
                if name == "q20":
                    self.scaling(workload)
                    continue
                if name == "q20_left_churn":
                    self.retractions(workload)
                    continue
                stream = wl.stream(workload, sizes.other_state + sizes.other_batch)
                self.sweep(workload, stream, sizes.other_state, [sizes.other_batch], {sizes.other_batch})
            except StreamJoinError as error:  # e.g. a join strategy that does not exist yet
                self.skipped[name] = f"not run: {error}"
                print(f"  {name}: {self.skipped[name]}", flush=True)
                continue
            if sizes.overlap_flink and flink_thread is None:
                flink_thread = self._start_flink_early()
        if flink_thread is not None:
            flink_thread.join()
        reports = getattr(self, "_early_reports", {})
        rest = [j for j in self.flink_jobs if j["name"] not in reports]
        if rest:
            print(f"flink: {len(rest)} job(s)", flush=True)
            reports.update(systems.run_flink(rest))
        self.finish_flink(reports)

    def _start_flink_early(self) -> threading.Thread:
        jobs = list(self.flink_jobs)
        self._early_reports: dict[str, dict[str, Any]] = {}
        thread = threading.Thread(target=lambda: self._early_reports.update(systems.run_flink(jobs)))
        thread.start()
        return thread

    def scaling(self, workload: wl.Workload) -> None:
        """q20: run time against batch size at a fixed state, and against state at a fixed batch."""
        sizes = self.sizes
        top = max(sizes.state_sizes)
        one_percent = max(1, top // 100)
        need = max(sizes.fixed_state + max(sizes.batch_sizes) + sizes.small_batch * sizes.small_runs,
                   top + max(sizes.state_batch, one_percent))
        stream = wl.stream(workload, need)
        for state in sorted(set(sizes.state_sizes) | {sizes.fixed_state}):
            if self.out_of_time(f"{workload.name} at state {state:,}"):
                continue
            batches: list[int] = []
            compare: set[int] = set()
            if state == sizes.fixed_state:
                batches += sizes.batch_sizes
                compare.add(max(sizes.batch_sizes))
            if state in sizes.state_sizes and sizes.state_batch not in batches:
                batches.append(sizes.state_batch)
            if state == top:
                if one_percent not in batches:
                    batches.append(one_percent)
                compare.add(one_percent)
            self.sweep(workload, stream, state, batches, compare, small_runs=state == sizes.fixed_state, floors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size (>= 1,000 each)")
    parser.add_argument("--workloads", help="comma-separated subset of " + ",".join(ALL))
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent),
                        help="where results.json, REPORT.md and plots/ go")
    parser.add_argument("--work", help="scratch folder (default: a temporary one, removed after)")
    parser.add_argument("--flink-parallelism", type=int, default=2)
    parser.add_argument("--driver-memory", help="spark.driver.memory (local mode: all of Spark), e.g. 8g")
    args = parser.parse_args(argv)
    sizes = MODES[args.mode].scaled(args.scale) if args.scale != 1.0 else MODES[args.mode]
    if args.workloads:
        sizes = dataclasses.replace(sizes, workloads=tuple(args.workloads.split(",")))
    started = time.time()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="streamjoin-bench-"))
    from streamjoin.session import local_session

    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else None
    spark = local_session(app_name="streamjoin-bench", conf=conf)
    bench = Bench(spark, sizes, work, args.flink_parallelism)
    try:
        bench.run()
    finally:
        bench.profiler.restore()
    results = {
        "mode": args.mode, "scale": args.scale, "command": " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_seconds": round(time.time() - started, 1), "sizes": dataclasses.asdict(sizes),
        "environment": environment.describe(spark), "runs": bench.runs, "points": bench.points, "series": bench.series,
        "floors": bench.floors,
        "comparisons": bench.comparisons, "skipped": bench.skipped,
    }
    results["targets"] = report.targets(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    report.write(results, out)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out / 'results.json'} and {out / 'REPORT.md'} in {results['wall_seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
