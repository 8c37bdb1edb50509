"""The noisy lane of fair queues, on moto, on DynamoDB Local and on the in-memory store
alike: a range of the visibility index that the main reads never reach, read with its
own bounded query."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.domain.lanes import LANE_BASE, to_noisy_lane
from chalicelib.domain.messages import Message
from dmqlocal.folders import FolderBodyStore
from tests.contract.conftest import Store, stream_counter

# Real time: DynamoDB Local runs TTL, and would delete items whose expires_at is past.
NOW = int(time.time() * 1000)


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test at the time it runs: the counts keep hidden messages by the wall clock's
    minute, so a time taken when the module was collected (minutes before, in a long run)
    would put in-flight and delayed messages in the past."""
    global NOW
    NOW = int(time.time() * 1000)


Q = "000000000000/lanes"


def _messages(store: Store, tmp_path: Path) -> DynamoMessageStore:
    control = store.messages.replace("dmq-messages-", "dmq-control-")
    return DynamoMessageStore(store.dynamodb, store.messages, FolderBodyStore(str(tmp_path)),
                              350_000, ShardCounters(store.dynamodb, control))


def _message(message_id: str, visible_at: int, group: str | None = None) -> Message:
    return Message(message_id, f"body {message_id}", "md5", sent_ms=NOW, visible_at=visible_at,
                   expires_ms=NOW + 10**9, group_id=group)


def test_the_main_read_never_reaches_the_noisy_lane_and_the_lane_read_only_it(
    store: Store, tmp_path: Path
) -> None:
    # GIVEN two main-lane messages (one delayed) and three in the noisy lane (one delayed)
    messages = _messages(store, tmp_path)
    assert not messages.put_messages(Q, [
        (0, _message("a", NOW - 5)), (0, _message("b", NOW + 60_000)),
        (0, _message("n1", to_noisy_lane(NOW - 9), "flood")),
        (0, _message("n2", to_noisy_lane(NOW - 1), "flood")),
        (0, _message("n3", to_noisy_lane(NOW + 60_000), "flood")),
    ])
    # WHEN the main lane is read up to now THEN only its visible message comes
    main = messages.find_candidates(Q, 0, NOW, 10, None)
    assert [c.message_id for c in main.candidates] == ["a"] and not main.more
    # AND the noisy lane read is bounded to the lane and to now, in index order, paged
    first = messages.find_candidates(Q, 0, LANE_BASE + NOW, 1, None, LANE_BASE)
    assert [c.message_id for c in first.candidates] == ["n1"]
    rest = messages.find_candidates(Q, 0, LANE_BASE + NOW, 10, first.candidates[-1], LANE_BASE)
    assert [c.message_id for c in rest.candidates] == ["n2"] and not rest.more


def test_counts_read_no_noisy_lane_and_a_claim_moves_the_message_out_of_it(
    store: Store, tmp_path: Path
) -> None:
    messages = _messages(store, tmp_path)
    assert not messages.put_messages(Q, [(0, _message("a", NOW + 60_000)),
                                         (0, _message("n1", to_noisy_lane(NOW), "flood"))])
    stream_counter(store, messages.counters)()
    # the delayed main-lane message is delayed; the noisy-lane one counts as visible
    counts = messages.count(Q, 0, NOW)
    assert (counts.visible, counts.in_flight, counts.delayed) == (1, 0, 1)
    (candidate,) = messages.find_candidates(Q, 0, LANE_BASE + NOW, 10, None, LANE_BASE).candidates
    claimed = messages.claim(Q, 0, candidate, NOW + 30_000, "tok", NOW)
    assert claimed is not None and claimed.visible_at == NOW + 30_000
    assert claimed.group_id == "flood"
    assert messages.find_candidates(Q, 0, LANE_BASE + NOW + 10**8, 10, None,
                                    LANE_BASE).candidates == []
    stream_counter(store, messages.counters)()  # in-flight counts are the stream's too
    counts = messages.count(Q, 0, NOW)
    assert (counts.visible, counts.in_flight, counts.delayed) == (0, 1, 1)
