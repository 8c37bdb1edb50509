"""The FIFO store (`FifoStore`) on moto, on DynamoDB Local and in memory (its twin) alike:
two front ends sending to one group commit in sequence order, duplicates return the
original, a claim holds the group, deleting the hold releases or removes it, a resharded
send numbers and deduplicates across shards, and visibility changes, moves, receive
attempts, counts, purges and peeks agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.domain.messages import Counts, Message, MessageRef
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.dynamo import DynamoFifoStore
from chalicelib.fifo.store import FifoStore, GroupState, SendLayout
from dmqlocal.folders import FolderBodyStore
from tests.clocks import FakeClock
from tests.contract.conftest import Store, stream_counter
from tests.unit.memory_fifo_store import MemoryFifoStore, MemoryFifoTable

QUEUE = "000000000000/orders.fifo"


TWINS = ["store", "memory"]


class FrontEnds:
    """Makes front ends over one table, and counts its stream into their count items."""

    def __init__(self, make: Callable[[], FifoStore],
                 count_in: Callable[[], None] = lambda: None) -> None:
        self._make = make
        self.count_in = count_in  # as the counting stream handler does (the twin: no-op)

    def __call__(self) -> FifoStore:
        return self._make()


@pytest.fixture(params=TWINS)
def front_ends(request: pytest.FixtureRequest, store: Store, tmp_path: Path) -> FrontEnds:
    """Front ends over one table: DynamoDB's (moto or DynamoDB Local), or the twin's."""
    if request.param == "memory":
        table = MemoryFifoTable()
        return FrontEnds(lambda: MemoryFifoStore(table))
    control = store.messages.replace("dmq-messages-", "dmq-control-")

    def dynamo() -> FifoStore:
        base = DynamoMessageStore(store.dynamodb, store.messages,
                                  FolderBodyStore(str(tmp_path)), 350_000,
                                  ShardCounters(store.dynamodb, control))
        return DynamoFifoStore(base)

    # The counting handler's clock, where the tests' times are (it keeps no past bucket).
    counters = ShardCounters(store.dynamodb, control, clock=FakeClock(1_000))
    return FrontEnds(dynamo, stream_counter(store, counters))


def _message(number: int, dedup: str | None = None, now: int = 1_000) -> Message:
    return Message(message_id=f"00000000-0000-7000-8000-{number:012d}", body=f"m{number}",
                   body_md5="x", sent_ms=now, visible_at=now, expires_ms=now + 60_000,
                   group_id="g", dedup_id=dedup or f"d{number}")


def test_two_front_ends_commit_a_group_in_sequence_order(
        front_ends: FrontEnds) -> None:
    first, second = front_ends(), front_ends()
    # GIVEN front end 1 reserved its block, then front end 2 reserved a higher one and sent
    a = first.send(QUEUE, "queue", [(0, _message(1))], 1_000)[0].message
    b = second.send(QUEUE, "queue", [(0, _message(2))], 1_000)[0].message
    # WHEN front end 1 sends again from its (now lower) block
    c = first.send(QUEUE, "queue", [(0, _message(3))], 1_000)[0].message
    # THEN its message gets a number above every earlier one of the group
    numbers = [int(m.sequence_number or "0") for m in (a, b, c)]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    head = first.head(QUEUE, 0, "g", 10)
    assert [e.message.body for e in head] == ["m1", "m2", "m3"]
    # AND a duplicate from either front end returns the original
    again = second.send(QUEUE, "queue", [(0, _message(4, dedup="d1"))], 2_000)[0]
    assert again.duplicate and again.message.message_id == a.message_id
    assert again.message.sequence_number == a.sequence_number


def test_a_purge_ends_the_deduplication_of_the_ids_sent_by_it(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    # GIVEN d1 sent at 1 s, d2 at 3 s, and a purge at 2 s
    first = fifo_store.send(QUEUE, "messageGroup", [(0, _message(1))], 1_000)[0].message
    fifo_store.send(QUEUE, "messageGroup", [(0, _message(2))], 3_000)
    # WHEN both ids are sent again at 4 s, within their windows
    again = fifo_store.send(QUEUE, "messageGroup", [(0, _message(3, dedup="d1")),
                                                    (0, _message(4, dedup="d2"))],
                            4_000, purged_ms=2_000)
    # THEN the one sent before the purge is new, the one sent after it a duplicate
    assert [o.duplicate for o in again] == [False, True]
    assert again[0].message.message_id != first.message_id
    # AND the new one deduplicates from then on
    thrice = fifo_store.send(QUEUE, "messageGroup", [(0, _message(5, dedup="d1"))], 5_000,
                             purged_ms=2_000)[0]
    assert thrice.duplicate and thrice.message.message_id == again[0].message.message_id


def test_a_claim_holds_the_group_and_deleting_the_hold_removes_it(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    fifo_store.send(QUEUE, "queue", [(0, _message(1)), (0, _message(2))], 1_000)
    (group,) = fifo_store.ready_groups(QUEUE, 0, 2_000, 10)
    entries = fifo_store.head(QUEUE, 0, "g", 10)
    token = fifo.claim_token("t", 2, entries[-1].message.sequence_number or "")
    # WHEN one receiver claims the group, a second claim of the same view loses
    assert fifo_store.claim(QUEUE, [(group, entries, token)], 32_000, 2_000) == [0]
    assert fifo_store.claim(QUEUE, [(group, entries, token)], 32_000, 2_000) == []
    assert fifo_store.ready_groups(QUEUE, 0, 3_000, 10) == []
    front_ends.count_in()
    assert fifo_store.count(QUEUE, 0, 3_000) == Counts(visible=0, in_flight=2)
    # WHEN the whole hold is deleted THEN the messages and the group item are gone
    refs = [MessageRef(QUEUE, 0, e.sort_key, token) for e in entries]
    assert fifo_store.delete(refs, 3_000) == {}
    assert fifo_store.head(QUEUE, 0, "g", 10) == []
    assert fifo_store.ready_groups(QUEUE, 0, 40_000, 10) == []
    # AND the next send starts the group again, in order after the deleted ones
    later = fifo_store.send(QUEUE, "queue", [(0, _message(5))], 4_000)[0].message
    assert int(later.sequence_number or "0") > int(entries[-1].message.sequence_number or "0")
    assert [g.group for g in fifo_store.ready_groups(QUEUE, 0, 5_000, 10)] == ["g"]


def test_deleting_part_of_a_hold_keeps_the_group_held_until_the_rest_goes(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    fifo_store.send(QUEUE, "queue", [(0, _message(i)) for i in range(1, 4)], 1_000)
    (group,) = fifo_store.ready_groups(QUEUE, 0, 2_000, 10)
    entries = fifo_store.head(QUEUE, 0, "g", 2)
    token = fifo.claim_token("t", 2, "")
    assert fifo_store.claim(QUEUE, [(group, entries, token)], 32_000, 2_000) == [0]
    refs = [MessageRef(QUEUE, 0, e.sort_key, token) for e in entries]
    assert fifo_store.delete(refs[:1], 3_000) == {}
    assert fifo_store.ready_groups(QUEUE, 0, 3_000, 10) == []  # still held by the second
    assert fifo_store.delete(refs[1:], 3_000) == {}
    (released,) = fifo_store.ready_groups(QUEUE, 0, 3_000, 10)
    assert [e.message.body for e in fifo_store.head(QUEUE, 0, released.group, 10)] == ["m3"]


def test_a_resharded_send_counts_from_its_shards_opening_and_dedups_in_the_groups_slot(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    # GIVEN a group's message in shard 0, its dedup item in shard 0's partition
    old = fifo_store.send(QUEUE, "messageGroup", [(0, _message(1))], 1_000)[0].message
    assert not fifo_store.is_empty(QUEUE, 0)
    # WHEN the group's next message goes to shard 2, made by a resharding that opened at
    # 5 s, its dedup item still kept in the group's original slot (shard 0's partition)
    layout = SendLayout(dedup_shards=[0], seeds={2: 5_000})
    new = fifo_store.send(QUEUE, "messageGroup", [(2, _message(2))], 6_000, 0, layout)[0]
    # THEN its number is above the old shard's, from a counter of its own
    assert not new.duplicate
    assert int(new.message.sequence_number or "0") > int(old.sequence_number or "0")
    assert int(new.message.sequence_number or "0") > int(fifo.sequence_number(5_000_000))
    assert fifo_store.is_empty(QUEUE, 1) and not fifo_store.is_empty(QUEUE, 2)
    # AND the first message's dedup id, sent again the same way, is a duplicate
    again = fifo_store.send(QUEUE, "messageGroup", [(2, _message(3, dedup="d1"))], 7_000, 0,
                            layout)[0]
    assert again.duplicate and again.message.message_id == old.message_id
    assert [e.message.body for e in fifo_store.head(QUEUE, 2, "g", 10)] == ["m2"]


def _claim_all(fifo_store: FifoStore, shard: int, now: int, until: int,
               attempt: tuple[str, str, bool] | None = None) -> list[MessageRef]:
    """Claim every ready group's whole head; the refs of what was claimed."""
    refs = []
    for group in fifo_store.ready_groups(QUEUE, shard, now, 10):
        entries = fifo_store.head(QUEUE, shard, group.group, 10)
        token = fifo.claim_token(f"t-{group.group}", len(entries),
                                 entries[-1].message.sequence_number or "")
        if fifo_store.claim(QUEUE, [(group, entries, token)], until, now, attempt) == [0]:
            refs += [MessageRef(QUEUE, shard, e.sort_key, token) for e in entries]
            attempt = (attempt[0], attempt[1], False) if attempt else None
    return refs


