"""dbt adapter plugin ``type: streamjoin``: dbt-spark in-process, state in Delta tables."""

from dbt.adapters.base import AdapterPlugin

from dbt.adapters.streamjoin.connections import StreamjoinConnectionManager, StreamjoinCredentials
from dbt.adapters.streamjoin.impl import StreamjoinAdapter
from dbt.include import streamjoin

__all__ = ["Plugin", "StreamjoinAdapter", "StreamjoinConnectionManager", "StreamjoinCredentials"]

Plugin = AdapterPlugin(
    adapter=StreamjoinAdapter,  # type: ignore[arg-type]
    credentials=StreamjoinCredentials,
    include_path=streamjoin.PACKAGE_PATH,
    dependencies=["spark"],
)
