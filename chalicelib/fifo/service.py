"""FIFO queues: send validation and deduplication, group-ordered receive, group release.

MessageService hands every message operation on a FIFO queue (`is_fifo`) to FifoService.
It runs over the `FifoStore` protocol (`chalicelib.fifo.store`); on DynamoDB, with
its layout and transactions, that is `chalicelib.fifo.dynamo`. The choices are
explained in docs/fifo.md.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from chalicelib import observability
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.messages import Counts, Message, MessageRef, new_claim_token
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.fifo import ranges as fifo_ranges
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.gate import DrainGate
from chalicelib.fifo.store import FifoEntry, FifoStore, GroupState, SendLayout
from chalicelib.service.exceptions import (
    InvalidParameterValueError,
    MissingParameterError,
    SqsError,
)
from chalicelib.service.receipts import ReceiptCodec

logger = logging.getLogger(__name__)

# Groups read from the visibility index per shard and pass (a small factor of a receive).
GROUPS_PER_READ = 10
# Head messages removed or moved per group in one receive, at most.
HEAD_FIXES = 10


def is_fifo(queue: QueueRecord) -> bool:
    """True for a FIFO queue."""
    return queue.attributes.get("FifoQueue") == "true"


def shard_of_group(queue: QueueRecord, group: str, now_ms: int) -> Shard:
    """The shard a group's new messages go to: the one whose range of the group hash
    holds it and that takes sends now (`fifo.ranges`)."""
    return fifo_ranges.owner(queue.shards, group, now_ms)


def send_layout(queue: QueueRecord, placed: Sequence[tuple[int, Message]]) -> SendLayout:
    """Where the side items of a send go: nothing special for a queue never resharded;
    once resharded, each group's dedup items stay in its original slot's partition and a
    shard made by the resharding counts from when it opened."""
    if not any(s.mod for s in queue.shards):
        return SendLayout()
    return SendLayout(
        [fifo_ranges.dedup_slot(queue.shards, m.group_id or "") for _, m in placed],
        {s.id: s.opens_at_ms for s in queue.shards if s.opens_at_ms})


@dataclass(frozen=True)
class FifoReceived:
    """A claimed FIFO message and its receipt handle."""

    message: Message
    receipt_handle: str


def _not_for_queue_type(name: str, value: object) -> InvalidParameterValueError:
    return InvalidParameterValueError(
        f"Value {value} for parameter {name} is invalid. Reason: The request include "
        "parameter that is not valid for this queue type."
    )


def _bad_id(name: str, value: str) -> InvalidParameterValueError:
    return InvalidParameterValueError(
        f"Value {value} for parameter {name} is invalid. Reason: {name} can only include "
        "alphanumeric and punctuation characters. 1 to 128 in length."
    )


MISSING_GROUP = "The request must contain the parameter MessageGroupId."
MISSING_DEDUP = ("The queue should either have ContentBasedDeduplication enabled or "
                 "MessageDeduplicationId provided explicitly")


def check_ids(group: str | None, dedup: str | None) -> None:
    """Given ids must be 1 to 128 alphanumeric or punctuation characters."""
    if dedup is not None and not fifo.valid_fifo_id(dedup):
        raise _bad_id("MessageDeduplicationId", dedup)
    if group is not None and not fifo.valid_fifo_id(group):
        raise _bad_id("MessageGroupId", group)


def check_fifo_send(queue: QueueRecord, group: str | None, dedup: str | None,
                    delay: int | None) -> None:
    """A FIFO message's own rules, in SQS's order: ids, per-message delay, group, dedup."""
    check_ids(group, dedup)
    if delay:
        raise _not_for_queue_type("DelaySeconds", delay)
    if group is None:
        raise MissingParameterError(MISSING_GROUP)
    if dedup is None and queue.attributes.get("ContentBasedDeduplication") != "true":
        raise InvalidParameterValueError(MISSING_DEDUP)


def check_fifo_batch(queue: QueueRecord, entries: Sequence[tuple[str | None, str | None]]) -> None:
    """A FIFO batch fails as a whole when an entry lacks its group or a needed dedup id."""
    content = queue.attributes.get("ContentBasedDeduplication") == "true"
    for group, dedup in entries:
        if dedup is None and not content:
            raise InvalidParameterValueError(MISSING_DEDUP)
        if group is None:
            raise InvalidParameterValueError(MISSING_GROUP)


def check_attempt_id(attempt_id: str | None) -> None:
    """A ReceiveRequestAttemptId is 1 to 128 alphanumeric or punctuation characters."""
    if attempt_id is not None and not fifo.valid_fifo_id(attempt_id):
        raise _bad_id("ReceiveRequestAttemptId", attempt_id)


def check_standard_send(dedup: str | None) -> None:
    """A standard queue refuses MessageDeduplicationId."""
    if dedup is not None:
        raise InvalidParameterValueError(
            f"Value {dedup} for parameter MessageDeduplicationId is invalid. Reason: The "
            "request includes a parameter that is not valid for this queue type."
        )


def with_fifo_ids(queue: QueueRecord, message: Message, group: str, dedup: str | None,
                  now_ms: int) -> Message:
    """The prepared message with its group and dedup id; the queue's delay applies."""
    return message.with_changes(
        group_id=group, dedup_id=dedup or fifo.content_dedup_id(message.body),
        visible_at=now_ms + queue.attribute_int("DelaySeconds") * 1000,
    )