def test_visibility_attempts_counts_peeks_and_purges_agree(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    fifo_store.send(QUEUE, "queue", [(0, _message(1)), (0, _message(2))], 1_000)
    front_ends.count_in()
    assert fifo_store.count(QUEUE, 0, 1_000) == Counts(visible=2)
    assert [m.body for m in fifo_store.peek(QUEUE, 0, 10)] == ["m1", "m2"]
    # GIVEN the group claimed under a receive attempt id
    refs = _claim_all(fifo_store, 0, 2_000, 32_000, ("try-1", "r1", True))
    front_ends.count_in()
    assert len(refs) == 2 and fifo_store.count(QUEUE, 0, 2_000) == Counts(in_flight=2)
    # THEN the attempt gives back its claims, and its messages read back in that order
    assert fifo_store.attempt(QUEUE, "try-1", 3_000) == refs
    assert [e.message.body for e in fifo_store.read(refs)] == ["m1", "m2"]
    assert fifo_store.attempt(QUEUE, "try-1", 2_000 + fifo.ATTEMPT_WINDOW_MS) is None
    assert fifo_store.attempt(QUEUE, "other", 3_000) is None
    # WHEN one message's timeout is ended THEN the group is served again at once
    assert fifo_store.change_visibility(refs[1], 3_000, 3_000) == "changed"
    assert [g.group for g in fifo_store.ready_groups(QUEUE, 0, 3_000, 10)] == ["g"]
    assert fifo_store.change_visibility(refs[1], 9_000, 4_000) == "not_in_flight"
    assert fifo_store.change_visibility(MessageRef(QUEUE, 0, "f#g 1", "x"), 9_000,
                                        4_000) == "not_found"
    # AND a purge takes every message and group of the shard
    assert fifo_store.purge(QUEUE, 0) == 2
    assert fifo_store.peek(QUEUE, 0, 10) == [] and fifo_store.is_empty(QUEUE, 0)


def test_heads_are_removed_moved_delayed_and_empty_groups_dropped(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    fifo_store.send(QUEUE, "queue", [(0, _message(i)) for i in range(1, 4)], 1_000)
    (group,) = fifo_store.ready_groups(QUEUE, 0, 2_000, 10)
    head = fifo_store.head(QUEUE, 0, "g", 3)
    # WHEN the first message is removed and the second moved to a dead-letter queue
    assert fifo_store.remove_head(QUEUE, group, head[:1])
    moved = head[1].message.with_changes(message_id=head[1].message.message_id)
    assert fifo_store.move(QUEUE, group, head[1], "000000000000/dlq.fifo", 0, moved)
    # THEN the third is the head here, the second the dead-letter queue's, numbered there
    assert [e.message.body for e in fifo_store.head(QUEUE, 0, "g", 10)] == ["m3"]
    (dead,) = fifo_store.head("000000000000/dlq.fifo", 0, "g", 10)
    assert dead.message.message_id == head[1].message.message_id
    assert not fifo_store.is_empty("000000000000/dlq.fifo", 0)
    # AND a view of the group that moved since changes nothing
    assert not fifo_store.remove_head(QUEUE, GroupState(0, "g", 1), head[2:])
    # WHEN the group's head is delayed THEN it is served from then
    fifo_store.set_group_visible_at(QUEUE, group, 50_000)
    assert fifo_store.ready_groups(QUEUE, 0, 49_999, 10) == []
    (later,) = fifo_store.ready_groups(QUEUE, 0, 50_000, 10)
    # AND a group found empty is dropped (its last message gone)
    assert fifo_store.remove_head(QUEUE, later, fifo_store.head(QUEUE, 0, "g", 10))
    fifo_store.drop_group(QUEUE, later)
    assert fifo_store.ready_groups(QUEUE, 0, 60_000, 10) == [] and fifo_store.is_empty(QUEUE, 0)


def test_the_first_group_to_turn_visible_is_found_within_a_bound(
        front_ends: FrontEnds) -> None:
    fifo_store = front_ends()
    assert fifo_store.first_visible_at(QUEUE, 0, 600_000) is None
    fifo_store.send(QUEUE, "queue", [(0, _message(1))], 1_000)
    fifo_store.send(QUEUE, "queue", [(0, _message(2).with_changes(group_id="h"))], 1_000)
    # GIVEN two groups ready since 1,000: the first is visible already
    assert fifo_store.first_visible_at(QUEUE, 0, 600_000) == 1_000
    # WHEN both are claimed, until 32,000 and 20,000 THEN the sooner is found, if in bound
    refs = _claim_all(fifo_store, 0, 2_000, 32_000, None)
    assert len(refs) == 2
    assert fifo_store.change_visibility(refs[1], 20_000, 3_000) == "changed"
    assert fifo_store.first_visible_at(QUEUE, 0, 600_000) == 20_000
    assert fifo_store.first_visible_at(QUEUE, 0, 20_000) is None
    assert fifo_store.first_visible_at(QUEUE, 1, 600_000) is None
