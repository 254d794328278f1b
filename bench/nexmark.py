"""Seeded, vectorised Nexmark-style streams (person, auction, bid) as changelogs.

The global event sequence follows Nexmark: of every 50 events, 1 is a person, 3 are
auctions and 46 are bids. Event ``i`` happens at ``start + i / events_per_second``,
minus a random lag of at most ``lateness_ms`` (so ``max(date_time) - lateness`` is a
valid watermark). Sellers, bidders and bid auctions are drawn from the most recent
persons/auctions with a Zipf law over recency (``skew``), so bids concentrate on hot,
recent auctions.

Updates and deletes (``update_fraction``, ``delete_fraction``) follow the rules of
``bench.changelog``; they never change a row's ``KEYS`` (so join keys stay put) and keep
its ``date_time``. Person updates move the person to another city (and maybe state),
auction updates raise the reserve and extend ``expires``, bid updates raise the price.

Example:
    >>> config = NexmarkConfig(events=1_000, seed=1, update_fraction=0.05)
    >>> changelog("bid", config).column_names[-1]
    '_row_kind'

Run ``python bench/nexmark.py --help`` for the command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: `python bench/nexmark.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import changelog as cl
from bench.changelog import Columns, Ints

Stream = Literal["person", "auction", "bid"]
STREAMS: tuple[Stream, ...] = ("person", "auction", "bid")
CYCLE = 50
SHARE: dict[Stream, int] = {"person": 1, "auction": 3, "bid": 46}  # events per cycle
_FIRST_OFFSET: dict[Stream, int] = {"person": 0, "auction": 1, "bid": 4}
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
CATEGORIES = 5
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
          "Bend", "Redmond", "Seattle", "Kent", "Cheyenne")  # fmt: skip
STATES = ("AZ", "CA", "CA", "ID", "OR", "OR", "WA", "WA", "WA", "WY")  # of each city
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie",
               "Sarah", "Deiter", "Walter")  # fmt: skip
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith",
              "Jones", "Noris")  # fmt: skip
START_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
_DOMAINS = 100  # pool sizes of random strings
_ITEMS = 1_000
_RANK_TABLE = 1 << 16

TIMESTAMP = pa.timestamp("us", tz="UTC")
SCHEMAS: dict[Stream, pa.Schema] = {
    "person": pa.schema([("id", pa.int64()), ("name", pa.string()), ("email", pa.string()),
                         ("city", pa.string()), ("state", pa.string()),
                         ("date_time", TIMESTAMP)]),
    "auction": pa.schema([("id", pa.int64()), ("item_name", pa.string()),
                          ("description", pa.string()), ("initial_bid", pa.int64()),
                          ("reserve", pa.int64()), ("date_time", TIMESTAMP),
                          ("expires", TIMESTAMP), ("seller", pa.int64()),
                          ("category", pa.int32())]),
    "bid": pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                      ("channel", pa.string()), ("url", pa.string()),
                      ("date_time", TIMESTAMP)]),
}  # fmt: skip
KEYS: dict[Stream, tuple[str, ...]] = {
    "person": ("id",),
    "auction": ("id",),
    "bid": ("auction", "bidder", "date_time"),  # identity kept by updates; not unique
}
"""Columns an update never changes. Join keys (seller, auction, bidder) are among them."""


class ConfigError(ValueError):
    """Raised when a NexmarkConfig option is out of range; lists every problem."""


@dataclass(frozen=True, kw_only=True)
class NexmarkConfig:
    """What to generate: ``events`` Nexmark events, split 1:3:46 into person/auction/bid.

    ``update_fraction``/``delete_fraction`` are changes per inserted row; changes land
    ``mean_change_delay`` events (on average) after the row they change.
    """

    events: int
    seed: int = 0
    events_per_second: int = 10_000
    lateness_ms: int = 0
    skew: float = 1.5
    active_persons: int = 1_000
    in_flight_auctions: int = 100
    update_fraction: float = 0.0
    delete_fraction: float = 0.0
    mean_change_delay: int = 10_000

    def __post_init__(self) -> None:
        checks = {
            "events": self.events >= 0,
            "events_per_second": 0 < self.events_per_second <= 1_000_000,
            "lateness_ms": self.lateness_ms >= 0,
            "skew": self.skew >= 0,
            "active_persons": self.active_persons >= 1,
            "in_flight_auctions": self.in_flight_auctions >= 1,
            "update_fraction": self.update_fraction >= 0,
            "delete_fraction": 0 <= self.delete_fraction <= 1,
            "mean_change_delay": self.mean_change_delay > 0,
        }
        bad = [f"{name}={getattr(self, name)!r}" for name, ok in checks.items() if not ok]
        if bad:
            raise ConfigError(f"out of range: {', '.join(bad)}; see NexmarkConfig's docstring")

    @classmethod
    def for_bids(cls, bids: int, **options: Any) -> NexmarkConfig:
        """A config with enough events for (at least) ``bids`` bids."""
        cycles = -(-bids // SHARE["bid"])
        return cls(events=cycles * CYCLE, **options)

    def append_only(self) -> NexmarkConfig:
        """The same streams without updates or deletes (for interval joins)."""
        return dataclasses.replace(self, update_fraction=0.0, delete_fraction=0.0)

    @property
    def plan(self) -> cl.ChangePlan:
        """The change plan applied to every stream."""
        return cl.ChangePlan(update_fraction=self.update_fraction,
                             delete_fraction=self.delete_fraction,
                             mean_delay=float(self.mean_change_delay))  # fmt: skip


# --- public entry points ---------------------------------------------------------------


def changelog(stream: Stream, config: NexmarkConfig) -> pa.Table:
    """The stream as a changelog: data columns plus ``_row_kind``; all ``+I`` if append-only."""
    count = stream_count(stream, config.events)
    positions = event_positions(stream, count)
    inserts = _GENERATORS[stream](positions, config, _rng(config, stream, "events"))
    rng = _rng(config, stream, "changes")
    rows, kinds = cl.build(inserts, positions, REVISE[stream], config.plan, rng)
    return cl.with_row_kind(_materialize(stream, rows, config), kinds)


def events(stream: Stream, config: NexmarkConfig) -> pa.Table:
    """The stream's insert-only rows, in event order, with schema ``SCHEMAS[stream]``."""
    return changelog(stream, config.append_only()).drop_columns([cl.ROW_KIND])


