"""The Nexmark changelog generator: determinism, shape, consistency, snapshots, Delta."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import changelog as cl
from bench import nexmark as nx

CHURN = nx.NexmarkConfig(
    events=5_000, seed=3, update_fraction=0.3, delete_fraction=0.2, mean_change_delay=200
)


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    """The table's rows as tuples, in order."""
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def replay(changelog: pa.Table) -> Counter[tuple[object, ...]]:
    """Apply a changelog row by row to a multiset, failing on any retraction of a dead row."""
    live: Counter[tuple[object, ...]] = Counter()
    kinds = changelog[cl.ROW_KIND].to_pylist()
    for row, kind in zip(rows(changelog.drop_columns([cl.ROW_KIND])), kinds, strict=True):
        if kind in ("+I", "+U"):
            live[row] += 1
        else:
            assert live[row] > 0, f"{kind} retracts a row that is not live: {row}"
            live[row] -= 1
    return +live


def key_of(stream: nx.Stream, table: pa.Table) -> list[tuple[object, ...]]:
    return rows(table.select(list(nx.KEYS[stream])))


# --- determinism and shape ------------------------------------------------------------


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_same_seed_same_changelog(stream: nx.Stream) -> None:
    assert nx.changelog(stream, CHURN).equals(nx.changelog(stream, CHURN))


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_other_seed_other_changelog(stream: nx.Stream) -> None:
    other = dataclasses.replace(CHURN, seed=4)
    assert not nx.changelog(stream, CHURN).equals(nx.changelog(stream, other))


def test_changes_do_not_perturb_the_inserted_rows() -> None:
    assert nx.events("bid", CHURN).equals(nx.changelog("bid", CHURN.append_only()).drop_columns(
        [cl.ROW_KIND]
    ))  # fmt: skip


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_schema_is_nexmarks_plus_row_kind(stream: nx.Stream) -> None:
    expected = nx.SCHEMAS[stream].append(pa.field(cl.ROW_KIND, pa.string()))
    assert nx.changelog(stream, CHURN).schema == expected


def test_proportions_are_one_three_forty_six() -> None:
    config = nx.NexmarkConfig(events=50_000)
    counts = {stream: nx.events(stream, config).num_rows for stream in nx.STREAMS}
    assert counts == {"person": 1_000, "auction": 3_000, "bid": 46_000}


def test_for_bids_generates_at_least_that_many_bids() -> None:
    assert nx.events("bid", nx.NexmarkConfig.for_bids(1_000)).num_rows >= 1_000


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_change_counts_follow_the_fractions(stream: nx.Stream) -> None:
    inserts = nx.events(stream, CHURN).num_rows
    kinds = Counter(nx.changelog(stream, CHURN)[cl.ROW_KIND].to_pylist())
    updates, deletes = round(0.3 * inserts), round(0.2 * inserts)
    assert kinds == {"+I": inserts, "-U": updates, "+U": updates, "-D": deletes}


def test_bids_reference_auctions_and_persons_that_exist() -> None:
    config = nx.NexmarkConfig(events=20_000, seed=1)
    bids = nx.events("bid", config)
    positions = nx.event_positions("bid", bids.num_rows)
    auction = bids["auction"].to_numpy() - nx.FIRST_AUCTION_ID
    bidder = bids["bidder"].to_numpy() - nx.FIRST_PERSON_ID
    assert (0 <= auction).all() and (auction < nx.stream_count("auction", positions)).all()
    assert (0 <= bidder).all() and (bidder < nx.stream_count("person", positions)).all()


@pytest.mark.parametrize(("skew", "low", "high"), [(0.0, 0.0, 0.05), (1.5, 0.3, 0.55)])
def test_skew_sends_bids_to_the_newest_auction(skew: float, low: float, high: float) -> None:
    bids = nx.events("bid", nx.NexmarkConfig(events=50_000, seed=2, skew=skew))
    newest = nx.FIRST_AUCTION_ID - 1 + nx.stream_count(
        "auction", nx.event_positions("bid", bids.num_rows)
    )
    share = float(np.mean(bids["auction"].to_numpy() == newest))
    assert low <= share <= high


def test_without_lateness_event_times_increase() -> None:
    times = nx.events("bid", nx.NexmarkConfig(events=10_000)).column("date_time")
    assert (np.diff(times.cast(pa.int64()).to_numpy()) > 0).all()


def test_with_lateness_every_event_is_at_or_after_the_watermark() -> None:
    config = nx.NexmarkConfig(events=10_000, lateness_ms=3)
    times = nx.events("bid", config)["date_time"].cast(pa.int64()).to_numpy()
    watermark = np.maximum.accumulate(times) - 3_000
    assert (times[1:] >= watermark[:-1]).all()
    assert (np.diff(times) < 0).any(), "expected some disorder"


def test_auctions_expire_after_they_start() -> None:
    auctions = nx.events("auction", CHURN)
    start, end = (auctions[c].cast(pa.int64()).to_numpy() for c in ("date_time", "expires"))
    assert (end > start).all()


def test_invalid_config_lists_every_problem() -> None:
    with pytest.raises(nx.ConfigError, match="events=-1.*delete_fraction=2"):
        nx.NexmarkConfig(events=-1, delete_fraction=2)


# --- changelog consistency ------------------------------------------------------------


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_replay_never_retracts_a_dead_row(stream: nx.Stream) -> None:
    replay(nx.changelog(stream, CHURN))


