"""Reading data files inside a Spark job, the files chosen by a frame computed in that same job.

Spark's Parquet scan fixes its file list when the plan is made, but a run learns which state
buckets it touches only as it computes its changes. Choosing the files on the executors keeps
that inside the run's one job: the candidate files are a small frame (uri, partition value),
semi-joined with the wanted partition values, and each task reads its files with pyarrow
through the filesystem of their URI. No job runs first to bring the wanted values to the driver.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from .delta_log import DataFile, arrow_schema

URI = "_uri"


def read_files(spark: SparkSession, files: Sequence[DataFile], schema: StructType) -> DataFrame:
    """The rows (`schema`) of data files, read by the tasks of the job that uses them (Spark's own
    Parquet scan of many files lists them in a job of its own)."""
    if not files:
        return spark.createDataFrame([], schema)
    return read_listed(spark.createDataFrame([(f.uri,) for f in files], f"{URI} string"), schema)


def read_chosen(spark: SparkSession, files: Sequence[DataFile], schema: StructType, *, column: str,
                wanted: DataFrame) -> DataFrame:
    """The rows (`schema`) of those `files` whose partition value of `column` is among `wanted[column]`."""
    if not files:
        return spark.createDataFrame([], schema)
    return read_listed(choose(spark, files, column=column, wanted=wanted), schema)


def choose(spark: SparkSession, files: Sequence[DataFile], *, column: str, wanted: DataFrame) -> DataFrame:
    """The URIs (column `URI`) of those `files` whose partition value of `column` is among `wanted[column]`."""
    listing = spark.createDataFrame([(f.uri, int(f.partition[column])) for f in files], f"{URI} string, {column} int")
    return listing.join(wanted.select(column).distinct(), column, "left_semi").select(URI)


def read_listed(listing: DataFrame, schema: StructType) -> DataFrame:
    """The rows (`schema`) of the files a frame of URIs (column `URI`) lists."""
    return listing.mapInArrow(_reader(arrow_schema(schema)), schema)


def _reader(schema: pa.Schema):
    """The function each task runs over its batches of file URIs."""
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        for batch in batches:
            for uri in batch.column(URI).to_pylist():
                filesystem, path = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), uri)
                table = pq.read_table(path, filesystem=filesystem, columns=schema.names)
                yield from table.cast(schema).to_batches()

    return read
