"""Message operations: send, receive (claim), delete, visibility, purge and counts."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from chalicelib import observability
from chalicelib.backend.clusters import ClusterStores
from chalicelib.backend.fifo_store import FifoStore
from chalicelib.backend.store import CandidatePage, NewPuts, VisibilityChange
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.lanes import LANE_BASE, lane_slot
from chalicelib.domain.messages import (
    AttributeValue,
    Candidate,
    CandidateAction,
    Counts,
    Message,
    MessageRef,
    VisibilityOutcome,
    new_claim_token,
    new_message_id,
)
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.service import fairness, shards
from chalicelib.service import fifo as fifo_rules
from chalicelib.service import message_rules as rules
from chalicelib.service.attributes import MAX_MESSAGE_SIZE
from chalicelib.service.checksums import md5_of_attributes, md5_of_body
from chalicelib.service.encryption import MessageCipher
from chalicelib.service.exceptions import (
    BatchRequestTooLongError,
    InvalidParameterValueError,
    MessageNotInflightError,
    ServiceUnavailableError,
    SqsError,
)
from chalicelib.service.frontier import Frontier
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.request_dedup import SendCall, shard_for

_CLAIM_ROUNDS = 3
# A shard with nothing visible is skipped by this process's receives until its next hidden
# message becomes visible, for at most this long, unless this process writes to it first.
# Receives read the index this far past `now` to learn that time in the same request.
# Like SQS short polling, a receive may then miss a message that another front end has
# just sent; a long poll finds it on its next pass.
EMPTY_HINT_MS = 1000
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SendRequest:
    """One message to send (a batch entry, or the single message of SendMessage)."""

    entry_id: str
    body: str | None
    delay_seconds: int | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    system_attributes: dict[str, AttributeValue] = field(default_factory=dict)
    # The X-Amzn-Trace-Id header of the request: the AWSTraceHeader of a message that
    # does not carry its own.
    trace_header: str | None = None
    message_group_id: str | None = None
    deduplication_id: str | None = None

    def digest(self) -> str:
        """A digest of the parameters the message is made of (request deduplication: the
        same entry sent again has the same one). The trace header is a header of the
        request, which an SDK's retry may change, not a parameter: it is left out."""
        text = json.dumps([self.body, self.delay_seconds, _listed(self.attributes),
                           _listed(self.system_attributes), self.message_group_id,
                           self.deduplication_id], separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _listed(attributes: Mapping[str, AttributeValue]) -> list[list[str | None]]:
    """Message attributes as plain data, in name order."""
    return [[name, value.data_type, value.string_value,
             base64.b64encode(value.binary_value).decode() if value.binary_value is not None
             else None]
            for name, value in sorted(attributes.items())]


@dataclass(frozen=True)
class EntryFailure:
    """A batch entry that failed, with the SQS error it failed with."""

    entry_id: str
    error: SqsError

    @classmethod
    def of(cls, entry_id: str, error: SqsError) -> EntryFailure:
        """The failure entry for an SQS error."""
        return cls(entry_id, error)


@dataclass(frozen=True)
class Received:
    """A claimed message and its receipt handle."""

    message: Message
    receipt_handle: str


@dataclass
class ReceiveStats:
    """Counters that show the cost of receives (read by the benchmark)."""

    receives: int = 0
    returned: int = 0
    items_read: int = 0
    lost_claims: int = 0


@dataclass(frozen=True)
class HandleEntry:
    """A receipt handle with its batch entry id and, for visibility changes, the timeout."""

    entry_id: str
    receipt_handle: str
    visibility_timeout: int = 0


QueueByArn = Callable[[str], QueueRecord | None]
SyncReplicate = Callable[[QueueRecord, str, Sequence[tuple[int, Message]]], None]


def _nothing() -> None:
    """No stream reader to wait for."""


def _no_replicas(queue: QueueRecord, cluster: str, placed: Sequence[tuple[int, Message]]) -> None:
    """The default when nothing replicates synchronously."""


class MessageService:
    """The queue logic over a MessageStore; it takes `now` from the injected clock."""

    def __init__(
        self, stores: ClusterStores, receipts: ReceiptCodec, clock: Clock, wakeups: Wakeups,
        queue_by_arn: QueueByArn, poll_interval_ms: int = 1000,
        sync_replicas: SyncReplicate = _no_replicas,
        fair: fairness.Fairness | None = None,
        fifo_stores: Mapping[str, FifoStore] | None = None,
        cipher: MessageCipher | None = None,
    ) -> None:
        self.fairness = fair or fairness.Fairness()
        # Encryption at rest: messages are sealed before a store sees them and opened
        # after a read (None: kept as sent, for stores built without keys).
        self.cipher = cipher
        self._stores = stores
        self._fifo = fifo_rules.FifoService(fifo_stores or {}, receipts, clock, queue_by_arn)
        self._sync_replicas = sync_replicas
        self._receipts = receipts
        self._clock = clock
        self._wakeups = wakeups
        self._queue_by_arn = queue_by_arn
        self._poll_interval_ms = poll_interval_ms
        self.stats = ReceiveStats()
        self._contention: dict[str, float] = {}
        self._frontiers: dict[tuple[str, int], Frontier] = {}
        self._empty_until: dict[tuple[str, int], int] = {}
        self._writes: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        # Counts are kept from the stream. Where a process can wait for its stream
        # reader (the local server), this waits until what was written before the call
        # is counted; elsewhere (Lambda) it does nothing and counts trail by the stream.
        self.catch_up_counts: Callable[[], None] = _nothing

    # -- send --------------------------------------------------------------------------
    def _prepare(self, queue: QueueRecord, request: SendRequest, now: int,
                 message_id: str | None = None) -> Message:
        body = rules.check_body(request.body)
        rules.check_attributes(request.attributes)
        rules.check_system_attributes(request.system_attributes)
        rules.check_size(body, request.attributes, queue.attribute_int("MaximumMessageSize"))
        rules.check_delay(request.delay_seconds)
        fairness.check_group_id(request.message_group_id)
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

    def _prepare_any(self, queue: QueueRecord, request: SendRequest, now: int,
                     call: SendCall | None = None) -> Message:
        """A standard or FIFO message, validated; FIFO ones carry their group and dedup id.
        A standard message of a deduplicated `call` gets the id the call derives for it."""
        if not fifo_rules.is_fifo(queue):
            fifo_rules.check_standard_send(request.deduplication_id)
            message_id = call.message_id(request.entry_id, request.digest()) if call else None
            return self._prepare(queue, request, now, message_id)
        message = self._prepare(queue, replace(request, delay_seconds=None), now)
        fifo_rules.check_fifo_send(queue, request.message_group_id, request.deduplication_id,
                                   request.delay_seconds)
        return fifo_rules.with_fifo_ids(queue, message, request.message_group_id or "",
                                        request.deduplication_id, now)

    def send(self, queue: QueueRecord, request: SendRequest,
             call: SendCall | None = None) -> Message:
        """SendMessage: validate, store, wake long polls. Raises the SQS error on failure.

        With `call` (request deduplication, standard queues), a message its first attempt
        stored already is answered as sent, unchanged, and not enqueued again."""
        message = self._prepare_any(queue, request, self._clock.now_ms(), call)
        if fifo_rules.is_fifo(queue):
            (stored,) = self._fifo.store(queue, self._seal(queue, [message]))
            self._wakeups.notify(queue.queue_id)
            return stored
        unstored, wrote = self._store_standard(queue, [message], call)
        if unstored:
            raise ServiceUnavailableError("The message could not be stored; retry the request.")
        if wrote:
            self._wakeups.notify(queue.queue_id)
        return message

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
        if fifo_rules.is_fifo(queue):
            fifo_rules.check_fifo_batch(
                queue, [(r.message_group_id, r.deduplication_id) for r in requests])
        prepared: list[tuple[str, Message]] = []
        failures: list[EntryFailure] = []
        for request in requests:
            try:
                prepared.append((request.entry_id,
                                 self._prepare_any(queue, request, now, call)))
            except SqsError as error:
                failures.append(EntryFailure.of(request.entry_id, error))
        if fifo_rules.is_fifo(queue):
            stored = self._fifo.store(queue, self._seal(queue, [m for _, m in prepared]))
            if stored:
                self._wakeups.notify(queue.queue_id)
            return [(e, m) for (e, _), m in zip(prepared, stored, strict=True)], failures
        unstored, wrote = self._store_standard(queue, [m for _, m in prepared], call)
        sent = [(e, m) for e, m in prepared if m.message_id not in unstored]
        failures += [
            EntryFailure(e, ServiceUnavailableError("The message could not be stored; retry."))
            for e, m in prepared if m.message_id in unstored
        ]
        if wrote:
            self._wakeups.notify(queue.queue_id)
        return sent, failures

    def _store_standard(
        self, queue: QueueRecord, messages: list[Message], call: SendCall | None,
    ) -> tuple[set[str], bool]:
        """Store a standard queue's new messages; the ids not stored, and whether any
        message was written (a retry's messages, stored already, are not)."""
        sealed = self._seal(queue, messages)
        if call is None:
            unstored = self._store_spread(queue, sealed)
            return unstored, len(unstored) < len(messages)
        return set(), bool(self._store_once(queue, call, sealed).written)

    def _seal(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """The messages as the stores keep them (encrypted when the queue is)."""
        return self.cipher.seal_many(queue, messages) if self.cipher else messages

    def _open(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """Messages read from a store, in clear text again."""
        return self.cipher.open_many(queue, messages) if self.cipher else messages

    def _store_spread(self, queue: QueueRecord, messages: list[Message]) -> set[str]:
        """Spread the messages over the active shards of one cluster: one batch write.

        The cluster is drawn with a weight of its active shard count, so a queue split
        across clusters still fills every shard evenly over many batches.
        """
        if not messages:
            return set()
        cluster = random.choice(queue.active_shards).cluster
        shards = [s for s in queue.active_shards if s.cluster == cluster]
        placed = [(random.choice(shards).id, m) for m in messages]
        placed = self.fairness.steer(queue.queue_id, placed, self._clock.now_ms())
        unstored = self._stores.of(cluster).put_messages(queue.queue_id, placed)
        for shard_id in {fairness.slot_of(shard_id, m) for shard_id, m in placed}:
            self._touch(queue.queue_id, shard_id)
        stored = [(s, m) for s, m in placed if m.message_id not in unstored]
        self._sync_replicas(queue, cluster, stored)
        return unstored

    def _store_once(self, queue: QueueRecord, call: SendCall, messages: list[Message]) -> NewPuts:
        """Store the messages of a deduplicated call where their ids place them: the
        call's cluster, the shard each id hashes to. A retry of the call finds the keys
        taken and writes nothing; only what was written is replicated and marked."""
        if not messages:
            return NewPuts()
        cluster = call.cluster(queue)
        shards = [s for s in queue.active_shards if s.cluster == cluster]
        placed = [(shard_for(m.message_id, shards), m) for m in messages]
        placed = self.fairness.steer(queue.queue_id, placed, self._clock.now_ms())
        puts = self._stores.of(cluster).put_new(queue.queue_id, placed)
        written = [(s, m) for s, m in placed if m.message_id in puts.written]
        for shard_id in {fairness.slot_of(shard_id, m) for shard_id, m in written}:
            self._touch(queue.queue_id, shard_id)
        self._sync_replicas(queue, cluster, written)
        return puts

    def _touch(self, queue_id: str, shard_id: int) -> None:
        """This process wrote to the shard: it is no longer known to be empty."""
        with self._lock:
            key = (queue_id, shard_id)
            self._empty_until.pop(key, None)
            self._writes[key] = self._writes.get(key, 0) + 1

    def _known_empty(self, queue_id: str, shard_id: int, now: int) -> bool:
        return self._empty_until.get((queue_id, shard_id), 0) > now

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
        once: Callable[[QueueRecord, int, int], list[Received]] = self._receive_once
        if fifo_rules.is_fifo(queue):
            fifo_rules.check_attempt_id(attempt_id)  # standard queues ignore the parameter
            if attempt_id:
                replayed = self._fifo.replay(queue, attempt_id)
                if replayed is not None:
                    return [Received(r.message, r.receipt_handle) for r in replayed]

            def fifo_once(queue: QueueRecord, wanted: int, timeout: int) -> list[Received]:
                return [Received(r.message, r.receipt_handle)
                        for r in self._fifo.receive_once(queue, wanted, timeout, attempt_id)]

            once = fifo_once
        timeout = visibility_timeout
        if timeout is None:
            timeout = queue.attribute_int("VisibilityTimeout")
        wait = queue.attribute_int("ReceiveMessageWaitTimeSeconds")
        if wait_seconds is not None:
            wait = wait_seconds
        deadline = self._clock.now_ms() + wait * 1000
        # A wall-clock bound as well, so that a long poll ends even when the clock is faked.
        wall_deadline = time.monotonic() + wait
        while True:
            seen = self._wakeups.generation(queue.queue_id)
            got = once(queue, max_messages, timeout)
            remaining = min(deadline - self._clock.now_ms(),
                            (wall_deadline - time.monotonic()) * 1000)
            if got or remaining <= 0:
                return got
            self._wakeups.wait(
                queue.queue_id, seen, min(remaining, self._poll_interval_ms) / 1000
            )

    def _receive_once(self, queue: QueueRecord, wanted: int, timeout: int) -> list[Received]:
        """One pass over the shards from a random offset.

        A store error after some messages were claimed ends the pass and returns them:
        raising would leave them hidden until their visibility timeout, their receive
        count raised, without any consumer having had them.
        """
        got: list[Received] = []
        ring = queue.shards
        offset = random.randrange(len(ring))
        now = self._clock.now_ms()
        try:
            # The main lane of every shard, then (fair queues) what the noisy lanes hold.
            for lane in (False, True):
                if lane and (len(got) >= wanted
                             or not self.fairness.reads_lanes(queue.queue_id, now)):
                    break
                for step in range(len(ring)):
                    shard = ring[(offset + step) % len(ring)]
                    if self._known_empty(queue.queue_id, lane_slot(shard.id) if lane
                                         else shard.id, now):
                        continue
                    self._claim_from_shard(queue, shard, wanted, timeout, got, lane)
                    if len(got) >= wanted:
                        break
        except StoreError:
            if not got:
                raise
            logger.warning("receive on %s cut short by a store error; returning %d claimed",
                           queue.queue_id, len(got))
        with self._lock:
            self.stats.receives += 1
            self.stats.returned += len(got)
        self.fairness.saw_received(queue.queue_id, [r.message.group_id for r in got], now)
        return got

    def _claim_from_shard(
        self, queue: QueueRecord, placed: Shard, wanted: int, timeout: int, got: list[Received],
        lane: bool = False,
    ) -> None:
        """Claim from one shard into `got` until it holds `wanted` or the shard runs dry.

        While receives come steadily a read asks for at least READ_AHEAD candidates; what
        this receive does not take the frontier keeps for the next receive of the shard
        here, which then makes no read. A lost claim drops what is kept (see `Frontier`).

        With `lane`, from the shard's noisy lane (fair queues): the same reads, shifted by
        LANE_BASE, with their own frontier and empty hint.
        """
        shard = placed.id
        base = LANE_BASE if lane else 0
        slot = lane_slot(shard) if lane else shard
        store = self._stores.of(placed.cluster)
        frontier = self._frontier(queue.queue_id, slot)
        writes = self._writes.get((queue.queue_id, slot), 0)
        after: Candidate | None = None
        upcoming: list[int] = []
        for round_ in range(_CLAIM_ROUNDS):
            now = self._clock.now_ms()
            contention = self._contention.get(queue.queue_id, 0.0)
            limit = (wanted - len(got)) + min(wanted - len(got), round(contention))

            size = frontier.read_size(limit)

            def fetch(start: Candidate | None, now: int = now, size: int = size) -> CandidatePage:
                # The read reaches EMPTY_HINT_MS past now, so that a shard with nothing
                # visible also tells, in the same request, when its next message shows.
                page = store.find_candidates(queue.queue_id, shard, base + now + EMPTY_HINT_MS,
                                             size, start, base)
                visible = [c for c in page.candidates if c.visible_at <= base + now]
                later = [c.visible_at - base for c in page.candidates if c.visible_at > base + now]
                upcoming.extend(later[:1])
                return CandidatePage(visible, page.more and not later, page.items_read)

            with frontier.reserve(fetch, after, limit, base + now) as page:
                ordered = list(page.candidates)
                if contention >= 0.5:
                    random.shuffle(ordered)
                lost = self._take(queue, placed, ordered, wanted - len(got), timeout, now, got)
                if lost:
                    frontier.forget()
                self._record(queue.queue_id, page.items_read, lost)
            if round_ == 0 and not page.candidates and not page.more:
                until = min(upcoming) if upcoming else now + EMPTY_HINT_MS
                self._hint_empty(queue.queue_id, slot, until, writes)
            if len(got) >= wanted:
                break
            # Short after kept candidates: the next round reads (after=None). Short after
            # a read: it goes on past where that read ended, while the index has more.
            if not page.kept and (not page.more or page.last is None):
                break
            after = page.last

    def _hint_empty(self, queue_id: str, shard: int, until: int, writes: int) -> None:
        """Nothing is visible in the shard: skip it until its next message shows (or 1 s).

        `writes` is this process's write count of the shard when the receive read it; a
        write since then means the shard may no longer be empty, so no hint is left.
        """
        key = (queue_id, shard)
        with self._lock:
            if self._writes.get(key, 0) == writes:
                self._empty_until[key] = until

    def _frontier(self, queue_id: str, shard: int) -> Frontier:
        with self._lock:
            return self._frontiers.setdefault((queue_id, shard), Frontier())

    def _take(
        self, queue: QueueRecord, placed: Shard, candidates: list[Candidate], wanted: int,
        timeout: int, now: int, got: list[Received],
    ) -> int:
        """Claim candidates into `got`; return how many claims were lost to other receivers.

        The plain claims go to the store together (one request for all of them); when
        some are lost, the next candidates go in a further call. A message claimed
        earlier in this receive can show up again further along the index (its new
        `visible_at` is still `<= now` with a zero visibility timeout); it is skipped,
        so that one response never holds a message twice. A message older than the
        queue's retention (lowered since it was sent) is dropped, as in SQS.
        """
        redrive = queue.redrive_policy
        max_receives = redrive.max_receive_count if redrive else None
        retention_ms = queue.attribute_int("MessageRetentionPeriod") * 1000
        claimed = {r.message.message_id for r in got}
        pending = [c for c in candidates if c.message_id not in claimed]
        expired: list[str] = []
        lost = 0
        taken = 0
        while taken < wanted and pending:
            batch = self._next_claims(queue, placed, pending, wanted - taken, now, max_receives,
                                      expired)
            for received in self._claim_many(queue, placed, batch, now + timeout * 1000, now):
                if received is None:
                    lost += 1
                elif received.message.sent_ms + retention_ms <= now:
                    expired.append(received.message.message_id)
                else:
                    got.append(received)
                    taken += 1
        if expired:
            self._stores.of(placed.cluster).delete_expired(queue.queue_id, placed.id, expired)
        return lost

    def _next_claims(
        self, queue: QueueRecord, placed: Shard, pending: list[Candidate], count: int, now: int,
        max_receives: int | None, expired: list[str],
    ) -> list[Candidate]:
        """Take up to `count` plain claims off the front of `pending`.

        Expired candidates met on the way go to `expired`; over-received ones move to the
        dead-letter queue (or are claimed as usual when the queue has none to move to).
        """
        batch: list[Candidate] = []
        while pending and len(batch) < count:
            candidate = pending.pop(0)
            action = candidate.action(now, max_receives)
            if action is CandidateAction.EXPIRE:
                expired.append(candidate.message_id)
            elif action is CandidateAction.DEAD_LETTER and self._dead_letter(
                queue, placed, candidate, now
            ):
                continue
            else:
                batch.append(candidate)
        return batch

    def _claim_many(
        self, queue: QueueRecord, placed: Shard, candidates: list[Candidate], visible_at: int,
        now: int,
    ) -> list[Received | None]:
        """Claim candidates together, each with a fresh token; None where another won."""
        if not candidates:
            return []
        tokens = [new_claim_token() for _ in candidates]
        messages = self._stores.of(placed.cluster).claim_many(
            queue.queue_id, placed.id, list(zip(candidates, tokens, strict=True)), visible_at, now
        )
        return [
            None if message is None else Received(message, self._receipts.encode(
                MessageRef(queue.queue_id, placed.id, message.message_id, token)
            ))
            for message, token in zip(messages, tokens, strict=True)
        ]

    def _dead_letter(
        self, queue: QueueRecord, placed: Shard, candidate: Candidate, now: int
    ) -> bool:
        """Move an over-received message to the DLQ; False if there is no DLQ to move to.

        Within one cluster the move is one transaction. Across clusters (two tables) the
        message is claimed, written to the DLQ, then deleted under the claim: a failure in
        between leaves it in the source queue, to be moved again, never lost.
        """
        redrive = queue.redrive_policy
        target = self._queue_by_arn(redrive.dead_letter_target_arn) if redrive else None
        if target is None:
            return False
        retention_ms = target.attribute_int("MessageRetentionPeriod") * 1000
        same = [s for s in target.active_shards if s.cluster == placed.cluster]
        if same:
            target_shard = random.choice(same)
            self._stores.of(placed.cluster).move(
                queue.queue_id, placed.id, candidate, target.queue_id, target_shard.id,
                retention_ms, now, source_arn=queue.arn,
            )
        else:
            target_shard = random.choice(target.active_shards)
            self._move_across(queue, placed, candidate, target, target_shard, retention_ms, now)
        self._touch(target.queue_id, target_shard.id)
        self._wakeups.notify(target.queue_id)
        observability.record_dead_letter_move(queue.account, queue.name)
        return True

    def _move_across(
        self, queue: QueueRecord, placed: Shard, candidate: Candidate, target: QueueRecord,
        target_shard: Shard, retention_ms: int, now: int,
    ) -> None:
        token = new_claim_token()
        source = self._stores.of(placed.cluster)
        message = source.claim(queue.queue_id, placed.id, candidate, now + 30_000, token, now)
        if message is None:
            return
        moved = message.moved_to_dead_letters(now, retention_ms, queue.arn)
        if self._stores.of(target_shard.cluster).put_messages(
            target.queue_id, [(target_shard.id, moved)]
        ):
            return
        source.delete_claimed([MessageRef(queue.queue_id, placed.id, message.message_id, token)])

    def _record(self, queue_id: str, items_read: int, lost: int) -> None:
        with self._lock:
            self.stats.items_read += items_read
            self.stats.lost_claims += lost
            previous = self._contention.get(queue_id, 0.0)
            self._contention[queue_id] = 0.8 * previous + 0.2 * lost

    # -- delete and visibility ---------------------------------------------------------
    def delete(
        self, queue: QueueRecord, entries: Sequence[HandleEntry]
    ) -> tuple[list[str], list[EntryFailure]]:
        """DeleteMessage(Batch). Any handle DMQ issued for a message deletes it, an older
        one of a redelivered message included (SQS's observed behaviour for standard
        queues); a handle of a message already gone succeeds and deletes nothing."""
        refs, failures = self._decode(queue, entries)
        if fifo_rules.is_fifo(queue):
            handles = {e.entry_id: e.receipt_handle for e in entries}
            failed = self._fifo.delete(queue, [(i, handles[i], r) for i, r in refs])
            self._wakeups.notify(queue.queue_id)  # a released group can be served at once
            gone = {entry_id for entry_id, _ in failed}
            return ([i for i, _ in refs if i not in gone],
                    failures + [EntryFailure(i, error) for i, error in failed])
        for cluster, group in _by_cluster(queue, [ref for _, ref in refs]).items():
            self._stores.of(cluster).delete_claimed(group, any_claim=True)
        return [entry_id for entry_id, _ in refs], failures

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
        now = self._clock.now_ms()
        timeouts = {e.entry_id: e.visibility_timeout for e in valid}
        handles = {e.entry_id: e.receipt_handle for e in valid}
        if fifo_rules.is_fifo(queue):
            outcomes = [VisibilityOutcome(self._fifo.change_visibility(queue, ref, timeouts[eid]))
                        for eid, ref in refs]
            self._wakeups.notify(queue.queue_id)  # a group may have been released
        else:
            # An older handle of a message in flight under a newer receive changes that
            # receive's visibility, as SQS does for standard queues.
            changes = [VisibilityChange(ref, now + timeouts[eid] * 1000, any_claim=True)
                       for eid, ref in refs]
            outcomes = self._change_visibility(queue, changes, now)
        done: list[str] = []
        for (entry_id, _ref), outcome in zip(refs, outcomes, strict=True):
            if outcome is VisibilityOutcome.CHANGED:
                done.append(entry_id)
            else:
                failures.append(EntryFailure.of(entry_id, _visibility_error(
                    outcome, handles[entry_id])))
        return done, failures + bad

    def _change_visibility(
        self, queue: QueueRecord, changes: list[VisibilityChange], now: int
    ) -> list[VisibilityOutcome]:
        """Each cluster's changes in one call; a shard the queue no longer has is not found."""
        outcomes: dict[int, VisibilityOutcome] = {}
        by_cluster: dict[str, list[int]] = {}
        for index, change in enumerate(changes):
            placed = queue.shard(change.ref.shard)
            if placed is None:
                outcomes[index] = VisibilityOutcome.NOT_FOUND
            else:
                by_cluster.setdefault(placed.cluster, []).append(index)
        for cluster, indexes in by_cluster.items():
            results = self._stores.of(cluster).change_visibility(
                [changes[i] for i in indexes], now
            )
            outcomes.update(zip(indexes, results, strict=True))
        for change in changes:
            self._touch(queue.queue_id, change.ref.shard)
        return [outcomes[i] for i in range(len(changes))]

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
        if fifo_rules.is_fifo(queue):
            return self._fifo.purge(queue)
        purged = sum(self._stores.of(s.cluster).purge(queue.queue_id, s.id)
                     for s in queue.shards)
        with self._lock:
            frontiers = [f for (q, _), f in self._frontiers.items() if q == queue.queue_id]
        for frontier in frontiers:
            frontier.forget()  # what they kept is gone
        return purged

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The oldest live messages of every shard, read without claiming (inspection)."""
        if fifo_rules.is_fifo(queue):
            return self._open(queue, self._fifo.peek(queue, limit))
        now = self._clock.now_ms()
        found: list[Message] = []
        for shard in queue.shards:
            found += self._stores.of(shard.cluster).peek(queue.queue_id, shard.id, limit)
        live = [m for m in found if not m.is_expired(now)]
        oldest = sorted(live, key=lambda m: (m.sent_ms, m.message_id))[:limit]
        return self._open(queue, oldest)

    def counts(self, queue: QueueRecord, fresh: bool = False) -> Counts:
        """Approximate counts over every shard. `fresh`: first let the counts take in
        what the stream holds, where this process can (the local server)."""
        if fresh:
            self.catch_up_counts()
        if fifo_rules.is_fifo(queue):
            return self._fifo.counts(queue)
        now = self._clock.now_ms()
        total = Counts()
        for shard in queue.shards:
            total = total + self._stores.of(shard.cluster).count(queue.queue_id, shard.id, now)
        return total

    def drained_shards(self, queue: QueueRecord) -> tuple[Shard, ...]:
        """Draining shards that are empty and past the grace period (safe to forget)."""
        return shards.drained(queue, self._stores, self._clock.now_ms())

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard (the admin view), caught up as `counts`."""
        self.catch_up_counts()
        if fifo_rules.is_fifo(queue):
            return self._fifo.shard_counts(queue)
        now = self._clock.now_ms()
        return {s.id: self._stores.of(s.cluster).count(queue.queue_id, s.id, now)
                for s in queue.shards}


def _by_cluster(queue: QueueRecord, refs: list[MessageRef]) -> dict[str, list[MessageRef]]:
    """Claims grouped by the cluster of their shard; a forgotten shard holds nothing."""
    grouped: dict[str, list[MessageRef]] = {}
    for ref in refs:
        placed = queue.shard(ref.shard)
        if placed is not None:
            grouped.setdefault(placed.cluster, []).append(ref)
    return grouped


def _visibility_error(outcome: VisibilityOutcome, handle: str) -> SqsError:
    if outcome is VisibilityOutcome.NOT_IN_FLIGHT:
        return MessageNotInflightError(
            "Message does not exist or is not available for visibility timeout change."
        )
    return InvalidParameterValueError(
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not "
        "exist or is not available for visibility timeout change."
    )
