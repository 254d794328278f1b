"""The systems under test, each driven on the same data: streamjoin, Flink, Spark batch, Spark SS.

Every driver returns what it measured and its final result as a Spark DataFrame of the
query's columns plus ``_w`` (the row's multiplicity, negative for a net retraction), so
``fingerprint`` can compare systems by row count and an order-independent checksum.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from bench import changelog as cl
from bench.measure import CpuUse, PeakMemory, Profiler, catalyst_seconds, folder_bytes, load_average, spark_job_seconds
from bench.workloads import FLINK_TYPES, Workload, columns

ROOT = Path(__file__).resolve().parent.parent
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"
WEIGHT = "_w"


# --- comparing results -------------------------------------------------------------------


def fingerprint(result: DataFrame, schema: StructType) -> dict[str, Any]:
    """Row count and checksum of a result multiset (``_w`` = multiplicity), columns cast to ``schema``.

    The checksum is the multiplicity-weighted sum of each row's xxhash64 (as a decimal, so
    it cannot overflow): equal multisets give equal checksums whatever the row order.
    """
    cols = [F.col(f"`{f.name}`").cast(f.dataType) for f in schema.fields]
    weight = F.col(WEIGHT)
    row = result.select(F.xxhash64(*cols).cast("decimal(38,0)").alias("h"), weight)
    out = row.agg(F.sum(weight).alias("rows"), F.sum(F.col("h") * weight).alias("checksum"),
                  F.count_if(weight < 0).alias("negative")).collect()[0]  # fmt: skip
    return {"rows": int(out["rows"] or 0), "checksum": str(out["checksum"] or 0),
            "negative_rows": int(out["negative"])}


def plain(df: DataFrame) -> DataFrame:
    """A result of plain rows (each row once per copy) as a multiset with ``_w``."""
    return df.withColumn(WEIGHT, F.lit(1).cast("long"))


# --- Spark batch recompute (a dbt `table` model) -----------------------------------------


def write_snapshots(workload: Workload, tables: dict[str, pa.Table], folder: Path, *,
                    every_change: bool = False) -> dict[str, int]:
    """Write every input's snapshot (live rows after its changes) as Parquet; return row counts. With
    `every_change`, each change row is written as a plain row, whatever its kind."""
    counts = {}
    for name, changelog in tables.items():
        live = workload.changelog and not every_change
        snap = cl.snapshot(changelog) if live else changelog.drop_columns([cl.ROW_KIND])
        (folder / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(snap, folder / name / "part-0.parquet")
        counts[name] = snap.num_rows
    return counts


def spark_batch(spark: SparkSession, workload: Workload, snapshots: Path, out: Path,
                repeats: int = 3) -> dict[str, Any]:
    """Recompute the query over the snapshots and write the result as Parquet, ``repeats`` times in
    the same session: the median is the recompute's time (a single measurement on this machine varied
    4x between reports), as streamjoin's small runs are the median of several warm runs."""
    for item in workload.inputs:
        spark.read.parquet(str(snapshots / item.name)).createOrReplaceTempView(item.name)
    times = []
    with PeakMemory() as memory:
        for _ in range(repeats):
            started = time.perf_counter()
            spark.sql(workload.spark_sql).write.mode("overwrite").parquet(str(out))
            times.append(time.perf_counter() - started)
    return {"seconds": statistics.median(times), "repeats_s": [round(t, 3) for t in times],
            "peak_rss_bytes": memory.peak}


def batch_schema(spark: SparkSession, workload: Workload, snapshots: Path) -> StructType:
    """The query's result columns and types, as Spark infers them (the canonical schema)."""
    for item in workload.inputs:
        spark.read.parquet(str(snapshots / item.name)).createOrReplaceTempView(item.name)
    return spark.sql(workload.spark_sql).schema


# --- streamjoin --------------------------------------------------------------------------


