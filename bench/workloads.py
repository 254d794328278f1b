"""The benchmark workloads: Nexmark joins as SQL over changelog inputs, and their data.

A workload names its inputs (each a Nexmark stream, maybe projected onto some columns),
the SQL every system runs (Spark SQL that Flink also accepts), and the streamjoin
configuration. ``stream(workload, changes)`` builds its input changelogs with about
``changes`` changes in total; ``cut`` takes the same time-consistent prefix of every
input, so a prefix of a workload's stream is a valid smaller stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import changelog as cl
from bench import nexmark as nx


@dataclass(frozen=True)
class Input:
    """One input of a workload: a Nexmark stream, optionally projected onto ``columns``."""

    name: str
    stream: nx.Stream
    columns: tuple[str, ...] = ()  # empty: all of the stream's columns
    unique_key: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return list(self.columns) or nx.SCHEMAS[self.stream].names


@dataclass(frozen=True)
class Workload:
    """A join query over Nexmark inputs, and how to generate and run it."""

    name: str
    kind: str  # "regular", "interval", "multiway", "temporal" or "window"
    sql: str
    inputs: tuple[Input, ...]
    update_fraction: float = 0.0
    delete_fraction: float = 0.0
    events_per_second: int = 10_000
    event_time: str | None = None  # event-time column of every input (interval joins)
    config: dict[str, Any] = field(default_factory=dict)
    requires: str | None = None  # module that must exist for streamjoin to run it
    batch_sql: str | None = None  # Spark SQL's form of ``sql`` for the recompute, where Spark SQL lacks the join

    @property
    def changelog(self) -> bool:
        return self.update_fraction > 0 or self.delete_fraction > 0

    @property
    def spark_sql(self) -> str:
        """The query as Spark SQL runs it (the recompute, Spark Structured Streaming)."""
        return self.batch_sql or self.sql

    @property
    def waits_for_watermark(self) -> bool:
        """Whether results wait for the watermark (Flink fires them all at the end of its input;
        streamjoin once a later row moves the watermark past them: see ``closing``)."""
        return self.kind in ("temporal", "window")


_Q20 = """SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_time,
       A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_time,
       A.expires, A.seller, A.category
FROM bid AS B JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10"""

_Q20_LEFT = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time, A.item_name, A.seller, A.category
FROM bid AS B LEFT JOIN auction AS A ON B.auction = A.id AND A.category = 10"""

_Q3 = """SELECT P.name, P.city, P.state, A.id
FROM auction AS A JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"""

_INTERVAL = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time,
       A.seller, A.category, A.date_time AS auction_time
FROM bid AS B JOIN auction AS A ON B.auction = A.id
 AND B.date_time BETWEEN A.date_time AND A.date_time + INTERVAL '1' SECOND"""

_FOURWAY = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time,
       I.item_name, P.initial_bid, P.reserve, S.seller, S.category
FROM bid AS B
JOIN auction_item AS I ON B.auction = I.id
JOIN auction_price AS P ON B.auction = P.id
JOIN auction_seller AS S ON B.auction = S.id"""

_TEMPORAL = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time, A.seller, A.category,
       A.date_time AS auction_time
FROM bid AS B JOIN auction FOR SYSTEM_TIME AS OF B.date_time AS A ON B.auction = A.id"""

# Spark SQL has no temporal join. Nexmark's auctions are insert-only, one version per id, so the
# version valid at a bid's time is its auction if the auction was created by then.
_TEMPORAL_BATCH = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time, A.seller, A.category,
       A.date_time AS auction_time
FROM bid AS B JOIN auction AS A ON B.auction = A.id AND A.date_time <= B.date_time"""

_WINDOW = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time, A.seller, A.category,
       B.window_start, B.window_end
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)) AS B
JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)) AS A
  ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end"""

# Spark SQL's form of the tumbling window join: window() in derived tables
_WINDOW_BATCH = """SELECT B.auction, B.bidder, B.price, B.date_time AS bid_time, A.seller, A.category,
       B.w.start AS window_start, B.w.end AS window_end
