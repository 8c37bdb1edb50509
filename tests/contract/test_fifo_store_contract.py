"""The FIFO store's transactions on moto and on DynamoDB Local alike: two front ends
sending to one group commit in sequence order, duplicates return the original, a claim
holds the group, and deleting the hold releases or removes it."""

from __future__ import annotations

from pathlib import Path

from chalicelib.backend.bodies import FolderBodyStore
from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_fifo import DynamoFifoStore
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.backend.fifo_store import FifoStore, SendLayout
from chalicelib.domain import fifo
from chalicelib.domain.messages import Message, MessageRef
from tests.contract.conftest import Store

QUEUE = "000000000000/orders.fifo"


def _front_end(store: Store, tmp_path: Path) -> FifoStore:
    control = store.messages.replace("dmq-messages-", "dmq-control-")
    base = DynamoMessageStore(store.dynamodb, store.messages, FolderBodyStore(str(tmp_path)),
                              350_000, ShardCounters(store.dynamodb, control))
    return DynamoFifoStore(base)


def _message(number: int, dedup: str | None = None, now: int = 1_000) -> Message:
    return Message(message_id=f"00000000-0000-7000-8000-{number:012d}", body=f"m{number}",
                   body_md5="x", sent_ms=now, visible_at=now, expires_ms=now + 60_000,
                   group_id="g", dedup_id=dedup or f"d{number}")


def test_two_front_ends_commit_a_group_in_sequence_order(store: Store, tmp_path: Path) -> None:
    first, second = _front_end(store, tmp_path), _front_end(store, tmp_path)
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


def test_a_claim_holds_the_group_and_deleting_the_hold_removes_it(
        store: Store, tmp_path: Path) -> None:
    fifo_store = _front_end(store, tmp_path)
    fifo_store.send(QUEUE, "queue", [(0, _message(1)), (0, _message(2))], 1_000)
    (group,) = fifo_store.ready_groups(QUEUE, 0, 2_000, 10)
    entries = fifo_store.head(QUEUE, 0, "g", 10)
    token = fifo.claim_token("t", 2, entries[-1].message.sequence_number or "")
    # WHEN one receiver claims the group, a second claim of the same view loses
    assert fifo_store.claim(QUEUE, [(group, entries, token)], 32_000, 2_000) == [0]
    assert fifo_store.claim(QUEUE, [(group, entries, token)], 32_000, 2_000) == []
    assert fifo_store.ready_groups(QUEUE, 0, 3_000, 10) == []
    assert fifo_store.count(QUEUE, 0, 3_000).in_flight == 2
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
        store: Store, tmp_path: Path) -> None:
    fifo_store = _front_end(store, tmp_path)
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
        store: Store, tmp_path: Path) -> None:
    fifo_store = _front_end(store, tmp_path)
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
    assert int(new.message.sequence_number or "0") > int(fifo.sequence_number(5_000_000, 2))
    assert fifo_store.is_empty(QUEUE, 1) and not fifo_store.is_empty(QUEUE, 2)
    # AND the first message's dedup id, sent again the same way, is a duplicate
    again = fifo_store.send(QUEUE, "messageGroup", [(2, _message(3, dedup="d1"))], 7_000, 0,
                            layout)[0]
    assert again.duplicate and again.message.message_id == old.message_id
    assert [e.message.body for e in fifo_store.head(QUEUE, 2, "g", 10)] == ["m2"]