def stream_count(stream: Stream, events: int | Ints) -> Ints:
    """How many of the first ``events`` global events belong to ``stream``."""
    full, rest = np.divmod(np.asarray(events, dtype=np.int64), CYCLE)
    return full * SHARE[stream] + np.clip(rest - _FIRST_OFFSET[stream], 0, SHARE[stream])


def event_positions(stream: Stream, count: int | Ints) -> Ints:
    """Global event index of each of the stream's first ``count`` rows."""
    k = np.arange(int(count), dtype=np.int64)
    return CYCLE * (k // SHARE[stream]) + _FIRST_OFFSET[stream] + k % SHARE[stream]


# --- generators: numpy columns, strings as indexes into pools ---------------------------

_Generate = Callable[[Ints, NexmarkConfig, np.random.Generator], Columns]


def _person(positions: Ints, config: NexmarkConfig, rng: np.random.Generator) -> Columns:
    n = len(positions)
    return {
        "id": FIRST_PERSON_ID + np.arange(n, dtype=np.int64),
        "name": rng.integers(0, len(FIRST_NAMES) * len(LAST_NAMES), n),
        "domain": rng.integers(0, _DOMAINS, n),
        "city": rng.integers(0, len(CITIES), n),
        "date_time": _event_time(positions, config, rng),
    }


def _auction(positions: Ints, config: NexmarkConfig, rng: np.random.Generator) -> Columns:
    n = len(positions)
    date_time = _event_time(positions, config, rng)
    initial_bid = _price(rng, n)
    mean_length = config.in_flight_auctions * CYCLE / SHARE["auction"] * _event_us(config)
    persons = stream_count("person", positions)
    return {
        "id": FIRST_AUCTION_ID + np.arange(n, dtype=np.int64),
        "item_name": rng.integers(0, _ITEMS, n),
        "description": rng.integers(0, _ITEMS, n),
        "initial_bid": initial_bid,
        "reserve": initial_bid + _price(rng, n),
        "date_time": date_time,
        "expires": date_time + (mean_length * rng.uniform(0.5, 1.5, n)).astype(np.int64),
        "seller": FIRST_PERSON_ID + _recent(rng, persons, config.active_persons, config.skew),
        "category": FIRST_CATEGORY_ID + rng.integers(0, CATEGORIES, n),
    }


def _bid(positions: Ints, config: NexmarkConfig, rng: np.random.Generator) -> Columns:
    n = len(positions)
    auctions = stream_count("auction", positions)
    persons = stream_count("person", positions)
    hot = rng.random(n) < 0.5  # Nexmark's hot channel ratio of 2
    return {
        "auction": FIRST_AUCTION_ID
        + _recent(rng, auctions, config.in_flight_auctions, config.skew),
        "bidder": FIRST_PERSON_ID + _recent(rng, persons, config.active_persons, config.skew),
        "price": _price(rng, n),
        "channel": np.where(
            hot, rng.integers(0, len(HOT_CHANNELS), n), rng.integers(0, CHANNELS, n)
        ),
        "date_time": _event_time(positions, config, rng),
    }


_GENERATORS: dict[Stream, _Generate] = {"person": _person, "auction": _auction, "bid": _bid}


# --- revisions: what an update changes ---------------------------------------------------


def _revise_person(rows: Columns, version: Ints) -> Columns:
    """A person moves: version ``v`` lives ``v`` cities further along ``CITIES``."""
    return {**rows, "city": (rows["city"] + version) % len(CITIES)}


def _revise_auction(rows: Columns, version: Ints) -> Columns:
    """Each version raises the reserve by 10% and extends the auction by a minute."""
    reserve = rows["reserve"]
    return {
        **rows,
        "reserve": reserve + version * np.maximum(reserve // 10, 1),
        "expires": rows["expires"] + version * 60_000_000,
    }


def _revise_bid(rows: Columns, version: Ints) -> Columns:
    """Each version raises the price by 10%."""
    price = rows["price"]
    return {**rows, "price": price + version * np.maximum(price // 10, 1)}


REVISE: dict[Stream, cl.Revise] = {
    "person": _revise_person,
    "auction": _revise_auction,
    "bid": _revise_bid,
}


# --- materialization: numpy columns to the Arrow schema ----------------------------------


def _materialize(stream: Stream, rows: Columns, config: NexmarkConfig) -> pa.Table:
    """Build the Arrow table: look strings up in their pools, cast to ``SCHEMAS[stream]``."""
    strings = _STRINGS[stream](rows, config)
    schema = SCHEMAS[stream]
    columns = [strings[f.name] if f.name in strings else _array(rows[f.name], f.type)
               for f in schema]  # fmt: skip
    return pa.Table.from_arrays(columns, schema=schema)


def _person_strings(rows: Columns, config: NexmarkConfig) -> dict[str, pa.Array]:
    domains = _random_strings(np.random.default_rng([config.seed, 7]), _DOMAINS, 5)
    email = pc.binary_join_element_wise(
        _logins().take(rows["name"]), pa.array(rows["id"]).cast(pa.string()), "@",
        domains.take(rows["domain"]), ".com", "",
    )  # fmt: skip
    return {
        "name": _names().take(rows["name"]),
        "email": email,
        "city": _pick(CITIES, rows["city"]),
        "state": _pick(STATES, rows["city"]),
    }


def _auction_strings(rows: Columns, config: NexmarkConfig) -> dict[str, pa.Array]:
    pool = np.random.default_rng([config.seed, 8])
    items, descriptions = _random_strings(pool, _ITEMS, 20), _random_strings(pool, _ITEMS, 100)
    return {
        "item_name": items.take(rows["item_name"]),
        "description": descriptions.take(rows["description"]),
    }


def _bid_strings(rows: Columns, config: NexmarkConfig) -> dict[str, pa.Array]:
    names, urls = _channels()
    return {"channel": names.take(rows["channel"]), "url": urls.take(rows["channel"])}


_STRINGS: dict[Stream, Callable[[Columns, NexmarkConfig], dict[str, pa.Array]]] = {
    "person": _person_strings,
    "auction": _auction_strings,
    "bid": _bid_strings,
}


# --- helpers -------------------------------------------------------------------------


def _rng(
    config: NexmarkConfig, stream: Stream, purpose: Literal["events", "changes"]
) -> np.random.Generator:
    """An independent generator per (seed, stream, purpose): streams don't perturb each other."""
    return np.random.default_rng([config.seed, STREAMS.index(stream), int(purpose == "changes")])


def _event_us(config: NexmarkConfig) -> float:
    return 1_000_000 / config.events_per_second


def _event_time(positions: Ints, config: NexmarkConfig, rng: np.random.Generator) -> Ints:
    """Microseconds: nominal time of each event, minus a random lag up to ``lateness_ms``."""
    lateness_us = config.lateness_ms * 1000
    nominal = START_US + lateness_us + positions * 1_000_000 // config.events_per_second
    return nominal - rng.integers(0, lateness_us + 1, len(positions))


def _recent(rng: np.random.Generator, available: Ints, window: int, skew: float) -> Ints:
    """Ordinal of a recent row: rank ``r`` back from the newest with P(r) ∝ (r+1)^-skew.

    Ranks run over ``window`` rows (wrapping around where fewer are ``available``) and
    are drawn from a 2^16-entry inverse-CDF table, so probabilities are exact to 2^-16.
    """
    rank = _rank_table(window, skew)[rng.integers(0, _RANK_TABLE, len(available), dtype=np.int32)]
    return available - 1 - rank % np.maximum(available, 1)


@functools.cache
def _rank_table(window: int, skew: float) -> Ints:
    weights = np.arange(1, window + 1, dtype=np.float64) ** -skew
    cdf = np.cumsum(weights) / weights.sum()
    quantiles = (np.arange(_RANK_TABLE) + 0.5) / _RANK_TABLE
    return np.minimum(np.searchsorted(cdf, quantiles, side="right"), window - 1)


def _price(rng: np.random.Generator, n: int) -> Ints:
    """Nexmark's price law: 100 × 10^U(0, 6), log-uniform from 1 to 1,000,000 dollars in cents."""
    return np.rint(100 * 10 ** (rng.random(n) * 6)).astype(np.int64)


def _pick(values: tuple[str, ...], index: Ints) -> pa.Array:
    return pa.array(values, type=pa.string()).take(pa.array(index))


def _array(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(type_):
        return pa.array(values, type=pa.int64()).cast(type_)
    return pa.array(values).cast(type_)


def _random_strings(rng: np.random.Generator, count: int, length: int) -> pa.Array:
    """``count`` random lowercase strings of ``length`` letters."""
    letters = rng.integers(ord("a"), ord("z") + 1, size=(count, length), dtype=np.uint8)
    return pa.array(letters.view(f"S{length}").ravel()).cast(pa.string())


@functools.cache
def _names() -> pa.Array:
    return pa.array([f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES])


@functools.cache
def _logins() -> pa.Array:
    return pa.array([f"{f}.{last}".lower() for f in FIRST_NAMES for last in LAST_NAMES])


@functools.cache
def _channels() -> tuple[pa.Array, pa.Array]:
    """Names and URLs of the channel pool; the first few are the hot channels."""
    names = [*HOT_CHANNELS, *(f"channel-{i}" for i in range(len(HOT_CHANNELS), CHANNELS))]
    urls = [f"https://www.nexmark.com/{n.lower()}/item.htm?query=1&channel_id={i}"
            for i, n in enumerate(names)]  # fmt: skip
    return pa.array(names), pa.array(urls)


# --- command line ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Write the three changelogs as Delta tables under ``--out`` and print counts and timings."""
    args = _parser().parse_args(argv)
    config = NexmarkConfig(events=args.events, seed=args.seed, lateness_ms=args.lateness_ms,
                           skew=args.skew, update_fraction=args.update_fraction,
                           delete_fraction=args.delete_fraction)  # fmt: skip
    for stream in STREAMS:
        started = time.perf_counter()
        table = changelog(stream, config)
        generated = time.perf_counter()
        commits = cl.write_changelog(Path(args.out) / stream, table, batch_size=args.batch_size)
        written = time.perf_counter()
        kinds = {k["values"]: k["counts"] for k in pc.value_counts(table[cl.ROW_KIND]).to_pylist()}
        counts = " ".join(f"{kind}={kinds.get(kind, 0):,}" for kind in cl.ROW_KINDS)
        print(f"{stream:8} {table.num_rows:>11,} rows ({counts}) "
              f"generated in {generated - started:.2f}s "
              f"({table.num_rows / max(generated - started, 1e-9):,.0f} rows/s), "
              f"written in {written - generated:.2f}s ({commits} commits)")  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, required=True, help="Nexmark events in total")
    parser.add_argument("--out", required=True, help="directory for the person/auction/bid tables")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--update-fraction", type=float, default=0.0)
    parser.add_argument("--delete-fraction", type=float, default=0.0)
    parser.add_argument("--lateness-ms", type=int, default=0)
    parser.add_argument("--skew", type=float, default=1.5)
    parser.add_argument("--batch-size", type=int, default=None, help="changes per Delta commit")
    return parser


if __name__ == "__main__":
    main()
