"""A streamjoin session leaves the rest of Spark working: a Structured Streaming query with
Spark's RocksDB state store runs beside it (it failed while sessions switched `file:` to Hadoop's
raw local file system, which `FileSystem.getLocal` cannot return)."""
from __future__ import annotations

from streamjoin.runtime.run import session_conf


def test_a_stream_stream_join_with_the_rocksdb_state_store_runs_in_the_session(spark, tmp_path):
    # a state store per partition: at Spark's 200 the query takes 80 s, not 7
    with session_conf(spark, {"spark.sql.streaming.stateStore.providerClass":
                              "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                              "spark.sql.shuffle.partitions": "1"}):
        for name in ("a", "b"):
            spark.range(20).selectExpr("id AS k", "timestamp_seconds(id + 1000) AS ts").write.parquet(str(tmp_path / name))
            (spark.readStream.schema("k long, ts timestamp").parquet(str(tmp_path / name))
             .withWatermark("ts", "0 seconds").createOrReplaceTempView(f"stream_{name}"))
        joined = spark.sql("SELECT a.k FROM stream_a a JOIN stream_b b "
                           "ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 MINUTE")
        query = (joined.writeStream.format("parquet").outputMode("append")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
                 .start(str(tmp_path / "out")))
        query.awaitTermination(300)
        assert query.exception() is None
        assert sorted(r.k for r in spark.read.parquet(str(tmp_path / "out")).collect()) == list(range(20))