FROM (SELECT *, window(date_time, '10 seconds') AS w FROM bid) AS B
JOIN (SELECT *, window(date_time, '10 seconds') AS w FROM auction) AS A ON B.auction = A.id AND B.w = A.w"""

_BID = Input("bid", "bid")
_AUCTION = Input("auction", "auction", unique_key=("id",))
_PERSON = Input("person", "person", unique_key=("id",))
_CHURN = {"update_fraction": 0.05, "delete_fraction": 0.05}  # 10% of rows updated or deleted

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("q20", "regular", _Q20, (_BID, _AUCTION)),
    Workload("q3", "regular", _Q3, (_AUCTION, _PERSON)),
    Workload("q20_churn", "regular", _Q20, (_BID, _AUCTION), **_CHURN),
    Workload("q3_churn", "regular", _Q3, (_AUCTION, _PERSON), **_CHURN),
    Workload("q20_left_churn", "regular", _Q20_LEFT, (_BID, _AUCTION), **_CHURN),
    Workload("interval", "interval", _INTERVAL, (_BID, _AUCTION), events_per_second=1_000,
             event_time="date_time", requires="streamjoin.operators.interval"),
    Workload("temporal", "temporal", _TEMPORAL, (_BID, _AUCTION), events_per_second=1_000,
             event_time="date_time", batch_sql=_TEMPORAL_BATCH, requires="streamjoin.operators.temporal"),
    Workload("window", "window", _WINDOW, (_BID, _AUCTION), events_per_second=1_000,
             event_time="date_time", batch_sql=_WINDOW_BATCH, requires="streamjoin.operators.window"),
    Workload("fourway_binary", "multiway", _FOURWAY, (
        _BID,
        Input("auction_item", "auction", ("id", "item_name"), ("id",)),
        Input("auction_price", "auction", ("id", "initial_bid", "reserve"), ("id",)),
        Input("auction_seller", "auction", ("id", "seller", "category"), ("id",)),
    ), config={"join_strategy": "binary"}),
)}  # fmt: skip
WORKLOADS["fourway_multi"] = Workload(
    "fourway_multi", "multiway", _FOURWAY, WORKLOADS["fourway_binary"].inputs,
    config={"join_strategy": "multi"}, requires="streamjoin.operators.multiway",
)

SPARK_TYPES = {"int64": "bigint", "int32": "int", "string": "string"}
FLINK_TYPES = {"bigint": "BIGINT", "int": "INT", "string": "STRING", "timestamp": "TIMESTAMP(6)"}


def spark_type(arrow_type: pa.DataType) -> str:
    """The Spark SQL type name of a generated column."""
    return "timestamp" if pa.types.is_timestamp(arrow_type) else SPARK_TYPES[str(arrow_type)]


def columns(workload: Workload, item: Input) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of an input's data columns."""
    schema = nx.SCHEMAS[item.stream]
    return [(name, spark_type(schema.field(name).type)) for name in item.names()]


def stream(workload: Workload, changes: int, seed: int = 7) -> dict[str, pa.Table]:
    """Every input's changelog (data columns + ``_row_kind``), about ``changes`` rows in all."""
    per_event = _changes_per_event(workload)
    config = nx.NexmarkConfig(events=max(int(np.ceil(changes / per_event)), nx.CYCLE), seed=seed,
                              events_per_second=workload.events_per_second,
                              update_fraction=workload.update_fraction,
                              delete_fraction=workload.delete_fraction)  # fmt: skip
    generated = {s: nx.changelog(s, config) for s in {i.stream for i in workload.inputs}}
    return {i.name: generated[i.stream].select([*i.names(), cl.ROW_KIND]) for i in workload.inputs}


def _changes_per_event(workload: Workload) -> float:
    churn = 1 + 2 * workload.update_fraction + workload.delete_fraction
    return sum(nx.SHARE[i.stream] for i in workload.inputs) / nx.CYCLE * churn


def total(tables: dict[str, pa.Table]) -> int:
    return sum(t.num_rows for t in tables.values())


def cut(tables: dict[str, pa.Table], start: int, stop: int) -> dict[str, pa.Table]:
    """Changes ``[start, stop)`` of the whole stream: the same share of every input.

    Every input is cut at the same fraction of its length, so the pieces cover about the
    same stretch of event time and consecutive cuts concatenate to the stream.
    """
    whole = total(tables)
    out = {}
    for name, table in tables.items():
        lo, hi = (int(table.num_rows * x // max(whole, 1)) for x in (start, stop))
        out[name] = table.slice(lo, hi - lo)
    return out


def closing(workload: Workload, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """One insertion per input an hour after the stream's last event, joining nothing (every input's
    integers are its own negative number): the watermark passes every row of the stream, so
    streamjoin emits the results Flink fires at the end of its input."""
    end = max(pc.max(t[workload.event_time]).as_py() for t in tables.values()) + timedelta(hours=1)
    out = {}
    for number, (name, table) in enumerate(tables.items(), start=1):
        data = table.schema.remove(table.schema.get_field_index(cl.ROW_KIND))
        row = {f.name: end if pa.types.is_timestamp(f.type) else "" if pa.types.is_string(f.type) else -number
               for f in data}
        out[name] = cl.with_row_kind(pa.Table.from_pylist([row], schema=data), [0])
    return out


def module_exists(name: str | None) -> bool:
    """Whether the module a workload needs is importable (None: nothing needed)."""
    if name is None:
        return True
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