QueueByArn = Callable[[str], QueueRecord | None]


def _attempt_key(queue: QueueRecord, attempt_id: str) -> str:
    """An attempt id within this queue's lifetime (a queue created again starts afresh)."""
    return f"{queue.created_ms}#{attempt_id}"


class FifoService:
    """FIFO send, receive, delete and visibility over the FIFO stores of each cluster."""

    def __init__(self, stores: Mapping[str, FifoStore], receipts: ReceiptCodec, clock: Clock,
                 queue_by_arn: QueueByArn) -> None:
        self._stores = dict(stores)
        self._receipts = receipts
        self._clock = clock
        self._queue_by_arn = queue_by_arn
        self._gate = DrainGate(
            lambda queue_id, shard: self._store(shard.cluster).is_empty(queue_id, shard.id))

    def _store(self, cluster: str) -> FifoStore:
        return self._stores[cluster]

    # -- send ---------------------------------------------------------------------------
    def store(self, queue: QueueRecord, messages: Sequence[Message]) -> list[Message]:
        """Store prepared messages (group and dedup id set), in order; a duplicate comes
        back as the original's id and sequence number."""
        if not messages:
            return []
        now = self._clock.now_ms()
        scope = queue.attributes.get("DeduplicationScope", "queue")
        by_cluster: dict[str, list[int]] = {}
        placed: list[tuple[int, Message]] = []
        for index, message in enumerate(messages):
            shard = shard_of_group(queue, message.group_id or "", now)
            by_cluster.setdefault(shard.cluster, []).append(index)
            placed.append((shard.id, message))
        result: dict[int, Message] = {}
        for cluster, indexes in by_cluster.items():
            mine = [placed[i] for i in indexes]
            outcomes = self._store(cluster).send(queue.queue_id, scope, mine, now,
                                                 queue.created_ms, send_layout(queue, mine),
                                                 queue.purged_ms)
            result.update({i: o.message for i, o in zip(indexes, outcomes, strict=True)})
        return [result[i] for i in range(len(messages))]

    # -- receive ------------------------------------------------------------------------
    def replay(self, queue: QueueRecord, attempt_id: str) -> list[FifoReceived] | None:
        """The messages a live receive attempt returned (those not deleted since), with
        the same receipt handles; None when there is no such attempt."""
        now = self._clock.now_ms()
        for cluster in dict.fromkeys(s.cluster for s in queue.shards):
            store = self._store(cluster)
            refs = store.attempt(queue.queue_id, _attempt_key(queue, attempt_id), now)
            if refs is None:
                continue
            entries = store.read(refs)
            tokens = {(r.shard, r.message_id): r.claim_token for r in refs}
            return [self._received(queue, e, tokens[(e.shard, e.sort_key)]) for e in entries]
        return None

    def receive_once(
        self, queue: QueueRecord, wanted: int, timeout: int, attempt_id: str | None = None,
    ) -> list[FifoReceived]:
        """One pass over the shards: whole groups' heads, in order, until `wanted`.

        A store error after some messages were claimed ends the pass and returns them.
        """
        got: list[FifoReceived] = []
        now = self._clock.now_ms()
        ring = [s for s in sorted(queue.shards, key=lambda s: s.id)
                if self._gate.delivers(queue, s, now)]
        if not ring:
            return got
        offset = random.randrange(len(ring))
        attempt = (_attempt_key(queue, attempt_id), new_claim_token()) if attempt_id else None
        try:
            for step in range(len(ring)):
                shard = ring[(offset + step) % len(ring)]
                self._from_shard(queue, shard, wanted, timeout, got, attempt)
                if len(got) >= wanted:
                    break
        except StoreError:
            if not got:
                raise
            logger.warning("FIFO receive on %s cut short by a store error; returning %d",
                           queue.queue_id, len(got))
        return got

    def ready_from(self, queue: QueueRecord, horizon_ms: int) -> tuple[int, dict[int, int]]:
        """When each shard a receive reads now may next deliver: when its first group turns
        visible, or `horizon_ms` from now when none does before. A shard with a group
        visible already, or whose delivery waits on a drain, is left out (unknown).
        Returns (now, {shard: from when})."""
        now = self._clock.now_ms()
        until = now + horizon_ms
        found: dict[int, int] = {}
        for shard in queue.shards:
            if not self._gate.delivers(queue, shard, now):
                continue
            first = self._store(shard.cluster).first_visible_at(queue.queue_id, shard.id, until)
            if first is None or first > now:
                found[shard.id] = until if first is None else first
        return now, found

    def _from_shard(self, queue: QueueRecord, placed: Shard, wanted: int, timeout: int,
                    got: list[FifoReceived], attempt: tuple[str, str] | None) -> None:
        """Plan the heads of the shard's ready groups, then claim them in one transaction."""
        store = self._store(placed.cluster)
        now = self._clock.now_ms()
        groups = store.ready_groups(queue.queue_id, placed.id, now, GROUPS_PER_READ)
        # Oldest ready group first, filled before the next: SQS returns as many messages of
        # one group as it can. Groups one receive held turn visible together: they come
        # behind the groups that waited, in the order it took them (SQS's observed order).
        # Receivers that meet on a group: one wins, the others' next pass finds the group
        # held and takes the next one.
        groups = sorted(groups, key=lambda g: (g.visible_at, g.place))
        plans: list[tuple[GroupState, list[FifoEntry], str]] = []
        room = wanted - len(got)
        for group in groups:
            if room <= 0:
                break
            taken, whole = self._plan_group(queue, store, group, room, now)
            if taken:
                last = (taken[-1].message.sequence_number or "") if whole else ""
                plans.append((group, taken, fifo.claim_token(new_claim_token(), len(taken),
                                                             last, len(plans))))
                room -= len(taken)
        if not plans:
            return
        recorded = (*attempt, not got) if attempt else None
        for index in store.claim(queue.queue_id, plans, now + timeout * 1000, now, recorded):
            group, taken, token = plans[index]
            got.extend(self._received(queue, e, token, now) for e in taken)

    def _plan_group(self, queue: QueueRecord, store: FifoStore, group: GroupState, wanted: int,
                    now: int) -> tuple[list[FifoEntry], bool]:
        """The group's first messages that can go now, in order (its head fixed first), and
        whether they are every message the group has."""
        entries = store.head(queue.queue_id, group.shard, group.group, wanted + 1)
        for _ in range(HEAD_FIXES):
            if not entries:
                store.drop_group(queue.queue_id, group)
                return [], False
            fixed = self._fix_head(queue, store, group, entries, now)
            if fixed is None:
                return [], False  # another receiver changed the group, or it waits
            if not fixed:
                break
            entries = store.head(queue.queue_id, group.shard, group.group, wanted + 1)
        redrive = queue.redrive_policy
        limit = redrive.max_receive_count if redrive else None
        taken: list[FifoEntry] = []
        for entry in entries:
            over = limit is not None and entry.message.receive_count >= limit
            cannot = (entry.ready_at > now or entry.until > now or entry.message.is_expired(now)
                      or entry.message.sent_ms <= queue.purged_ms)
            if cannot or over:
                break  # order: nothing after a message that cannot go now
            taken.append(entry)
        taken = taken[:wanted]
        return taken, len(taken) == len(entries)

    def _fix_head(self, queue: QueueRecord, store: FifoStore, group: GroupState,
                  entries: list[FifoEntry], now: int) -> bool | None:
        """Deal with the group's head: expired (and purged) messages go, an over-received
        one moves to the dead-letter queue, a delayed one sets the group's time. True when the head
        changed (read it again), False when it can be claimed, None to leave the group."""
        head = entries[0]
        expired = []
        for entry in entries:
            # a message sent before the queue's last purge goes as an expired one does
            if not entry.message.is_expired(now) and entry.message.sent_ms > queue.purged_ms:
                break
            expired.append(entry)
        if expired:
            return True if store.remove_head(queue.queue_id, group, expired) else None
        if head.ready_at > now or head.until > now:
            # delayed, or still in flight (its visibility was extended past the group's
            # time): the group waits for its head
            store.set_group_visible_at(queue.queue_id, group, max(head.ready_at, head.until))
            return None
        redrive = queue.redrive_policy
        if redrive and head.message.receive_count >= redrive.max_receive_count:
            target = self._queue_by_arn(redrive.dead_letter_target_arn)
            if target is None or not is_fifo(target) or not self._same_cluster(
                    queue, group, target, head, now):
                return False  # nowhere to move it: it is received as usual
            return True if self._move(queue, store, group, head, target, now) else None
        return False

    @staticmethod
    def _same_cluster(queue: QueueRecord, group: GroupState, target: QueueRecord,
                      head: FifoEntry, now: int) -> bool:
        """A move is one transaction in one messages table: the dead-letter queue's shard
        for the group must be in the source shard's cluster."""
        source = queue.shard(group.shard)
        target_shard = shard_of_group(target, head.message.group_id or "", now)
        return source is not None and source.cluster == target_shard.cluster

    def _move(self, queue: QueueRecord, store: FifoStore, group: GroupState, head: FifoEntry,
              target: QueueRecord, now: int) -> bool:
        """Move the head to the FIFO dead-letter queue, keeping id, group and dedup id."""
        target_shard = shard_of_group(target, head.message.group_id or "", now)
        retention = target.attribute_int("MessageRetentionPeriod") * 1000
        moved = head.message.moved_to_dead_letters(now, retention)
        done = store.move(queue.queue_id, group, head, target.queue_id, target_shard.id, moved,
                          target_shard.opens_at_ms)
        if done:
            observability.record_dead_letter_move(queue.account, queue.name)
        return done

    def _received(self, queue: QueueRecord, entry: FifoEntry, token: str,
                  now: int | None = None) -> FifoReceived:
        message = entry.message
        if now is not None:  # just claimed: the item's new receive count and first receive
            message = message.with_changes(
                receive_count=message.receive_count + 1,
                first_receive_ms=message.first_receive_ms or now, claim_token=token)
        handle = self._receipts.encode(MessageRef(queue.queue_id, entry.shard,
                                                  entry.sort_key, token))
        return FifoReceived(message, handle)

    # -- delete and visibility ----------------------------------------------------------
    def delete(self, queue: QueueRecord, refs: Sequence[tuple[str, str, MessageRef]]
               ) -> list[tuple[str, SqsError]]:
        """Delete by (entry id, handle, ref); returns the entries that failed, with why."""
        now = self._clock.now_ms()
        failures: list[tuple[str, SqsError]] = []
        by_cluster: dict[str, list[int]] = {}
        for index, (_, _, ref) in enumerate(refs):
            placed = queue.shard(ref.shard)
            if placed is not None and fifo.is_fifo_message_key(ref.message_id):
                by_cluster.setdefault(placed.cluster, []).append(index)
        for cluster, indexes in by_cluster.items():
            failed = self._store(cluster).delete([refs[i][2] for i in indexes], now)
            for position in failed:
                entry_id, handle, _ = refs[indexes[position]]
                failures.append((entry_id, InvalidParameterValueError(
                    f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The "
                    "receipt handle has expired.")))
        return failures

    def change_visibility(self, queue: QueueRecord, ref: MessageRef, timeout: int) -> str:
        """"changed", "not_in_flight" or "not_found" for one handle."""
        placed = queue.shard(ref.shard)
        if placed is None or not fifo.is_fifo_message_key(ref.message_id):
            return "not_found"
        now = self._clock.now_ms()
        return self._store(placed.cluster).change_visibility(ref, now + timeout * 1000, now)

    # -- queue-wide ---------------------------------------------------------------------
    def counts(self, queue: QueueRecord) -> Counts:
        """Approximate counts: the shards' counters less what is in flight or delayed."""
        total = Counts()
        for counted in self.shard_counts(queue).values():
            total = total + counted
        return total

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard: a cluster's shards read together, however
        many the queue has."""
        now = self._clock.now_ms()
        by_cluster: dict[str, list[tuple[str, int]]] = {}
        for shard in queue.shards:
            by_cluster.setdefault(shard.cluster, []).append((queue.queue_id, shard.id))
        found: dict[tuple[str, int], Counts] = {}
        for cluster, pairs in by_cluster.items():
            found.update(self._store(cluster).count_many(pairs, now))
        return {s.id: found[(queue.queue_id, s.id)] for s in queue.shards}

    def purge(self, queue: QueueRecord) -> int:
        """Delete every message and group of every shard."""
        return sum(self._store(s.cluster).purge(queue.queue_id, s.id) for s in queue.shards)

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The first messages of each shard's groups, unclaimed (none sent before a purge)."""
        found: list[Message] = []
        for shard in queue.shards:
            found += self._store(shard.cluster).peek(queue.queue_id, shard.id, limit)
        return [m for m in found if m.sent_ms > queue.purged_ms][:limit]
