"""The queue logic (visibility, delay, retention, dead letters) over the in-memory store."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from chalicelib.backend.wakeups import Wakeups
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.messages import Candidate, Message
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.service.exceptions import ReceiptHandleIsInvalidError
from chalicelib.service.messages import HandleEntry, MessageService, SendRequest
from chalicelib.service.queue_kinds import STANDARD
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.request_dedup import SendCall, shard_for
from tests.clocks import FakeClock
from tests.unit.memory_store import MemoryStore


def queue(name: str, shard_count: int = 1, **attributes: str) -> QueueRecord:
    return QueueRecord("111122223333", name, "us-east-1", STANDARD.with_defaults(attributes),
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


def test_an_older_handle_deletes_and_the_latest_then_succeeds(setup) -> None:
    service, store, clock, _ = setup
    q = queue("q", VisibilityTimeout="1")
    service.send(q, SendRequest("", "m"))
    older = service.receive(q, 1, None, 0)[0].receipt_handle
    clock.advance(1)
    latest = service.receive(q, 1, None, 0)[0].receipt_handle
    done, failed = service.delete(q, [HandleEntry("a", older)])
    assert (done, failed) == (["a"], [])
    assert store.shards[(q.queue_id, 0)] == {}
    assert service.delete(q, [HandleEntry("b", latest)]) == (["b"], [])


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
    assert moved[0].message.dead_letter_source_arn == src.arn


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


# -- claims: one store call for the plain claims of a receive -------------------------------
class RacingStore(MemoryStore):
    """Another receiver claims the first `steal` candidates of each claim call just first."""

    def __init__(self, steal: int) -> None:
        super().__init__()
        self.steal = steal

    def claim_many(
        self, queue_id: str, shard: int, claims: Sequence[tuple[Candidate, str]],
        visible_at: int, now_ms: int,
    ) -> list[Message | None]:
        for candidate, _ in claims[: self.steal]:
            assert self.claim(queue_id, shard, candidate, visible_at, "other", now_ms)
        return super().claim_many(queue_id, shard, claims, visible_at, now_ms)


def test_ten_visible_messages_are_claimed_in_one_store_call(setup) -> None:
    # GIVEN 10 visible messages
    service, store, clock, _ = setup
    q = queue("q")
    for i in range(10):
        service.send(q, SendRequest("", f"m{i}"))
    # WHEN one receive asks for 10
    got = service.receive(q, 10, None, 0)
    # THEN all 10 come back, claimed by one claim_many call of 10
    assert sorted(r.message.body for r in got) == sorted(f"m{i}" for i in range(10))
    assert store.claim_batches == [10]
    # AND each is held under its own claim token, the one its receipt handle names
    assert len({r.message.claim_token for r in got}) == 10
    assert all(r.message.receive_count == 1 and r.message.first_receive_ms == clock.now_ms()
               for r in got)


def test_a_lost_race_on_some_candidates_returns_the_others() -> None:
    # GIVEN 10 visible messages, 3 of which another receiver claims first
    store, clock = RacingStore(steal=3), FakeClock()
    service = MessageService(ClusterStores({"default": store}), ReceiptCodec("k"), clock,
                             Wakeups(), lambda arn: None, poll_interval_ms=10)
    q = queue("q")
    sent = [service.send(q, SendRequest("", f"m{i}")) for i in range(10)]
    # WHEN a receive asks for 10
    got = service.receive(q, 10, None, 0)
    # THEN it returns the 7 it won, counts 3 lost claims, and never hands out the others
    stolen = {m.message_id for m in sent[:3]}
    assert len(got) == 7
    assert not stolen & {r.message.message_id for r in got}
    assert service.stats.lost_claims == 3
    held = store.shards[(q.queue_id, 0)]
    assert all(held[m].claim_token == "other" for m in stolen)


def test_a_redelivered_batch_counts_its_receives_and_keeps_the_first_receive_time(setup) -> None:
    # GIVEN 10 messages received once at t0
    service, store, clock, _ = setup
    q = queue("q", VisibilityTimeout="30")
    for i in range(10):
        service.send(q, SendRequest("", f"m{i}"))
    t0 = clock.now_ms()
    assert len(service.receive(q, 10, None, 0)) == 10
    # WHEN their visibility timeout passes and they are received again
    clock.advance(31)
    again = service.receive(q, 10, None, 0)
    # THEN the second batch claim counts 2 receives and keeps t0 as the first receive
    assert store.claim_batches == [10, 10]
    assert [r.message.receive_count for r in again] == [2] * 10
    assert {r.message.first_receive_ms for r in again} == {t0}


def test_over_received_candidates_move_and_the_rest_are_claimed_together(setup) -> None:
    # GIVEN a queue with maxReceiveCount 1 holding 3 messages received once and 2 new ones
    service, store, clock, registry = setup
    dlq = queue("dlq")
    registry[dlq.arn] = dlq
    policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 1})
    src = queue("src", VisibilityTimeout="1", RedrivePolicy=policy)
    for i in range(3):
        service.send(src, SendRequest("", f"old{i}"))
    assert len(service.receive(src, 10, None, 0)) == 3
    clock.advance(1)
    for i in range(2):
        service.send(src, SendRequest("", f"new{i}"))
    # WHEN a receive asks for 10
    got = service.receive(src, 10, None, 0)
    # THEN the old ones went to the DLQ and the new ones were claimed in one call of 2
    assert sorted(r.message.body for r in got) == ["new0", "new1"]
    assert store.claim_batches == [3, 2]
    assert sorted(r.message.body for r in service.receive(dlq, 10, None, 0)) == [
        "old0", "old1", "old2"]


@pytest.mark.parametrize("dlq_cluster", ["default", "c2"])
def test_a_moved_message_is_the_same_whichever_clusters_hold_the_queues(dlq_cluster) -> None:
    # GIVEN a DLQ in the source's cluster (one transaction) or in another (claim, write,
    # delete), keeping messages 1,000 s, and a message sent at T, received once
    stores = {"default": MemoryStore(), "c2": MemoryStore()}
    clock = FakeClock()
    dlq = QueueRecord("111122223333", "dlq", "us-east-1",
                      STANDARD.with_defaults({"MessageRetentionPeriod": "1000"}),
                      shards=(Shard(0, dlq_cluster),))
    policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 1})
    source = queue("src", VisibilityTimeout="5", RedrivePolicy=policy)
    service = MessageService(ClusterStores(stores), ReceiptCodec("k"), clock, Wakeups(),
                             {dlq.arn: dlq}.get, poll_interval_ms=10)
    sent_at = clock.now_ms()
    sent = service.send(source, SendRequest("", "poison"))
    clock.advance(10)
    assert len(service.receive(source, 1, None, 0)) == 1
    clock.advance(10)
    # WHEN the next receive moves it
    assert service.receive(source, 1, None, 0) == []
    # THEN the DLQ holds the message as SQS moves it: id, body and send time kept,
    # visible now, retained from the original send, its receives going on from the
    # source's one (the move's own claim across clusters is none), unclaimed
    (moved,) = stores[dlq_cluster].shards[(dlq.queue_id, 0)].values()
    assert (moved.message_id, moved.body, moved.sent_ms) == (sent.message_id, "poison", sent_at)
    assert moved.visible_at == clock.now_ms()
    assert moved.expires_ms == sent_at + 1_000_000
    assert (moved.receive_count, moved.first_receive_ms, moved.claim_token) == (
        1, sent_at + 10_000, "")
    assert stores["default"].shards[(source.queue_id, 0)] == {}


def test_a_deduplicated_send_sent_again_stores_nothing_more_and_wakes_no_one() -> None:
    # GIVEN a send of a call to deduplicate (an SDK call with its invocation id)
    store, clock, wakeups = MemoryStore(), FakeClock(), Wakeups()
    service = MessageService(ClusterStores({"default": store}), ReceiptCodec("k"), clock,
                             wakeups, lambda arn: None, poll_interval_ms=10)
    q = queue("q", shard_count=4)
    call = SendCall(q.account, q.queue_id, "SendMessage", "inv-1")
    first = service.send(q, SendRequest("", "hello"), call)
    woken = wakeups.generation(q.queue_id)
    # WHEN the same call comes again
    clock.advance(5)
    again = service.send(q, SendRequest("", "hello"), call)
    # THEN it is answered with the first message's id and digests, and changes nothing
    assert (again.message_id, again.body_md5) == (first.message_id, first.body_md5)
    held = [m for messages in store.shards.values() for m in messages.values()]
    assert [(m.message_id, m.sent_ms) for m in held] == [(first.message_id, first.sent_ms)]
    assert wakeups.generation(q.queue_id) == woken
    # AND the same invocation id with other parameters sends another message
    assert service.send(q, SendRequest("", "bye"), call).message_id != first.message_id


def test_a_deduplicated_batch_places_each_message_where_its_id_names(setup) -> None:
    service, store, _, _ = setup
    q = queue("q", shard_count=4)
    call = SendCall(q.account, q.queue_id, "SendMessageBatch", "inv-2")
    requests = [SendRequest(f"e{i}", f"body {i}") for i in range(10)]
    sent, failed = service.send_batch(q, requests, call)
    again, failed_again = service.send_batch(q, requests, call)
    assert failed == failed_again == []
    assert [(e, m.message_id) for e, m in again] == [(e, m.message_id) for e, m in sent]
    where = {m.message_id: shard for (_, shard), held in store.shards.items()
             for m in held.values()}
    assert where == {m.message_id: shard_for(m.message_id, q.active_shards) for _, m in sent}
    assert len(set(where.values())) > 1
