"""A FIFO long poll, where the process follows every change (the local server's stream
pump), sleeps until a change wakes it or its shards' first hidden group turns visible: no
store read while nothing changes, as a standard queue's long poll."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import SystemClock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.service.messages import MessageService, SendRequest
from chalicelib.service.queue_kinds import FIFO
from chalicelib.service.receipts import ReceiptCodec
from tests.unit.memory_fifo_store import MemoryFifoStore, MemoryFifoTable
from tests.unit.memory_store import MemoryStore
from tests.unit.test_long_poll_wakeups import in_background

POLL_INTERVAL_MS = 200


class CountingFifoStore(MemoryFifoStore):
    """The in-memory FIFO store, counting the index reads receives make."""

    def __init__(self, table: MemoryFifoTable) -> None:
        super().__init__(table)
        self.reads = 0

    def ready_groups(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().ready_groups(*args, **kwargs)

    def first_visible_at(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().first_visible_at(*args, **kwargs)


def fifo_queue(shards: int = 2) -> QueueRecord:
    attributes = FIFO.with_defaults({"FifoQueue": "true", "ContentBasedDeduplication": "true"})
    return QueueRecord("111122223333", "orders.fifo", "us-east-1", attributes,
                       shards=tuple(Shard(i) for i in range(shards)))


def service_over(store: CountingFifoStore, following: Callable[[], bool] | None,
                 ) -> MessageService:
    service = MessageService(ClusterStores({"default": MemoryStore()}), ReceiptCodec("k"),
                             SystemClock(), Wakeups(), lambda arn: None,
                             poll_interval_ms=POLL_INTERVAL_MS,
                             fifo_stores={"default": store})
    if following is not None:
        service.follow_changes(following)
    return service


def group_record(queue_id: str, shard: int, visible_at: int) -> dict[str, Any]:
    """A stream record of a group item (the visibility index's entry of a group)."""
    return {"eventName": "MODIFY", "dynamodb": {
        "Keys": {"pk": {"S": f"{queue_id}#{shard}"}, "sk": {"S": "g#g"}},
        "NewImage": {"visible_at": {"N": str(visible_at)}}}}


def send(service: MessageService, queue: QueueRecord, body: str, group: str = "g") -> None:
    sent, failed = service.send_batch(queue, [SendRequest("1", body, message_group_id=group)])
    assert sent and not failed


def test_a_waiting_fifo_receive_reads_nothing_while_nothing_changes() -> None:
    store = CountingFifoStore(MemoryFifoTable())
    service, queue = service_over(store, lambda: True), fifo_queue()
    # GIVEN a message in flight for 30 s: nothing can be delivered before then
    send(service, queue, "held")
    assert len(service.receive(queue, 1, 30, 0)) == 1
    before = store.reads
    # WHEN a receive waits 2 s THEN it reads each shard's ready groups at the start and at
    # the end of its wait, and once when its first hidden one turns visible, not at every
    # poll interval (ten times)
    started = time.monotonic()
    assert service.receive(queue, 1, 30, 2) == []
    assert time.monotonic() - started >= 1.9
    assert store.reads - before == 3 * len(queue.shards)


def test_a_receive_that_does_not_wait_makes_no_read_for_the_hints() -> None:
    store = CountingFifoStore(MemoryFifoTable())
    service, queue = service_over(store, lambda: True), fifo_queue()
    assert service.receive(queue, 1, 30, 0) == []
    assert store.reads == len(queue.shards)  # the ready groups of each shard, no more


def test_without_changes_followed_it_reads_at_each_poll_interval() -> None:
    store = CountingFifoStore(MemoryFifoTable())
    service, queue = service_over(store, None), fifo_queue(1)
    assert service.receive(queue, 1, 30, 1) == []
    assert store.reads >= 1000 // POLL_INTERVAL_MS - 1


def test_a_group_that_turns_visible_ends_the_sleep_then() -> None:
    store = CountingFifoStore(MemoryFifoTable())
    service, queue = service_over(store, lambda: True), fifo_queue()
    # GIVEN a message in flight for 1 s
    send(service, queue, "again")
    assert len(service.receive(queue, 1, 1, 0)) == 1
    # WHEN a receive waits 5 s THEN it gets the message once its timeout ends
    started = time.monotonic()
    got = service.receive(queue, 1, 30, 5)
    assert [r.message.body for r in got] == ["again"]
    assert 0.5 <= time.monotonic() - started < 2.5


def test_a_send_by_another_writer_wakes_the_wait_when_the_stream_shows_it() -> None:
    table = MemoryFifoTable()
    store = CountingFifoStore(table)
    service, queue = service_over(store, lambda: True), fifo_queue(1)
    other = service_over(CountingFifoStore(table), lambda: True)  # another front end
    thread, out = in_background(lambda: service.receive(queue, 1, 30, 10))
    time.sleep(0.5)  # asleep, hinted empty for ten minutes
    reads = store.reads
    send(other, queue, "from elsewhere")
    time.sleep(0.5)
    assert store.reads == reads and not out  # this process has not seen the send yet
    # WHEN its stream reader shows the group's change THEN the wait ends with the message
    service.observed_records([group_record(queue.queue_id, 0, int(time.time() * 1000))])
    thread.join(5)
    (got, took), = out
    assert [r.message.body for r in got] == ["from elsewhere"]
    assert took < 2.0


def test_a_change_while_the_receive_reads_leaves_no_hint() -> None:
    store = CountingFifoStore(MemoryFifoTable())
    service, queue = service_over(store, lambda: True), fifo_queue(1)
    original = store.ready_groups

    def read_then_change(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        # a stream change of the shard arrives after the read, before the hint is made
        service.observed_records([{"eventName": "INSERT", "dynamodb": {
            "Keys": {"pk": {"S": f"{queue.queue_id}#0"}, "sk": {"S": "f#g 1"}},
            "NewImage": {}}}])
        return found

    store.ready_groups = read_then_change  # type: ignore[method-assign]
    assert service.receive(queue, 1, 30, 0) == []
    # THEN the shard is not known to be quiet: a wait would look again at its interval
    assert service._fifo.quiet_until(queue, int(time.time() * 1000)) == 0
    # AND without the change, the same pass leaves the shard hinted quiet
    store.ready_groups = original  # type: ignore[method-assign]
    assert service.receive(queue, 1, 30, 0) == []
    assert service._fifo.quiet_until(queue, int(time.time() * 1000)) > time.time() * 1000
