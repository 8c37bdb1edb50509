"""Push delivery: DMQ polls a subscribed queue and calls its target, as Lambda's SQS event
source mapping polls a queue and invokes a function.

Each subscription has delivery workers (threads). A worker holds one of the
subscription's MaximumConcurrency slots (in the store, so that the cap holds across
processes), gathers a batch through the normal receive path (long polls of at most 10
messages, until BatchSize or the batching window), calls the target, then deletes what
succeeded in batches of 10. Failed messages are left alone: they become visible again
after the queue's visibility timeout, and the receive path moves them to the dead-letter
queue after maxReceiveCount. Nothing is kept in memory between runs: a restart finds the
subscriptions in the store and the messages in flight come back when their visibility
timeout ends (at least once).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from chalicelib.clock import Clock
from chalicelib.domain.queues import QueueRecord, QueueStatus
from chalicelib.fifo import service as fifo_rules
from chalicelib.push import events as push_events
from chalicelib.push import targets
from chalicelib.push.destinations import DestinationPolicy
from chalicelib.push.registry import SubscriptionRepository
from chalicelib.push.subscription import BatchItem, Invocation, Subscription, failed_messages
from chalicelib.service.messages import HandleEntry, MessageService, Received
from chalicelib.service.queues import QueueService

logger = logging.getLogger(__name__)
DELETE_BATCH = 10
RECEIVE_MOST = 10
# Lambda's synchronous payload limit: a batch stops gathering once its bodies reach it.
PAYLOAD_BYTES = 6 * 1024 * 1024
MAX_INVOCATION_S = 900  # Lambda's longest function timeout
SLOT_MARGIN_S = 5
SLOT_TRIES = 3
WAKE_INTERVAL_S = 1.0  # woken by requests: the subscriptions are read at most this often


@dataclass(frozen=True)
class PushOptions:
    """How a process delivers: workers per subscription, the idle long poll, how often
    the subscription list is read again."""

    workers: int = 4
    poll_wait_s: int = 1
    refresh_s: float = 2.0
    # Which addresses endpoints may be at (public ones, and DMQ_PUSH_ALLOWED_NETWORKS).
    destinations: DestinationPolicy = field(default_factory=DestinationPolicy)


@dataclass
class PushStats:
    """What this process delivered (read by tests and the benchmark)."""

    batches: int = 0
    delivered: int = 0
    failed: int = 0


class PushDelivery:
    """Runs the delivery workers of every enabled subscription of one region."""

    def __init__(self, repo: SubscriptionRepository, queues: QueueService,
                 messages: MessageService, clock: Clock, region: str,
                 options: PushOptions) -> None:
        self._repo = repo
        self._queues = queues
        self._messages = messages
        self._clock = clock
        self._region = region
        self._options = options
        self._lock = threading.Lock()
        # Subscriptions whose last batch was full: a backlog, which the extra workers help
        # with. Otherwise only each subscription's first worker polls (Lambda, too, adds
        # pollers while batches come back full).
        self._busy: set[str] = set()
        self._woken = threading.Event()
        self.stats = PushStats()

    def wake(self) -> None:
        """Read the subscriptions again now (one may have been created or changed)."""
        self._woken.set()

    # -- the supervisor ------------------------------------------------------------------
    def run(self, duration_s: float, stop: threading.Event | None = None,
            idle_refresh_s: float | None = None) -> PushStats:
        """Deliver for `duration_s` seconds (or until `stop` is set): start the workers of
        each enabled subscription, stop those of subscriptions deleted, disabled or
        changed, and wait for the workers to finish their batch in hand. While no worker
        runs, the subscriptions are read every `idle_refresh_s` (default: the usual
        refresh) or at once after `wake()`."""
        stop = stop or threading.Event()
        deadline = time.monotonic() + duration_s
        running: dict[tuple[str, int], tuple[threading.Thread, threading.Event, int]] = {}
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                self._woken.clear()
                self._supervise(running, deadline, stop)
                pause = self._options.refresh_s if running or idle_refresh_s is None \
                    else idle_refresh_s
                self._pause(stop, min(pause, deadline - time.monotonic()))
        finally:
            for _thread, quit_event, _version in running.values():
                quit_event.set()
            for thread, _quit_event, _version in running.values():
                thread.join(timeout=MAX_INVOCATION_S)
        return self.stats

    def _pause(self, stop: threading.Event, seconds: float) -> None:
        """Wait `seconds`, or less when stopped or woken: a wake ends the pause no sooner
        than `WAKE_INTERVAL_S` after it began, so the subscriptions are read at most that
        often however many requests wake it."""
        started = time.monotonic()
        until, soonest = started + seconds, started + min(seconds, WAKE_INTERVAL_S)
        while not stop.is_set() and (now := time.monotonic()) < until:
            if not self._woken.is_set():
                self._woken.wait(min(until - now, 0.25))
            elif now >= soonest:
                return
            else:
                stop.wait(min(soonest - now, 0.25))

    def _supervise(self, running: dict[tuple[str, int], tuple[threading.Thread,
                   threading.Event, int]], deadline: float, stop: threading.Event) -> None:
        try:
            subs = {s.sub_id: s for s in self._repo.every() if s.enabled}
        except Exception:
            logger.warning("push: cannot read the subscriptions", exc_info=True)
            return
        wanted: set[tuple[str, int]] = set()
        for sub in subs.values():
            count = min(sub.max_concurrency or self._options.workers, self._options.workers)
            wanted.update((sub.sub_id, index) for index in range(count))
        for key, (thread, quit_event, version) in list(running.items()):
            sub_now = subs.get(key[0])
            changed = sub_now is None or sub_now.modified_ms != version
            if key not in wanted or changed or not thread.is_alive():
                quit_event.set()
                if not thread.is_alive():
                    del running[key]
        for key in sorted(wanted):
            if key in running:
                continue
            sub = subs[key[0]]
            quit_event = threading.Event()

            def should_stop(quit_event: threading.Event = quit_event) -> bool:
                return quit_event.is_set() or stop.is_set() or time.monotonic() >= deadline

            thread = threading.Thread(target=self._work, args=(sub, key[1], should_stop),
                                      name=f"dmq-push-{sub.sub_id[:8]}-{key[1]}", daemon=True)
            running[key] = (thread, quit_event, sub.modified_ms)
            thread.start()

    # -- a worker ------------------------------------------------------------------------
    def _work(self, sub: Subscription, index: int, should_stop: Callable[[], bool]) -> None:
        owner = uuid.uuid4().hex
        slot: int | None = None
        try:
            while not should_stop():
                try:
                    slot = self._step(sub, index, owner, slot, should_stop)
                except Exception:
                    logger.warning("push: delivery for %s failed", sub.sub_id, exc_info=True)
                    _pause(should_stop, 1.0)
        finally:
            if slot is not None:
                try:
                    self._repo.release_slot(sub.sub_id, slot, owner)
                except Exception:  # noqa: BLE001 - the slot expires by itself
                    logger.warning("push: slot %s/%d not released", sub.sub_id, slot)

    def _step(self, sub: Subscription, index: int, owner: str, slot: int | None,
              should_stop: Callable[[], bool]) -> int | None:
        """One pass: hold a slot, gather a batch, deliver it. Returns the slot held."""
        queue = self._queues.find(sub.queue_id)
        if queue is None or queue.status is not QueueStatus.ACTIVE:
            _pause(should_stop, self._options.refresh_s)
            return slot
        timeout_s = min(max(queue.attribute_int("VisibilityTimeout"), 1), MAX_INVOCATION_S)
        if index > 0 and not self._is_busy(sub.sub_id):
            if slot is not None:
                self._repo.release_slot(sub.sub_id, slot, owner)
            _pause(should_stop, self._options.poll_wait_s)
            return None
        if sub.max_concurrency is not None:
            hold_s = sub.window_s + timeout_s + self._options.poll_wait_s + SLOT_MARGIN_S
            slot = self._hold(sub, index, owner, slot, hold_s)
            if slot is None:
                _pause(should_stop, self._options.poll_wait_s)
                return None
        batch = self._gather(sub, queue, should_stop)
        full = len(batch) >= min(sub.batch_size, RECEIVE_MOST)
        with self._lock:
            (self._busy.add if full else self._busy.discard)(sub.sub_id)
        if batch:
            self._deliver(sub, queue, batch, timeout_s)
        return slot

    def _is_busy(self, sub_id: str) -> bool:
        with self._lock:
            return sub_id in self._busy

    def _hold(self, sub: Subscription, index: int, owner: str, slot: int | None,
              hold_s: int) -> int | None:
        """Extend the slot held, or take a free one (this worker's own first)."""
        cap = sub.max_concurrency or 1
        now = self._clock.now_ms()
        if slot is not None and self._repo.hold_slot(sub.sub_id, slot, owner, now,
                                                     now + hold_s * 1000):
            return slot
        others = [s for s in range(cap) if s != index % cap]
        choices = [index % cap, *random.sample(others, min(len(others), SLOT_TRIES - 1))]
        for choice in choices:
            if self._repo.hold_slot(sub.sub_id, choice, owner, now, now + hold_s * 1000):
                return choice
        return None

    def _gather(self, sub: Subscription, queue: QueueRecord,
                should_stop: Callable[[], bool]) -> list[Received]:
        """Receive until the batch is full, the window has passed or the payload limit is
        reached. With no window, one receive that returns anything is the batch."""
        got: list[Received] = []
        size = 0
        window_end: float | None = None
        while len(got) < sub.batch_size:
            if window_end is None:  # every worker long-polls, as Lambda's pollers do
                wait = self._options.poll_wait_s
            else:
                remaining = window_end - time.monotonic()
                if remaining <= 0 or should_stop():
                    break
                wait = math.ceil(remaining)
            received = self._messages.receive(queue, min(RECEIVE_MOST, sub.batch_size - len(got)),
                                              None, wait)
            got.extend(received)
            size += sum(len(r.message.body.encode()) for r in received)
            if not got:
                break
            if window_end is None:
                if sub.window_s == 0:
                    break
                window_end = time.monotonic() + sub.window_s
            if size >= PAYLOAD_BYTES:
                break
        return got

    def _deliver(self, sub: Subscription, queue: QueueRecord, batch: list[Received],
                 timeout_s: int) -> None:
        records = [push_events.record(queue, r.message, r.receipt_handle, self._region)
                   for r in batch]
        event = push_events.event(records)
        invocation = self._invoke(sub, event, timeout_s)
        fifo = fifo_rules.is_fifo(queue)
        items = [BatchItem(r.message.message_id, r.message.group_id if fifo else None)
                 for r in batch]
        failed = failed_messages(items, invocation, sub.report_failures, fifo)
        if not invocation.ok:
            logger.info("push: %s failed a batch of %d: %s", sub.sub_id, len(batch),
                        invocation.error)
        done = [r for r in batch if r.message.message_id not in failed]
        for start in range(0, len(done), DELETE_BATCH):
            chunk = done[start:start + DELETE_BATCH]
            _deleted, failures = self._messages.delete(
                queue, [HandleEntry(str(i), r.receipt_handle) for i, r in enumerate(chunk)])
            for failure in failures:
                logger.warning("push: delete after delivery failed: %s", failure.error.message)
        with self._lock:
            self.stats.batches += 1
            self.stats.delivered += len(done)
            self.stats.failed += len(batch) - len(done)

    def _invoke(self, sub: Subscription, event: dict[str, object], timeout_s: int) -> Invocation:
        if sub.endpoint is not None:
            return targets.call_endpoint(sub.endpoint, event, timeout_s,
                                         self._options.destinations)
        return targets.call_function(sub.function_name or "", event)


def _pause(should_stop: Callable[[], bool], seconds: float) -> None:
    """Sleep up to `seconds`, waking early when the worker is told to stop."""
    end = time.monotonic() + seconds
    while not should_stop() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
