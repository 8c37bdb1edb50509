"""Message operations: send, receive (claim), delete, visibility, purge and counts.

The operations that differ between standard and FIFO queues are two classes behind one
interface (`message_kinds.MessageKind`): `StandardMessages` and `FifoMessages`. This
service does what every queue shares (validation, encryption at rest, long polls, batch
answers) and picks the kind once, in `_kind`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from chalicelib.backend.items import changed_shards
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock
from chalicelib.clusters import shards
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain import fair_share
from chalicelib.domain.exceptions import (
    ClusterUnavailableError,
    StoreThrottledError,
    StoreUnavailableError,
)
from chalicelib.domain.messages import (
    AttributeValue,
    Counts,
    Message,
    MessageRef,
    VisibilityOutcome,
    new_message_id,
)
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.encryption.envelope import MessageCipher
from chalicelib.fifo import service as fifo_rules
from chalicelib.fifo.messages import FifoMessages
from chalicelib.fifo.store import FifoStore
from chalicelib.service import message_rules as rules
from chalicelib.service import parking
from chalicelib.service.attributes import MAX_MESSAGE_SIZE
from chalicelib.service.checksums import md5_of_attributes, md5_of_body
from chalicelib.service.exceptions import (
    BatchRequestTooLongError,
    InvalidParameterValueError,
    MessageNotInflightError,
    ServiceUnavailableError,
    SqsError,
)
from chalicelib.service.fairness import Fairness, check_group_id
from chalicelib.service.message_kinds import (
    EntryFailure,
    HandleEntry,
    MessageKind,
    QueueByArn,
    Received,
    ReceiveStats,
    SendRequest,
    SyncReplicate,
)
from chalicelib.service.purged_counts import PurgedCounts
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.request_dedup import SendCall
from chalicelib.service.standard_messages import StandardMessages

# A long poll's store read that timed out or was throttled is tried again after a pause
# from RETRY_BASE_S doubling to RETRY_MAX_S (jittered), while RETRY_ROOM_S of its wait is
# left for the next try.
RETRY_BASE_S = 0.05
RETRY_MAX_S = 1.0
RETRY_ROOM_S = 2.5
# The store reads a second that all the waiting polls of a process make together when
# they have no hint to sleep on (changes not followed), DMQ_LONG_POLL_INTERVAL_MS apart
# each while fewer wait.
IDLE_READS_PER_S = 50

__all__ = ["EntryFailure", "HandleEntry", "MessageService", "Received", "SendRequest"]


def _nothing() -> None:
    """No stream reader to wait for."""


def _no_replicas(queue: QueueRecord, cluster: str, placed: Sequence[tuple[int, Message]]) -> None:
    """The default when nothing replicates synchronously."""


class MessageService:
    """The queue logic over the stores; it takes `now` from the injected clock."""

    def __init__(
        self, stores: ClusterStores, receipts: ReceiptCodec, clock: Clock, wakeups: Wakeups,
        queue_by_arn: QueueByArn, poll_interval_ms: int = 1000,
        sync_replicas: SyncReplicate = _no_replicas,
        fair: Fairness | None = None,
        fifo_stores: Mapping[str, FifoStore] | None = None,
        cipher: MessageCipher | None = None,
    ) -> None:
        # Encryption at rest: messages are sealed before a store sees them and opened
        # after a read (None: kept as sent, for stores built without keys).
        self.cipher = cipher
        self._stores = stores
        self._standard = StandardMessages(stores, receipts, clock, wakeups, queue_by_arn,
                                          fair or Fairness(), sync_replicas)
        self._fifo = FifoMessages(fifo_rules.FifoService(fifo_stores or {}, receipts, clock,
                                                         queue_by_arn), wakeups,
                                  self._standard.hints)
        self._receipts = receipts
        self._clock = clock
        self._wakeups = wakeups
        self._poll_interval_ms = poll_interval_ms
        # Counts are kept from the stream. Where a process can wait for its stream
        # reader (the local server), this waits until what was written before the call
        # is counted; elsewhere (Lambda) it does nothing and counts trail by the stream.
        self.catch_up_counts: Callable[[], None] = _nothing
        # Counts less what pending purges took (None: counts are the stored ones).
        self.purged: PurgedCounts | None = None

    @property
    def fairness(self) -> Fairness:
        """The fair-queue state (per process; a test may start it afresh)."""
        return self._standard.fairness

    @fairness.setter
    def fairness(self, value: Fairness) -> None:
        self._standard.fairness = value

    @property
    def stats(self) -> ReceiveStats:
        """What standard receives cost (read by the benchmark and tests)."""
        return self._standard.stats

    def _kind(self, queue: QueueRecord) -> MessageKind:
        """The operations of the queue's kind: the one place the type is asked."""
        return self._fifo if fifo_rules.is_fifo(queue) else self._standard

    # -- send --------------------------------------------------------------------------
    def _prepare(self, queue: QueueRecord, request: SendRequest, now: int,
                 message_id: str | None = None) -> Message:
        body = rules.check_body(request.body)
        rules.check_attributes(request.attributes)
        rules.check_system_attributes(request.system_attributes)
        rules.check_size(body, request.attributes, queue.attribute_int("MaximumMessageSize"))
        rules.check_delay(request.delay_seconds)
        check_group_id(request.message_group_id)
        delay = request.delay_seconds
        if delay is None:
            delay = queue.attribute_int("DelaySeconds")
        system = dict(request.system_attributes)
        if request.trace_header and rules.TRACE_HEADER not in system:
            system[rules.TRACE_HEADER] = AttributeValue("String", request.trace_header)
        return Message(
            message_id=message_id or new_message_id(now),
            body=body,
            body_md5=md5_of_body(body),
            sent_ms=now,
            visible_at=now + delay * 1000,
            expires_ms=now + queue.attribute_int("MessageRetentionPeriod") * 1000,
            sender_id=queue.account,
            attributes=dict(request.attributes),
            attributes_md5=md5_of_attributes(request.attributes),
            system_attributes=system,
            # the digest of what the client sent, as the SDKs check it
            system_attributes_md5=md5_of_attributes(request.system_attributes),
            group_id=request.message_group_id,
        )

    def send(self, queue: QueueRecord, request: SendRequest,
             call: SendCall | None = None) -> Message:
        """SendMessage: validate, store, wake long polls. Raises the SQS error on failure.

        With `call` (request deduplication, standard queues), a message its first attempt
        stored already is answered as sent, unchanged, and not enqueued again."""
        sent, failures = self._send(queue, [request], self._clock.now_ms(), call)
        if failures:
            raise failures[0].error
        return sent[0][1]

    def send_batch(
        self, queue: QueueRecord, requests: Sequence[SendRequest], call: SendCall | None = None,
    ) -> tuple[list[tuple[str, Message]], list[EntryFailure]]:
        """SendMessageBatch: valid entries are stored in one batch, the rest fail alone
        (`call`: as for `send`, entry by entry)."""
        total = sum(rules.message_size(r.body or "", r.attributes) for r in requests)
        if total > MAX_MESSAGE_SIZE:
            raise BatchRequestTooLongError(
                f"Batch requests cannot be longer than {MAX_MESSAGE_SIZE} bytes. You have sent "
                f"{total} bytes."
            )
        now = self._clock.now_ms()
        self._kind(queue).check_batch(
            queue, [(r.message_group_id, r.deduplication_id) for r in requests])
        return self._send(queue, requests, now, call, batch=True)

    def _send(self, queue: QueueRecord, requests: Sequence[SendRequest], now: int,
              call: SendCall | None, batch: bool = False,
              ) -> tuple[list[tuple[str, Message]], list[EntryFailure]]:
        """Prepare each request (a batch's bad entries fail alone; a single send's error
        is raised), store the rest in one call, and answer each entry."""
        kind = self._kind(queue)
        prepared: list[tuple[str, Message]] = []
        failures: list[EntryFailure] = []
        for position, request in enumerate(requests):
            request = replace(request, position=position)
            try:
                prepared.append((request.entry_id, kind.prepare(
                    queue, request, now, call,
                    lambda r, message_id: self._prepare(queue, r, now, message_id))))
            except SqsError as error:
                if not batch:
                    raise
                failures.append(EntryFailure.of(request.entry_id, error))
        stored = kind.store(queue, self._seal(queue, [m for _, m in prepared]), call)
        sent = [(entry_id, message.with_changes(message_id=kept.message_id,
                                                sequence_number=kept.sequence_number))
                for (entry_id, message), kept in zip(prepared, stored.messages, strict=True)
                if kept.message_id not in stored.unstored]
        failures += [EntryFailure(e, ServiceUnavailableError(
            "The message could not be stored; retry the request." if not batch
            else "The message could not be stored; retry."))
            for e, m in prepared if m.message_id in stored.unstored]
        if stored.wrote:
            self._wakeups.notify(queue.queue_id, len(sent))
        return sent, failures

    def _seal(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """The messages as the stores keep them (encrypted when the queue is)."""
        return self.cipher.seal_many(queue, messages) if self.cipher else messages

    def _open(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """Messages read from a store, in clear text again."""
        return self.cipher.open_many(queue, messages) if self.cipher else messages

    # -- receive -----------------------------------------------------------------------
    def receive(
        self, queue: QueueRecord, max_messages: int, visibility_timeout: int | None,
        wait_seconds: int | None, attempt_id: str | None = None,
    ) -> list[Received]:
        """ReceiveMessage: claim up to `max_messages`, long-polling up to `wait_seconds`.
        On a FIFO queue a live ReceiveRequestAttemptId returns that attempt's messages."""
        got = self._receive(queue, max_messages, visibility_timeout, wait_seconds, attempt_id)
        if not got or self.cipher is None:
            return got
        opened = self.cipher.open_many(queue, [r.message for r in got])
        return [Received(m, r.receipt_handle) for m, r in zip(opened, got, strict=True)]

    def _receive(
        self, queue: QueueRecord, max_messages: int, visibility_timeout: int | None,
        wait_seconds: int | None, attempt_id: str | None,
    ) -> list[Received]:
        kind = self._kind(queue)
        resumed = parking.take()  # a parked long poll of this request, served again
        if resumed is None:
            replayed = kind.replay(queue, attempt_id)
            if replayed is not None:
                return replayed
        timeout = visibility_timeout
        if timeout is None:
            timeout = queue.attribute_int("VisibilityTimeout")
        wait = queue.attribute_int("ReceiveMessageWaitTimeSeconds")
        if wait_seconds is not None:
            wait = wait_seconds
        if resumed is not None:
            return self._counted_poll(kind, queue, max_messages, timeout, resumed, attempt_id)
        poll = parking.Continuation(self._clock.now_ms() + wait * 1000,
                                    time.monotonic() + wait)
        # One of its account's long polls while it runs (WaitShareExceeded when it has its
        # share already), parked or not.
        poll.release = fair_share.start_long_poll(wait > 0)
        return self._counted_poll(kind, queue, max_messages, timeout, poll, attempt_id)

    def _counted_poll(self, kind: MessageKind, queue: QueueRecord, max_messages: int,
                      timeout: int, poll: parking.Continuation,
                      attempt_id: str | None) -> list[Received]:
        """`_poll`, after which its long poll's place is given back, unless it parked: the
        server then serves it again (or ends it)."""
        parked = False
        try:
            return self._poll(kind, queue, max_messages, timeout, poll, attempt_id)
        except parking.Parked:
            parked = True
            raise
        finally:
            if not parked:
                poll.end()

    def _poll(self, kind: MessageKind, queue: QueueRecord, max_messages: int, timeout: int,
              poll: parking.Continuation, attempt_id: str | None) -> list[Received]:
        """Receive until a message comes or the poll's deadline; where the request's server
        parks long polls (`parking`), its sleeps are taken there, outside this stack."""
        while True:
            seen = self._wakeups.generation(queue.queue_id)
            try:
                got = kind.receive_once(queue, max_messages, timeout, attempt_id)
            except (StoreThrottledError, StoreUnavailableError) as exc:
                # A store slow or throttled for a moment (a burst of polls opening at
                # once) is tried again within the wait, as a client would, rather than
                # answered 503; a cluster refused by its breaker or bulkhead is failing,
                # and is answered at once.
                poll.failures += 1
                pause_s = (min(RETRY_MAX_S, RETRY_BASE_S * 2 ** poll.failures)
                           * random.uniform(0.5, 1))
                if (isinstance(exc, ClusterUnavailableError)
                        or poll.wall_deadline - time.monotonic() < pause_s + RETRY_ROOM_S):
                    raise
                time.sleep(pause_s)
                continue
            now = self._clock.now_ms()
            remaining = min(poll.deadline_ms - now,
                            (poll.wall_deadline - time.monotonic()) * 1000)
            if got or remaining <= 0:
                return got
            # Asleep until a change wakes it, or until something is due to show: where
            # the kind knows when (changes followed), not a store request per poll.
            quiet = kind.quiet_until(queue, now)
            pause = (quiet - now if quiet is not None and quiet > now
                     else self._idle_poll_ms())
            if parking.parkable():  # the server keeps it, without a thread, till then
                raise poll.park(self._wakeups, queue.queue_id, seen, min(remaining, pause) / 1000)
            self._wakeups.wait(queue.queue_id, seen, min(remaining, pause) / 1000)

    def _idle_poll_ms(self) -> float:
        """How long a waiting poll with no hint sleeps before it reads the store again:
        the poll interval, or longer (and spread) when so many wait that together they
        would read the store more than IDLE_READS_PER_S times a second. Without the
        stretch, a store slowed by a burst keeps the stream reader behind, every waiting
        poll falls back to reading each interval, and those reads slow the store further."""
        shared_ms = 1000 * self._wakeups.waiting() / IDLE_READS_PER_S
        if shared_ms <= self._poll_interval_ms:
            return self._poll_interval_ms
        return shared_ms * random.uniform(0.75, 1.25)

    def follow_changes(self, following: Callable[[], bool]) -> None:
        """Where a stream reader hands every change of the messages tables to
        `observed_records` (the local server), `following()` says whether it is up to
        date: long polls then sleep until a change, not from poll to poll."""
        self._standard.follow(following)

    def observed_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Changes read from a messages table's stream, made by any writer: wake the long
        polls of each queue where a message may now show."""
        now = self._clock.now_ms()
        woken: set[str] = set()
        for change in changed_shards(records):
            if self._standard.observed(change, now):
                woken.add(change.queue_id)
        for queue_id in woken:
            self._wakeups.notify(queue_id)

    # -- delete and visibility ---------------------------------------------------------
    def delete(
        self, queue: QueueRecord, entries: Sequence[HandleEntry]
    ) -> tuple[list[str], list[EntryFailure]]:
        """DeleteMessage(Batch). Any handle DMQ issued for a message deletes it, an older
        one of a redelivered message included (SQS's observed behaviour for standard
        queues); a handle of a message already gone succeeds and deletes nothing."""
        refs, failures = self._decode(queue, entries)
        handles = {e.entry_id: e.receipt_handle for e in entries}
        failed = self._kind(queue).delete(queue, [(i, handles[i], r) for i, r in refs])
        gone = {entry_id for entry_id, _ in failed}
        return ([i for i, _ in refs if i not in gone],
                failures + [EntryFailure(i, error) for i, error in failed])

    def change_visibility(
        self, queue: QueueRecord, entries: Sequence[HandleEntry]
    ) -> tuple[list[str], list[EntryFailure]]:
        """ChangeMessageVisibility(Batch) for messages still in flight (under any receive)."""
        valid: list[HandleEntry] = []
        failures: list[EntryFailure] = []
        for entry in entries:
            if 0 <= entry.visibility_timeout <= 43_200:
                valid.append(entry)
            else:
                reason = ("Total VisibilityTimeout for the message is beyond the limit [43200 "
                          "seconds]" if entry.visibility_timeout > 43_200
                          else "Must be >= 0 and <= 43200.")
                failures.append(EntryFailure.of(entry.entry_id, InvalidParameterValueError(
                    f"Value {entry.visibility_timeout} for parameter VisibilityTimeout is "
                    f"invalid. Reason: {reason}"
                )))
        refs, bad = self._decode(queue, valid)
        timeouts = {e.entry_id: e.visibility_timeout for e in valid}
        handles = {e.entry_id: e.receipt_handle for e in valid}
        outcomes = self._kind(queue).change_visibility(queue, refs, timeouts,
                                                       self._clock.now_ms())
        if VisibilityOutcome.CHANGED in outcomes:
            self._wakeups.notify(queue.queue_id)  # a message may show again at once
        done: list[str] = []
        for (entry_id, _ref), outcome in zip(refs, outcomes, strict=True):
            if outcome is VisibilityOutcome.CHANGED:
                done.append(entry_id)
            else:
                failures.append(EntryFailure.of(entry_id, _visibility_error(
                    outcome, handles[entry_id])))
        return done, failures + bad

    def _decode(
        self, queue: QueueRecord, entries: Sequence[HandleEntry]
    ) -> tuple[list[tuple[str, MessageRef]], list[EntryFailure]]:
        refs: list[tuple[str, MessageRef]] = []
        failures: list[EntryFailure] = []
        for entry in entries:
            try:
                refs.append((entry.entry_id, self._receipts.decode(entry.receipt_handle,
                                                                   queue.queue_id)))
            except SqsError as error:
                failures.append(EntryFailure.of(entry.entry_id, error))
        return refs, failures

    # -- queue-wide ----------------------------------------------------------------------
    def purge(self, queue: QueueRecord) -> int:
        """Delete every message of every shard."""
        return self._kind(queue).purge(queue)

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The oldest live messages of every shard, read without claiming (inspection)."""
        return self._open(queue, self._kind(queue).peek(queue, limit))

    def counts(self, queue: QueueRecord, fresh: bool = False) -> Counts:
        """Approximate counts over every shard, less what a pending purge took
        (`service.purged_counts`). `fresh`: first let the counts take in what the stream
        holds, where this process can (the local server)."""
        stored = self.stored_counts(queue, fresh)
        return self.purged.of(queue, stored) if self.purged is not None else stored

    def stored_counts(self, queue: QueueRecord, fresh: bool = False) -> Counts:
        """The counts as the stores hold them, purged messages not yet removed included."""
        if fresh:
            self.catch_up_counts()
        return self._kind(queue).counts(queue)

    def drained_shards(self, queue: QueueRecord) -> tuple[Shard, ...]:
        """Draining shards that are empty and past the grace period (safe to forget)."""
        return shards.drained(queue, self._stores, self._clock.now_ms())

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard (the admin view), caught up as `counts`."""
        self.catch_up_counts()
        return self._kind(queue).shard_counts(queue)


def _visibility_error(outcome: VisibilityOutcome, handle: str) -> SqsError:
    if outcome is VisibilityOutcome.NOT_IN_FLIGHT:
        return MessageNotInflightError(
            "Message does not exist or is not available for visibility timeout change."
        )
    return InvalidParameterValueError(
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not "
        "exist or is not available for visibility timeout change."
    )
