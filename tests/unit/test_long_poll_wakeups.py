"""Long polls wake on the change that concerns them, and cost no store request while
nothing changes, where the process follows every change (the local server's stream pump)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.backend.items import changed_shards
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import SystemClock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.exceptions import (
    ClusterUnavailableError,
    StoreThrottledError,
    StoreUnavailableError,
)
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.service import messages as messages_module
from chalicelib.service import standard_receive
from chalicelib.service.messages import MessageService, Received, SendRequest
from chalicelib.service.queue_kinds import STANDARD
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.standard_receive import EMPTY_HINT_MS, ShardHints
from tests.unit.memory_store import MemoryStore


class CountingStore(MemoryStore):
    """The in-memory store, counting the index reads a receive makes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def find_candidates(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().find_candidates(*args, **kwargs)


def queue(name: str, shards: int = 1) -> QueueRecord:
    return QueueRecord("111122223333", name, "us-east-1", STANDARD.with_defaults({}),
                       shards=tuple(Shard(i) for i in range(shards)))


def service_over(store: MemoryStore, following: Callable[[], bool] | None = None,
                 ) -> MessageService:
    service = MessageService(ClusterStores({"default": store}), ReceiptCodec("k"),
                             SystemClock(), Wakeups(), lambda arn: None, poll_interval_ms=200)
    if following is not None:
        service.follow_changes(following)
    return service


def in_background(call: Callable[[], list[Received]]) -> tuple[threading.Thread, list[Any]]:
    """Run a receive in a thread; its result (or error) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        out.append((call(), time.monotonic() - started))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def record(queue_id: str, shard: int, visible_at: int | None, event: str = "INSERT",
           message_id: str = "m") -> dict[str, Any]:
    """A messages-table stream record in Lambda's shape."""
    image = {} if visible_at is None else {"visible_at": {"N": str(visible_at)}}
    return {"eventName": event, "dynamodb": {
        "Keys": {"pk": {"S": f"{queue_id}#{shard}"}, "sk": {"S": message_id}},
        "NewImage": image}}


def stored_elsewhere(store: MemoryStore, service: MessageService, q: QueueRecord,
                     body: str) -> None:
    """A message another writer stored (not through `service`), visible now, whose stream
    record the service is then shown."""
    now = int(time.time() * 1000)
    store.put_messages(q.queue_id, [(0, Message(
        message_id=f"m-{body}", body=body, body_md5="", sent_ms=now, visible_at=now,
        expires_ms=now + 60_000))])
    service.observed_records([record(q.queue_id, 0, now)])


# -- the wake-ups -------------------------------------------------------------------------

def test_a_notify_wakes_the_waiters_of_its_queue_and_no_other() -> None:
    wakeups = Wakeups()
    ended: dict[str, float] = {}

    def wait(queue_id: str) -> None:
        started = time.monotonic()
        wakeups.wait(queue_id, wakeups.generation(queue_id), 2.0)
        ended[queue_id] = time.monotonic() - started

    threads = [threading.Thread(target=wait, args=(q,)) for q in ("a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while wakeups.waiting() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    wakeups.notify("a")
    for thread in threads:
        thread.join(5)
    assert ended["a"] < 1.0
    assert ended["b"] >= 1.9
    # AND nothing is kept of a queue nobody waits on any more
    assert wakeups.waiting() == 0


def test_a_change_between_reading_the_generation_and_waiting_is_not_missed() -> None:
    wakeups = Wakeups()
    seen = wakeups.generation("q")
    wakeups.notify("q")
    started = time.monotonic()
    wakeups.wait("q", seen, 2.0)
    assert time.monotonic() - started < 0.5


# -- the hints ------------------------------------------------------------------------------

def test_a_hint_lasts_a_second_while_changes_are_not_followed() -> None:
    hints, following = ShardHints(), [True]
    hints.follow(lambda: following[0])
    hints.hint_empty("q", 0, 500_000, hints.writes("q", 0), 0)
    assert hints.known_empty("q", 0, 400_000)
    following[0] = False
    assert hints.known_empty("q", 0, EMPTY_HINT_MS - 1)
    assert not hints.known_empty("q", 0, EMPTY_HINT_MS)


def test_an_observed_change_voids_a_read_in_progress_and_shortens_a_hint() -> None:
    hints = ShardHints()
    hints.follow(lambda: True)
    # A change seen while a read was under way: the read leaves no hint
    writes = hints.writes("q", 0)
    assert not hints.observed("q", 0, 5_000, 0)
    hints.hint_empty("q", 0, 600_000, writes, 0)
    assert not hints.known_empty("q", 0, 1)
    # A message that shows before the hint ends shortens it; a later one changes nothing
    hints.hint_empty("q", 0, 600_000, hints.writes("q", 0), 0)
    assert hints.observed("q", 0, 5_000, 0)
    assert hints.known_empty("q", 0, 4_999) and not hints.known_empty("q", 0, 5_000)
    assert not hints.observed("q", 0, 9_000, 0)
    # A message visible now ends it; a removal never wakes anyone
    assert not hints.observed("q", 0, None, 0)
    assert hints.observed("q", 0, 0, 0)
    assert not hints.known_empty("q", 0, 1)


def test_stream_records_name_their_queue_shard_and_visibility() -> None:
    records = [record("1/q", 3, 7), record("1/q", 0, None, "REMOVE"),
               {"dynamodb": {"Keys": {"queue_id": {"S": "1/q"}}}},
               {"dynamodb": {"Keys": {"pk": {"S": "1/q.fifo#g#x"}}}}]
    assert [(c.queue_id, c.shard, c.visible_at) for c in changed_shards(records)] == [
        ("1/q", 3, 7), ("1/q", 0, None)]


# -- long polls over a store ------------------------------------------------------------------

def test_waiting_long_polls_make_no_store_request_until_a_send_wakes_them() -> None:
    # GIVEN a process that follows every change, and 20 long polls on 20 empty queues
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    queues = [queue(f"q{n}") for n in range(20)]
    polls = [in_background(lambda q=q: service.receive(q, 1, None, 5)) for q in queues]
    deadline = time.monotonic() + 5
    while service._wakeups.waiting() < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    # WHEN they have waited a while, and more long polls come for the same queues
    read_once = store.reads
    time.sleep(0.6)
    assert store.reads == read_once == 20  # one read each, then none while they wait
    again = in_background(lambda: service.receive(queues[0], 1, None, 0))
    again[0].join(5)
    assert again[1][0][0] == [] and store.reads == 20  # the hint answers it
    # AND a message is sent to each queue
    for q in queues:
        service.send(q, SendRequest("", f"for {q.name}"))
    # THEN each poll returns its own message, long before its wait ends
    for (thread, out), q in zip(polls, queues, strict=True):
        thread.join(5)
        (got, took), = out
        assert [r.message.body for r in got] == [f"for {q.name}"]
        assert took < 3


def test_a_change_another_front_end_made_wakes_the_poll_through_the_stream() -> None:
    # GIVEN a long poll waiting on an empty queue, changes followed
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    thread, out = in_background(lambda: service.receive(q, 1, None, 5))
    deadline = time.monotonic() + 5
    while service._wakeups.waiting() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    # WHEN another writer stores a message (not through this service) and the stream
    # shows its record
    stored_elsewhere(store, service, q, "from elsewhere")
    # THEN the poll gets it at once
    thread.join(5)
    (got, took), = out
    assert [r.message.body for r in got] == ["from elsewhere"] and took < 3


def test_a_poll_sleeps_until_a_delayed_message_shows() -> None:
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    service.send(q, SendRequest("", "later", delay_seconds=1))
    got = service.receive(q, 1, None, 5)
    assert [r.message.body for r in got] == ["later"]
    # one read saw it hidden (and when it shows), one more claimed it
    assert store.reads == 2


def test_hidden_messages_another_writer_stored_keep_the_poll_off_the_store() -> None:
    # GIVEN a poll found the queue empty (changes followed)
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    assert service.receive(q, 1, None, 0) == []
    before = store.reads
    # WHEN the stream shows messages that show only in a minute (main and noisy lane)
    now = int(time.time() * 1000)
    service.observed_records([record(q.queue_id, 0, LANE_BASE + now + 60_000),
                              record(q.queue_id, 0, now + 60_000)])
    # THEN the next poll still knows the shard empty until then: no read
    assert service.receive(q, 1, None, 0) == [] and store.reads == before
    # AND one that shows now sends the next poll to the store
    service.observed_records([record(q.queue_id, 0, now)])
    assert service.receive(q, 1, None, 0) == [] and store.reads == before + 1


def test_without_followed_changes_a_renewed_poll_reads_the_store_again() -> None:
    store = CountingStore()
    service = service_over(store, following=lambda: False)
    q = queue("q")
    assert service.receive(q, 1, None, 0) == []
    time.sleep((EMPTY_HINT_MS + 50) / 1000)
    assert service.receive(q, 1, None, 0) == []
    assert store.reads == 2


def test_a_send_wakes_as_many_waiting_consumers_as_it_has_messages() -> None:
    # GIVEN 5 long polls waiting on one queue (changes followed)
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("shared")
    polls = [in_background(lambda: service.receive(q, 1, None, 2)) for _ in range(5)]
    deadline = time.monotonic() + 5
    while service._wakeups.waiting() < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    before = store.reads
    # WHEN one message is sent
    service.send(q, SendRequest("", "one"))
    # THEN one consumer gets it at once, and the other four sleep on without a store read
    for thread, _ in polls:
        thread.join(5)
    results = sorted((out[0] for _, out in polls), key=lambda r: r[1])
    assert [r.message.body for r in results[0][0]] == ["one"] and results[0][1] < 1
    assert all(got == [] and took >= 1.9 for got, took in results[1:])
    assert store.reads - before <= 2  # the woken consumer's read, and its claim's re-read


class StalledClaims(MemoryStore):
    """The in-memory store whose first claim, made from the thread named `claimer`,
    waits until `release` is set, then fails without writing anything: a throttle, or
    (`lose`) every claim's condition lost (as DMQ_CHAOS injects them)."""

    def __init__(self, lose: bool) -> None:
        super().__init__()
        self.lose = lose
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.pending = True

    def claim_many(self, queue_id: str, shard: int, claims: Any, *args: Any) -> Any:
        if self.pending and threading.current_thread().name == "claimer":
            self.pending = False
            self.stalled.set()
            self.release.wait(5)
            if self.lose:
                return [None] * len(claims)
            raise StoreThrottledError("throttled")
        return super().claim_many(queue_id, shard, claims, *args)


@pytest.mark.parametrize("lose", [False, True], ids=["throttled", "condition-lost"])
def test_messages_another_receive_failed_to_claim_are_not_hinted_away(lose: bool) -> None:
    # GIVEN a process that follows every change, and a queue holding 5 messages
    store = StalledClaims(lose)
    service = service_over(store, following=lambda: True)
    q = queue("q")
    sent, failed = service.send_batch(q, [SendRequest(str(n), f"m{n}") for n in range(5)])
    assert len(sent) == 5 and not failed
    # WHEN one receive reserves them all and its claim stalls
    out: list[Any] = []

    def claimer() -> None:
        try:
            out.append(service.receive(q, 10, 30, 0))
        except StoreThrottledError as exc:
            out.append(exc)

    thread = threading.Thread(target=claimer, name="claimer", daemon=True)
    thread.start()
    assert store.stalled.wait(5)
    # AND another receive reads the shard meanwhile: every visible message is reserved
    assert service.receive(q, 10, 30, 0) == []
    # AND the stalled claim then fails without writing anything
    store.release.set()
    thread.join(5)
    (answer,) = out
    assert isinstance(answer, StoreThrottledError) if not lose else answer == []
    # THEN the messages, still visible, go to the next receive (the shard is not taken
    # for empty until a write shows, which may never come)
    got = service.receive(q, 10, 30, 0)
    assert sorted(r.message.body for r in got) == [f"m{n}" for n in range(5)]


class FlakyStore(MemoryStore):
    """The in-memory store whose index reads fail `failures` times first, with `error`."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures = failures
        self.error = error
        self.reads = 0

    def find_candidates(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        if self.reads <= self.failures:
            raise self.error
        return super().find_candidates(*args, **kwargs)


def test_a_long_poll_tries_a_slow_store_again_within_its_wait() -> None:
    # GIVEN a queue holding a message, whose store times out twice
    store = FlakyStore(2, StoreUnavailableError("read timeout"))
    service = service_over(store)
    q = queue("flaky")
    service.send(q, SendRequest("", "kept"))
    # WHEN a long poll receives THEN it gets the message, after trying again
    got = service.receive(q, 1, None, 5)
    assert [r.message.body for r in got] == ["kept"] and store.reads == 3
    # AND a short poll has no wait to try again in: the client gets the error (a 503)
    # (on another queue: the receive that took the only message left this one's shard
    # hinted empty, and a message sent there now is claimed without a read)
    other = queue("flaky-short")
    service.send(other, SendRequest("", "more"))
    store.reads, store.failures = 0, 1
    with pytest.raises(StoreUnavailableError):
        service.receive(other, 1, 0, 0)


def test_a_long_poll_answers_a_refused_cluster_at_once() -> None:
    # GIVEN a store whose cluster's breaker is open WHEN a long poll receives
    store = FlakyStore(5, ClusterUnavailableError("default", "circuit open"))
    service = service_over(store)
    started = time.monotonic()
    # THEN it is answered at once with the error, without trying again
    with pytest.raises(ClusterUnavailableError):
        service.receive(queue("refused"), 1, None, 5)
    assert store.reads == 1 and time.monotonic() - started < 1


def test_many_waiting_polls_without_hints_share_a_budget_of_store_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN changes that are not followed (each poll would read every 200 ms) and a budget
    # of 20 idle reads a second for the process
    monkeypatch.setattr(messages_module, "IDLE_READS_PER_S", 20)
    store = CountingStore()
    service = service_over(store)
    # WHEN 40 long polls wait on 40 empty queues
    polls = [in_background(lambda n=n: service.receive(queue(f"b{n}"), 1, None, 4))
             for n in range(40)]
    deadline = time.monotonic() + 5
    while service._wakeups.waiting() < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    before = store.reads
    time.sleep(2.0)
    # THEN together they read about 20 times a second (each every ~2 s), not 200
    assert store.reads - before <= 2.0 * 20 * 1.6
    for thread, _ in polls:
        thread.join(10)


# -- a receive that took every visible message ---------------------------------------------
def test_a_receive_that_took_every_visible_message_leaves_no_read_for_the_next_poll() -> None:
    # GIVEN two messages in a queue, changes followed
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    for body in ("a", "b"):
        service.send(q, SendRequest("", body))
    # WHEN one receive takes both (one read)
    assert sorted(r.message.body for r in service.receive(q, 10, 30, 0)) == ["a", "b"]
    assert store.reads == 1
    # THEN the consumer's next poll knows the shard holds nothing visible: no read
    assert service.receive(q, 10, 30, 0) == [] and store.reads == 1
    # AND a send here voids that at once
    service.send(q, SendRequest("", "c"))
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["c"]
    # AND so does a message another writer stored, once the stream shows it
    assert service.receive(q, 10, 30, 0) == []
    reads = store.reads
    stored_elsewhere(store, service, q, "d")
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["d"]
    assert store.reads == reads + 1


def test_the_stream_showing_the_insert_of_a_message_claimed_here_costs_no_read() -> None:
    # GIVEN a message sent and received here, changes followed; the shard hinted empty
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    service.send(q, SendRequest("", "a"))
    (got,) = service.receive(q, 10, 30, 0)
    assert store.reads == 1
    sent = got.message.sent_ms
    # WHEN the stream then shows that message's insert (its claim came after it)
    service.observed_records([record(q.queue_id, 0, sent, message_id=got.message.message_id)])
    # THEN that is no news: the next poll still makes no read
    assert service.receive(q, 10, 30, 0) == [] and store.reads == 1
    # AND the insert of a message not claimed here still voids the hint
    stored_elsewhere(store, service, q, "b")
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["b"]
    assert store.reads == 2
    # AND so does the same id inserted anew after the claim (visible later than it)
    assert service.receive(q, 10, 30, 0) == [] and store.reads == 2
    time.sleep(0.01)
    later = int(time.time() * 1000)  # visible now, and since the claim
    service.observed_records([record(q.queue_id, 0, later, message_id=got.message.message_id)])
    service.receive(q, 10, 30, 0)
    assert store.reads == 3


def _drained(store: MemoryStore) -> tuple[MessageService, QueueRecord]:
    """A service following changes, and a queue whose one shard a receive has drained
    (one read; the shard is hinted empty)."""
    service = service_over(store, following=lambda: True)
    q = queue("q")
    service.send(q, SendRequest("", "first"))
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["first"]
    return service, q


def test_messages_sent_here_to_a_drained_shard_are_claimed_without_a_read() -> None:
    # GIVEN a drained shard (one read so far)
    store = CountingStore()
    service, q = _drained(store)
    assert store.reads == 1
    # WHEN a message is sent here THEN the next receive claims it without reading
    service.send(q, SendRequest("", "a"))
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["a"]
    # AND three sent, received one at a time, oldest first: still no read
    for body in ("b", "c", "d"):
        service.send(q, SendRequest("", body))
    assert [[r.message.body for r in service.receive(q, 1, 30, 0)] for _ in range(3)] == [
        ["b"], ["c"], ["d"]]
    # AND the shard is empty again: a poll neither reads nor finds anything
    assert service.receive(q, 10, 30, 0) == []
    assert store.reads == 1
    # AND what the receive returns is the message as stored, claimed
    service.send(q, SendRequest("", "e", attributes={"k": AttributeValue("String", "v")}))
    (got,) = service.receive(q, 10, 30, 0)
    assert (got.message.body, got.message.receive_count) == ("e", 1)
    assert got.message.attributes == {"k": AttributeValue("String", "v")}


def test_messages_sent_to_a_drained_shard_nobody_reads_are_not_kept_without_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(standard_receive, "SENT_KEPT", 3)
    store = CountingStore()
    service, q = _drained(store)
    for n in range(4):  # one more than is kept: the shard is forgotten, and read
        service.send(q, SendRequest("", f"m{n}"))
    assert len(service.receive(q, 10, 30, 0)) == 4 and store.reads == 2


def test_a_message_sent_here_with_a_delay_is_not_handed_over() -> None:
    store = CountingStore()
    service, q = _drained(store)
    service.send(q, SendRequest("", "later", delay_seconds=1))
    assert service.receive(q, 10, 30, 0) == [] and store.reads == 2  # read: unknown
    time.sleep(1.1)
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["later"]


def test_a_handed_message_another_receiver_took_is_looked_for_in_the_index() -> None:
    # GIVEN a message sent here to a drained shard, then claimed by another process
    store = CountingStore()
    service, q = _drained(store)
    service.send(q, SendRequest("", "raced"))
    now = int(time.time() * 1000)
    page = store.find_candidates(q.queue_id, 0, now + 1, 10, None, 0)
    (candidate,) = page.candidates
    assert store.claim(q.queue_id, 0, candidate, now + 60_000, "elsewhere", now) is not None
    reads = store.reads
    # WHEN a receive here is handed it THEN its claim is lost, and it reads the shard
    assert service.receive(q, 10, 30, 0) == []
    assert store.reads == reads + 1
    # AND a message sent after that is found as usual
    service.send(q, SendRequest("", "next"))
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["next"]


class FailingClaims(CountingStore):
    """The in-memory store whose claims fail `failures` times first."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailableError("claim timed out")
        return super().claim(*args, **kwargs)


def test_a_handed_message_whose_claim_failed_is_not_left_behind() -> None:
    # GIVEN a message sent here to a drained shard, and a claim that fails once
    store = FailingClaims()
    service, q = _drained(store)
    service.send(q, SendRequest("", "kept"))
    store.failures = 1
    # WHEN a short poll is handed it THEN the error reaches the client (a 503)
    with pytest.raises(StoreUnavailableError):
        service.receive(q, 10, 30, 0)
    # AND the message is not hidden behind the hint: the next receive reads and gets it
    assert [r.message.body for r in service.receive(q, 10, 30, 0)] == ["kept"]


def test_a_handed_message_not_deleted_shows_again_after_its_timeout() -> None:
    store = CountingStore()
    service, q = _drained(store)
    service.send(q, SendRequest("", "again"))
    assert [r.message.body for r in service.receive(q, 10, 1, 0)] == ["again"]
    assert service.receive(q, 10, 1, 0) == []
    time.sleep(1.1)
    assert [r.message.body for r in service.receive(q, 10, 1, 0)] == ["again"]


def test_taken_messages_show_again_when_their_timeout_ends() -> None:
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    service.send(q, SendRequest("", "again"))
    assert [r.message.body for r in service.receive(q, 10, 1, 0)] == ["again"]
    assert service.receive(q, 10, 1, 0) == [] and store.reads == 1
    # WHEN its visibility timeout ends (not deleted) THEN a poll receives it again, and a
    # long poll begun before that wakes for it within its wait
    thread, out = in_background(lambda: service.receive(q, 10, 1, 3))
    thread.join(5)
    (got, took), = out
    assert [r.message.body for r in got] == ["again"] and took < 2.5


def test_a_receive_that_left_a_visible_message_leaves_no_hint() -> None:
    store = CountingStore()
    service = service_over(store, following=lambda: True)
    q = queue("q")
    for body in ("a", "b"):
        service.send(q, SendRequest("", body))
    assert len(service.receive(q, 1, 30, 0)) == 1
    # the other is still visible: the next poll finds it
    assert len(service.receive(q, 1, 30, 0)) == 1
    # and one with a zero timeout leaves its message visible: no hint either
    service.send(q, SendRequest("", "zero"))
    assert [r.message.body for r in service.receive(q, 10, 0, 0)] == ["zero"]
    assert [r.message.body for r in service.receive(q, 10, 0, 0)] == ["zero"]