class StreamjoinModel:
    """A compiled model with its input Delta tables and state under ``root``."""

    def __init__(self, spark: SparkSession, workload: Workload, root: Path) -> None:
        import streamjoin

        self.spark, self.workload, self.root = spark, workload, root
        specs = {}
        for item in workload.inputs:
            raw = {"columns": [{"name": n, "type": t} for n, t in columns(workload, item)],
                   "unique_key": list(item.unique_key), "location": str(root / "inputs" / item.name)}
            if workload.event_time:
                raw["event_time"] = workload.event_time
            specs[item.name] = streamjoin.InputSpec.from_dict(item.name, raw, model=workload.name)
        config = streamjoin.ModelConfig.from_dict(workload.config or None, model=workload.name)
        self.plan = streamjoin.compile_sql(workload.name, workload.sql, specs, config)
        self.tables = streamjoin.ModelTables(str(root / "models"), workload.name)

    def append(self, batch: dict[str, pa.Table]) -> None:
        """Append one batch of every input as one Delta commit per input."""
        for name, table in batch.items():
            path = self.root / "inputs" / name
            if table.num_rows or not (path / "_delta_log").exists():
                cl.write_batch(path, table)

    def run(self, profiler: Profiler | None = None) -> dict[str, Any]:
        """One ``run_once``: seconds, changes, peak memory, and (with a profiler) the phases."""
        import streamjoin

        since, planned = int(time.time() * 1000), catalyst_seconds(self.spark)
        with PeakMemory() as memory, CpuUse(self.spark) as cpu:
            report = streamjoin.run_once(self.spark, self.plan, self.tables)
        jobs, busy = spark_job_seconds(self.spark, since, int(time.time() * 1000) + 1)
        out = {"seconds": report.seconds, "changes": sum(report.changes_in.values()),
               "rows_out": report.rows_out, "status": report.status, "peak_rss_bytes": memory.peak,
               "spark_jobs": jobs, "spark_job_seconds": round(busy, 3),
               "catalyst_seconds": round(catalyst_seconds(self.spark) - planned, 3), "cpu_seconds": cpu.parts}
        if profiler is not None:
            out["phases"] = profiler.take()
        return out

    def result(self) -> DataFrame:
        """The result table's rows, read from its live files (as the conformance runner does)."""
        from deltalake import DeltaTable
        from pyspark.sql.pandas.types import from_arrow_schema
        from streamjoin.storage import delta_log, file_reads

        path = self.tables.result
        schema = from_arrow_schema(pa.schema(DeltaTable(path).schema().to_arrow()))
        files = delta_log.data_files(path, delta_log.version(path))
        data = StructType([f for f in schema.fields if f.name != "_bucket"])
        return plain(file_reads.read(self.spark, files, data))

    def state_bytes(self) -> int:
        return folder_bytes(os.path.join(self.tables.home, "state"))

    def model_bytes(self) -> int:
        return folder_bytes(self.tables.home)


# --- Flink --------------------------------------------------------------------------------


