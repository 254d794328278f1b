"""Spark registers the data sources of `pyspark_*` modules in every session by itself: this one
gives it `streamjoin_delta` (see `streamjoin.storage.version_source`)."""
from streamjoin.storage.version_source import DeltaVersionSource as DefaultSource

__all__ = ["DefaultSource"]