@pytest.mark.parametrize("stream", nx.STREAMS)
def test_update_before_is_followed_by_its_update_after(stream: nx.Stream) -> None:
    changes = nx.changelog(stream, CHURN)
    kinds = changes[cl.ROW_KIND].to_pylist()
    data, keys = rows(changes.drop_columns([cl.ROW_KIND])), key_of(stream, changes)
    for i, kind in enumerate(kinds):
        if kind == "-U":
            assert kinds[i + 1] == "+U" and keys[i + 1] == keys[i] and data[i + 1] != data[i]
        if kind == "+U":
            assert kinds[i - 1] == "-U"


@pytest.mark.parametrize("stream", ["person", "auction"])
def test_no_change_after_a_delete(stream: nx.Stream) -> None:
    changes = nx.changelog(stream, CHURN)
    deleted: set[tuple[object, ...]] = set()
    for key, kind in zip(key_of(stream, changes), changes[cl.ROW_KIND].to_pylist(), strict=True):
        assert key not in deleted, f"{kind} of deleted key {key}"
        if kind == "-D":
            deleted.add(key)
    assert deleted


def test_rows_are_updated_more_than_once() -> None:
    changes = nx.changelog("person", CHURN)
    before = changes.filter(pc.equal(changes[cl.ROW_KIND], "-U"))
    updated = Counter(key_of("person", before))
    assert max(updated.values()) >= 2


@settings(max_examples=25, deadline=None)
@given(
    stream=st.sampled_from(nx.STREAMS),
    seed=st.integers(0, 2**32 - 1),
    events=st.integers(0, 1_500),
    update_fraction=st.floats(0, 2),
    delete_fraction=st.floats(0, 1),
    mean_change_delay=st.integers(1, 2_000),
)
def test_any_config_gives_a_consistent_changelog_and_its_snapshot(
    stream: nx.Stream, seed: int, events: int, update_fraction: float,
    delete_fraction: float, mean_change_delay: int,
) -> None:  # fmt: skip
    config = nx.NexmarkConfig(events=events, seed=seed, update_fraction=update_fraction,
                              delete_fraction=delete_fraction,
                              mean_change_delay=mean_change_delay)  # fmt: skip
    changes = nx.changelog(stream, config)
    live = replay(changes)
    assert Counter(rows(cl.snapshot(changes))) == live


# --- snapshots, batches and Delta -----------------------------------------------------


@pytest.mark.parametrize("upto", [0, 1, 777, 2_000, None])
def test_snapshot_equals_a_replay_of_the_prefix(upto: int | None) -> None:
    changes = nx.changelog("auction", CHURN)
    prefix = changes if upto is None else changes.slice(0, upto)
    snapshot = cl.snapshot(changes, upto)
    assert snapshot.schema == nx.SCHEMAS["auction"]
    assert Counter(rows(snapshot)) == replay(prefix)


def test_snapshot_of_an_append_only_stream_is_the_stream() -> None:
    config = CHURN.append_only()
    assert cl.snapshot(nx.changelog("bid", config)).equals(nx.events("bid", config))


def test_snapshot_rejects_a_retraction_of_a_dead_row() -> None:
    changes = nx.changelog("person", CHURN.append_only()).slice(0, 2)
    kinds = pa.array(["+I", "-D", "-D"])
    bad = pa.concat_tables([changes, changes.slice(0, 1)]).set_column(
        len(changes.schema) - 1, cl.ROW_KIND, kinds
    )
    with pytest.raises(cl.ChangelogError, match="not live"):
        cl.snapshot(bad)


def test_snapshot_rejects_an_unknown_row_kind() -> None:
    changes = nx.changelog("person", CHURN.append_only()).slice(0, 1)
    bad = changes.set_column(len(changes.schema) - 1, cl.ROW_KIND, pa.array(["+X"]))
    with pytest.raises(cl.ChangelogError, match=r"\+X"):
        cl.snapshot(bad)


def test_batches_cut_consecutive_slices() -> None:
    changes = nx.changelog("bid", CHURN)
    parts = list(cl.batches(changes, 1_000))
    assert [p.num_rows for p in parts[:-1]] == [1_000] * (len(parts) - 1)
    assert 0 < parts[-1].num_rows <= 1_000
    assert pa.concat_tables(parts).equals(changes)


def test_delta_round_trip(tmp_path: Path) -> None:
    changes = nx.changelog("auction", CHURN)
    commits = cl.write_changelog(tmp_path / "auction", changes, batch_size=2_000)
    table = DeltaTable(str(tmp_path / "auction"))
    assert table.version() == commits - 1 == -(-changes.num_rows // 2_000) - 1
    back = table.to_pyarrow_table()
    assert back.schema == changes.schema
    assert Counter(rows(back)) == Counter(rows(changes))


def test_cli_writes_three_delta_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nx.main(["--events", "2000", "--out", str(tmp_path), "--seed", "1",
             "--update-fraction", "0.05", "--delete-fraction", "0.05"])  # fmt: skip
    out = capsys.readouterr().out
    for stream in nx.STREAMS:
        assert stream in out
        expected = nx.changelog(stream, nx.NexmarkConfig(
            events=2000, seed=1, update_fraction=0.05, delete_fraction=0.05
        ))  # fmt: skip
        assert DeltaTable(str(tmp_path / stream)).to_pyarrow_table().num_rows == expected.num_rows