def _json_text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value as a JSON literal (numbers bare, strings and timestamps quoted)."""
    if column.null_count:
        raise ValueError("the JSON writer expects no nulls in generated data")
    if pa.types.is_timestamp(column.type):
        text = pc.strftime(column, format="%Y-%m-%d %H:%M:%S")
    elif pa.types.is_string(column.type):
        if pc.any(pc.match_substring_regex(column, r'["\\]')).as_py():
            raise ValueError("the JSON writer expects no quotes or backslashes in strings")
        text = column
    else:
        return column.cast(pa.string())
    return pc.binary_join_element_wise('"', text, '"', "")


def write_json(table: pa.Table, path: Path, *, changelog: bool) -> None:
    """Write a changelog as one JSON-lines file: ``debezium-json`` or plain rows (insert-only)."""
    data = table.drop_columns([cl.ROW_KIND])
    parts: list[Any] = []
    for i, name in enumerate(data.column_names):
        parts += [("{" if i == 0 else ",") + f'"{name}":', _json_text(data[name])]
    record = pc.binary_join_element_wise(*parts, "}", "")
    if changelog:
        adds = pc.is_in(table[cl.ROW_KIND], value_set=pa.array(["+I", "+U"]))
        record = pc.if_else(adds, pc.binary_join_element_wise('{"before":null,"after":', record, ',"op":"c"}', ""),
                            pc.binary_join_element_wise('{"before":', record, ',"after":null,"op":"d"}', ""))  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        step = 200_000
        for start in range(0, len(record), step):
            chunk = record.slice(start, step).combine_chunks()
            lines = pa.ListArray.from_arrays(pa.array([0, len(chunk)], pa.int32()), chunk)
            fh.write(pc.binary_join(lines, "\n")[0].as_py() + "\n")


def _flink_type(spark_type: str, *, rowtime: bool = False) -> str:
    return "TIMESTAMP(3)" if rowtime else FLINK_TYPES[spark_type]


def flink_job(name: str, workload: Workload, tables: dict[str, pa.Table], schema: StructType, folder: Path,
              *, parallelism: int, options: dict[str, str] | None = None) -> dict[str, Any]:
    """Write a whole stream as JSON for Flink; return the job spec for ``run_flink``."""
    inputs = []
    for item in workload.inputs:
        write_json(tables[item.name], folder / "in" / item.name / "part-0.json", changelog=workload.changelog)
        cols = [[n, _flink_type(t, rowtime=n == workload.event_time)] for n, t in columns(workload, item)]
        inputs.append({"name": item.name, "path": str(folder / "in" / item.name), "columns": cols,
                       "format": "debezium-json" if workload.changelog else "json",
                       "event_time": workload.event_time,  # a temporal join's versioned input needs its key
                       "primary_key": list(item.unique_key) if workload.kind == "temporal" else []})
    result_columns = [[f.name, FLINK_TYPES[f.dataType.simpleString()]] for f in schema.fields]
    shutil.rmtree(folder / "out", ignore_errors=True)
    return {"name": name, "sql": workload.sql, "inputs": inputs, "output": str(folder / "out"),
            "parallelism": parallelism, "result_columns": result_columns, "options": options or {}}


def run_flink(jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run the jobs one after another in one PyFlink process; each job's report by name.

    ``job_seconds`` is a job's time from submission to its last result file (the whole
    stream); ``peak_rss_bytes`` is the Flink process tree's peak over all the jobs.
    """
    started, load_before = time.perf_counter(), load_average()
    proc = subprocess.Popen([str(FLINK_PYTHON), str(ROOT / "bench" / "flink_job.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakMemory(proc.pid) as memory:
        stdout, stderr = proc.communicate(json.dumps(jobs))
    wall = time.perf_counter() - started
    reports = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            reports[report["name"]] = report
    for job in jobs:
        reports.setdefault(job["name"], {"name": job["name"], "ok": False, "error": stderr[-2000:]})
        reports[job["name"]].update(process_seconds=wall, peak_rss_bytes=memory.peak,
                                    parallelism=job["parallelism"], load_before=load_before,
                                    load_after=load_average())
    return reports


def flink_result(spark: SparkSession, folder: Path, schema: StructType) -> DataFrame:
    """Flink's debezium-json result changelog as a multiset (``_w`` summed per row)."""
    text = StructType([StructField(f.name, StringType() if isinstance(f.dataType, TimestampType) else f.dataType)
                       for f in schema.fields])
    wrapper = StructType([StructField("before", text), StructField("after", text), StructField("op", StringType())])
    raw = spark.read.schema(wrapper).json(str(folder / "out"))
    names = [f.name for f in schema.fields]
    adds = raw.where("op = 'c'").select(*[F.col(f"after.`{n}`").alias(n) for n in names], F.lit(1).alias(WEIGHT))
    drops = raw.where("op = 'd'").select(*[F.col(f"before.`{n}`").alias(n) for n in names], F.lit(-1).alias(WEIGHT))
    typed = adds.unionByName(drops).select(*[F.col(f"`{f.name}`").cast(f.dataType) for f in schema.fields],
                                           F.col(WEIGHT).cast("long").alias(WEIGHT))  # fmt: skip
    return typed.groupBy(*names).agg(F.sum(WEIGHT).alias(WEIGHT)).where(F.col(WEIGHT) != 0)


# --- Spark Structured Streaming (interval joins) -----------------------------------------


def write_stream_files(batches: list[dict[str, pa.Table]], folder: Path) -> None:
    """One Parquet file per batch and input, with increasing modification times (file order)."""
    base = time.time() - len(batches) - 10
    for index, batch in enumerate(batches):
        for name, table in batch.items():
            path = folder / name / f"batch-{index:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table.drop_columns([cl.ROW_KIND]), path)
            os.utime(path, (base + index, base + index))


def spark_streaming(spark: SparkSession, workload: Workload, folder: Path) -> dict[str, Any]:
    """The same SQL as a stream-stream join: availableNow, one file per input per micro-batch,
    RocksDB state store, event-time watermarks (no delay: every input is in time order), and as
    many shuffle partitions as cores: a stateful query keeps its first partition count for good
    (adaptive execution does not coalesce it), and each partition is a state store per side."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    for item in workload.inputs:
        schema = spark.read.parquet(str(folder / "in" / item.name)).schema
        stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                  .parquet(str(folder / "in" / item.name)))
        stream.withWatermark(workload.event_time, "0 seconds").createOrReplaceTempView(item.name)
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(folder / "checkpoint", ignore_errors=True)
    with PeakMemory() as memory:
        started = time.perf_counter()
        query = (spark.sql(workload.spark_sql).writeStream.format("parquet").outputMode("append")
                 .option("checkpointLocation", str(folder / "checkpoint")).trigger(availableNow=True)
                 .start(str(out)))
        query.awaitTermination()
        seconds = time.perf_counter() - started
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    progress = query.recentProgress
    return {"seconds": seconds, "micro_batches": len(progress), "peak_rss_bytes": memory.peak,
            "state_bytes": folder_bytes(str(folder / "checkpoint" / "state"))}


def streaming_result(spark: SparkSession, folder: Path, schema: StructType) -> DataFrame:
    return plain(spark.read.schema(schema).parquet(str(folder / "out")))
