"""The counts kept from the messages stream, on moto, on DynamoDB Local and on the
in-memory store alike: real stream records (their sequence numbers, images and ARNs)
counted in once, whatever is handed over again."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.clusters.shard_load import SETTLE_MS, SLOT_MS, ShardLoad
from chalicelib.domain.messages import Counts, Message, MessageRef
from dmqlocal.folders import FolderBodyStore
from tests.contract.conftest import Store, stream_counter

NOW = int(time.time() * 1000)  # DynamoDB Local runs TTL: expiry must be in the future


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test at the time it runs: the counts keep hidden messages by the wall clock's
    minute, so a time taken when the module was collected (minutes before, in a long run)
    would put in-flight and delayed messages in the past."""
    global NOW
    NOW = int(time.time() * 1000)


Q = "000000000000/counted"


def _message(message_id: str) -> Message:
    return Message(message_id, f"body {message_id}", "md5", sent_ms=NOW, visible_at=NOW - 1,
                   expires_ms=NOW + 10**9)


def _stores(store: Store, tmp_path: Path) -> tuple[ShardCounters, DynamoMessageStore]:
    """The control table's counters and the message store over the contract store."""
    control = store.messages.replace("dmq-messages-", "dmq-control-")
    counters = ShardCounters(store.dynamodb, control)
    return counters, DynamoMessageStore(store.dynamodb, store.messages,
                                        FolderBodyStore(str(tmp_path)), 350_000, counters)


def test_sends_deletes_and_a_purge_are_counted_from_the_stream_once(
    store: Store, tmp_path: Path
) -> None:
    counters, messages = _stores(store, tmp_path)
    count_in = stream_counter(store, counters)
    # GIVEN 12 messages in two shards, then 2 of shard 0 deleted
    assert not messages.put_messages(Q, [(i % 2, _message(f"m{i:02d}")) for i in range(12)])
    messages.delete_claimed([MessageRef(Q, 0, "m00", ""), MessageRef(Q, 0, "m02", "")],
                            any_claim=True)
    # WHEN the stream is counted in THEN each shard holds what it holds
    count_in()
    assert [counters.total(store.messages, Q, s) for s in (0, 1)] == [4, 6]
    # WHEN a second reader from the stream's start counts the same records again
    stream_counter(store, counters)()
    # THEN nothing changes
    assert [counters.total(store.messages, Q, s) for s in (0, 1)] == [4, 6]
    # AND a purge of shard 1 counts it out
    assert messages.purge(Q, 1) == 6
    count_in()
    assert [counters.total(store.messages, Q, s) for s in (0, 1)] == [4, 0]


def test_messages_in_flight_and_delayed_are_counted_from_the_stream(
    store: Store, tmp_path: Path
) -> None:
    counters, messages = _stores(store, tmp_path)
    count_in = stream_counter(store, counters)
    # GIVEN 6 messages, 2 of them delayed by five minutes
    later = NOW + 5 * 60_000
    sent = [(0, _message(f"m{i}")) for i in range(4)]
    delayed = [(0, replace(_message(f"d{i}"), visible_at=later)) for i in range(2)]
    assert not messages.put_messages(Q, sent + delayed)
    # WHEN 3 are claimed for ten minutes, and the stream counted in
    page = messages.find_candidates(Q, 0, NOW, 3, None)
    won = messages.claim_many(Q, 0, [(c, f"t{c.message_id}") for c in page.candidates],
                              NOW + 10 * 60_000, NOW)
    assert all(won) and len(won) == 3
    count_in()
    # THEN the counts are what the table holds, from the buckets kept on the count item
    assert messages.count(Q, 0, NOW) == Counts(1, 3, 2)
    counted = counters.read(store.messages, Q, 0)
    assert counted.hidden(NOW)[:2] == (3, 2)
    # AND after the delay, and after the timeout, they turn visible
    assert messages.count(Q, 0, later + 1) == Counts(3, 3, 0)
    assert messages.count(Q, 0, NOW + 10 * 60_000 + 1) == Counts(6, 0, 0)


def test_each_shards_load_is_kept_from_the_stream(store: Store, tmp_path: Path) -> None:
    counters, messages = _stores(store, tmp_path)
    # GIVEN 10 messages into shard 0 and 4 into shard 1, then 3 of shard 0 deleted
    assert not messages.put_messages(Q, [(0 if i < 10 else 1, _message(f"l{i:02d}"))
                                         for i in range(14)])
    messages.delete_claimed([MessageRef(Q, 0, f"l{i:02d}", "") for i in range(3)],
                            any_claim=True)
    stream_counter(store, counters)()
    # WHEN the load is read over a window that holds the slot they were counted in
    now = int(time.time() * 1000) + SLOT_MS + SETTLE_MS  # its slot has ended and settled
    loads = {s: load for (_, s), load in counters.loads(
        store.messages, [(Q, 0), (Q, 1), (Q, 2)], now, 3 * SLOT_MS).items()}
    # THEN each shard's rates are its messages over the window's seconds
    seconds = 3 * SLOT_MS / 1000
    rates = {s: (load.in_per_s, load.out_per_s) for s, load in loads.items()}
    assert rates == {0: (10 / seconds, 3 / seconds), 1: (4 / seconds, 0.0), 2: (0.0, 0.0)}
    # AND slot by slot: all in one slot of the three, at its own rate
    slot_s = SLOT_MS / 1000
    assert sorted(loads[0].slots) == [(0.0, 0.0), (0.0, 0.0), (10 / slot_s, 3 / slot_s)]
    assert loads[2].slots == ((0.0, 0.0),) * 3
    assert ShardLoad().slots == ()
