"""The queue logic (visibility, delay, retention, dead letters) over the in-memory store."""

from __future__ import annotations

import json

import pytest

from chalicelib.backend.clusters import ClusterStores
from chalicelib.backend.receipts import ReceiptCodec
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import FakeClock
from chalicelib.metadata.types import QueueRecord, Shard
from chalicelib.service.attributes import with_defaults
from chalicelib.service.exceptions import ReceiptHandleIsInvalidError
from chalicelib.service.messages import HandleEntry, MessageService, SendRequest
from tests.unit.memory_store import MemoryStore


def queue(name: str, shard_count: int = 1, **attributes: str) -> QueueRecord:
    return QueueRecord("111122223333", name, "us-east-1", with_defaults(attributes),
                       shards=tuple(Shard(i) for i in range(shard_count)))


@pytest.fixture
def setup() -> tuple[MessageService, MemoryStore, FakeClock, dict[str, QueueRecord]]:
    store, clock = MemoryStore(), FakeClock()
    registry: dict[str, QueueRecord] = {}
    service = MessageService(ClusterStores({"default": store}), ReceiptCodec("k"), clock, Wakeups(),
                             lambda arn: registry.get(arn), poll_interval_ms=10)
    return service, store, clock, registry


def test_received_message_is_hidden_until_its_visibility_timeout_passes(setup) -> None:
    service, _, clock, _ = setup
    q = queue("q", VisibilityTimeout="10")
    service.send(q, SendRequest("", "hello"))
    first = service.receive(q, 10, None, 0)
    assert [r.message.body for r in first] == ["hello"]
    clock.advance(9.9)
    assert service.receive(q, 10, None, 0) == []
    clock.advance(0.2)
    second = service.receive(q, 10, None, 0)
    assert second[0].message.receive_count == 2
    assert second[0].receipt_handle != first[0].receipt_handle


def test_delay_hides_a_message_and_counts_it_as_delayed(setup) -> None:
    service, _, clock, _ = setup
    q = queue("q", DelaySeconds="5")
    service.send(q, SendRequest("", "later"))
    assert service.counts(q).delayed == 1
    assert service.receive(q, 1, None, 0) == []
    clock.advance(5)
    assert len(service.receive(q, 1, None, 0)) == 1
    assert service.counts(q).in_flight == 1


def test_expired_messages_are_never_delivered_and_are_removed(setup) -> None:
    service, store, clock, _ = setup
    q = queue("q", MessageRetentionPeriod="60")
    service.send(q, SendRequest("", "old"))
    clock.advance(60)
    assert service.receive(q, 10, None, 0) == []
    assert store.shards[(q.queue_id, 0)] == {}


def test_stale_handle_deletes_nothing_and_the_latest_handle_deletes(setup) -> None:
    service, store, clock, _ = setup
    q = queue("q", VisibilityTimeout="1")
    service.send(q, SendRequest("", "m"))
    stale = service.receive(q, 1, None, 0)[0].receipt_handle
    clock.advance(1)
    latest = service.receive(q, 1, None, 0)[0].receipt_handle
    done, failed = service.delete(q, [HandleEntry("a", stale)])
    assert (done, failed) == (["a"], [])
    assert len(store.shards[(q.queue_id, 0)]) == 1
    service.delete(q, [HandleEntry("b", latest)])
    assert store.shards[(q.queue_id, 0)] == {}


def test_a_handle_of_another_queue_is_invalid(setup) -> None:
    service, _, _, _ = setup
    a, b = queue("a"), queue("b")
    service.send(a, SendRequest("", "m"))
    handle = service.receive(a, 1, None, 0)[0].receipt_handle
    _, failed = service.delete(b, [HandleEntry("x", handle)])
    assert isinstance(failed[0].error, ReceiptHandleIsInvalidError)


def test_over_received_message_moves_to_the_dead_letter_queue(setup) -> None:
    service, _, clock, registry = setup
    dlq = queue("dlq")
    registry[dlq.arn] = dlq
    policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 2})
    src = queue("src", VisibilityTimeout="1", RedrivePolicy=policy)
    sent = service.send(src, SendRequest("", "poison"))
    for _ in range(2):
        assert len(service.receive(src, 1, None, 0)) == 1
        clock.advance(1)
    assert service.receive(src, 1, None, 0) == []
    moved = service.receive(dlq, 1, None, 0)
    assert moved[0].message.message_id == sent.message_id
    assert moved[0].message.body == "poison"


def test_receive_reads_no_more_items_than_it_returns_without_contention(setup) -> None:
    service, store, _, _ = setup
    q = queue("q")
    for i in range(200):
        service.send(q, SendRequest("", f"m{i}"))
    store.items_read = 0
    got = service.receive(q, 10, None, 0)
    assert len(got) == 10
    assert store.items_read == 10


def test_receive_gathers_across_shards(setup) -> None:
    service, _, _, _ = setup
    q = queue("q", shard_count=4)
    for i in range(40):
        service.send(q, SendRequest("", f"m{i}"))
    bodies = set()
    for _ in range(10):
        bodies |= {r.message.body for r in service.receive(q, 10, None, 0)}
    assert len(bodies) == 40
