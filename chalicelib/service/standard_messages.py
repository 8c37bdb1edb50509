"""Standard queues: sends spread over the active shards (or placed by their id when a
request is deduplicated), receives by `StandardReceiver`, deletes and visibility changes
on any claim, as SQS does for standard queues."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

from chalicelib.backend.items import ShardChange
from chalicelib.backend.store import NewPuts, VisibilityChange
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.lanes import LANE_BASE, lane_slot
from chalicelib.domain.messages import (
    Candidate,
    Counts,
    Message,
    MessageRef,
    VisibilityOutcome,
)
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo import service as fifo_rules
from chalicelib.service import fairness
from chalicelib.service.bulk_counts import CountsMany
from chalicelib.service.exceptions import SqsError
from chalicelib.service.fairness import Fairness
from chalicelib.service.message_kinds import (
    Build,
    QueueByArn,
    Received,
    ReceiveStats,
    SendRequest,
    Stored,
    SyncReplicate,
)
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.request_dedup import SendCall, shard_for
from chalicelib.service.standard_receive import ShardHints, StandardReceiver


class StandardMessages:
    """The message operations of standard queues (`message_kinds.MessageKind`)."""

    def __init__(self, stores: ClusterStores, receipts: ReceiptCodec, clock: Clock,
                 wakeups: Wakeups, queue_by_arn: QueueByArn, fair: Fairness,
                 sync_replicas: SyncReplicate) -> None:
        self._stores = stores
        self._clock = clock
        self._sync_replicas = sync_replicas
        self._hints = ShardHints()
        self._receiver = StandardReceiver(stores, receipts, clock, wakeups, queue_by_arn,
                                          fair, self._hints)

    @property
    def hints(self) -> ShardHints:
        """What this process knows of its shards (FIFO queues' share them)."""
        return self._hints

    @property
    def fairness(self) -> Fairness:
        """The fair-queue state that steers sends and reads the noisy lanes."""
        return self._receiver.fairness

    @fairness.setter
    def fairness(self, value: Fairness) -> None:
        self._receiver.fairness = value

    @property
    def stats(self) -> ReceiveStats:
        """What the receives cost (read by the benchmark and tests)."""
        return self._receiver.stats

    # -- send -----------------------------------------------------------------------------
    def check_batch(self, queue: QueueRecord,
                    entries: Sequence[tuple[str | None, str | None]]) -> None:
        """A standard queue takes any batch (each entry is checked on its own)."""

    def prepare(self, queue: QueueRecord, request: SendRequest, now: int,
                call: SendCall | None, build: Build) -> Message:
        """A standard message; a deduplicated `call` gives it the id it derives for it."""
        fifo_rules.check_standard_send(request.deduplication_id)
        return build(request, call.message_id(request.entry_id, request.digest(),
                                              request.position) if call else None)

    def store(self, queue: QueueRecord, messages: list[Message],
              call: SendCall | None) -> Stored:
        """Store new messages; the ids not stored, and whether any message was written (a
        retry's messages, stored already, are not)."""
        if call is None:
            unstored = self._store_spread(queue, messages)
            return Stored(messages, frozenset(unstored), len(unstored) < len(messages))
        return Stored(messages, frozenset(), bool(self._store_once(queue, call, messages).written))

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
        stored = [(s, m) for s, m in placed if m.message_id not in unstored]
        self._touch_sent(queue, placed, stored)
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
        self._touch_sent(queue, written, written)
        self._sync_replicas(queue, cluster, written)
        return puts

    def _touch_sent(self, queue: QueueRecord, placed: list[tuple[int, Message]],
                    stored: list[tuple[int, Message]]) -> None:
        """Tell the hints of each slot written to what was sent there: the messages of
        the main lane, visible at once and stored, as candidates a receive here may claim
        without a read (`ShardHints.touch`); a slot that got any other write, none."""
        now = self._clock.now_ms()
        kept = {m.message_id for _, m in stored}
        sent: dict[int, list[Candidate] | None] = {}
        for shard_id, m in placed:
            slot = fairness.slot_of(shard_id, m)
            if slot != shard_id or m.visible_at > now or m.message_id not in kept:
                sent[slot] = None
            elif slot not in sent:
                sent[slot] = [_candidate(shard_id, m)]
            elif (known := sent[slot]) is not None:
                known.append(_candidate(shard_id, m))
        for slot, candidates in sent.items():
            self._hints.touch(queue.queue_id, slot, candidates or ())

    # -- receive --------------------------------------------------------------------------
    def replay(self, queue: QueueRecord, attempt_id: str | None) -> list[Received] | None:
        """Standard queues ignore ReceiveRequestAttemptId: nothing to replay."""
        return None

    def receive_once(self, queue: QueueRecord, wanted: int, timeout: int,
                     attempt_id: str | None) -> list[Received]:
        """One pass over the shards (`StandardReceiver`)."""
        return self._receiver.receive_once(queue, wanted, timeout)

    def quiet_until(self, queue: QueueRecord, now: int) -> int | None:
        """Until when a long poll may sleep, unless woken (`StandardReceiver`)."""
        return self._receiver.quiet_until(queue, now)

    def follow(self, following: Callable[[], bool]) -> None:
        """Every change to the shards reaches `observed` while `following()` holds."""
        self._hints.follow(following)

    def observed(self, change: ShardChange, now: int) -> bool:
        """A change the stream showed; True when the queue's long polls should look again.
        A noisy lane's messages are told apart by their visibility (`domain.lanes`)."""
        visible_at, slot = change.visible_at, change.shard
        if visible_at is not None and visible_at >= LANE_BASE:
            visible_at, slot = visible_at - LANE_BASE, lane_slot(change.shard)
        return self._hints.observed(change.queue_id, slot, visible_at, now,
                                    change.message_id if change.inserted else "")

    # -- delete and visibility --------------------------------------------------------------
    def delete(self, queue: QueueRecord,
               refs: Sequence[tuple[str, str, MessageRef]]) -> list[tuple[str, SqsError]]:
        """Any handle DMQ issued for a message deletes it (an older one of a redelivered
        message included); one of a message already gone deletes nothing, and succeeds."""
        for cluster, group in _by_cluster(queue, [ref for _, _, ref in refs]).items():
            self._stores.of(cluster).delete_claimed(group, any_claim=True)
        return []

    def change_visibility(self, queue: QueueRecord, refs: Sequence[tuple[str, MessageRef]],
                          timeouts: Mapping[str, int], now: int) -> list[VisibilityOutcome]:
        """An older handle of a message in flight under a newer receive changes that
        receive's visibility, as SQS does for standard queues."""
        return self._change_visibility(queue, [
            VisibilityChange(ref, now + timeouts[entry_id] * 1000, any_claim=True)
            for entry_id, ref in refs], now)

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
            self._hints.touch(queue.queue_id, change.ref.shard)
        return [outcomes[i] for i in range(len(changes))]

    # -- queue-wide -------------------------------------------------------------------------
    def purge(self, queue: QueueRecord) -> int:
        """Delete every message of every shard."""
        purged = sum(self._stores.of(s.cluster).purge(queue.queue_id, s.id)
                     for s in queue.shards)
        self._receiver.forget(queue.queue_id)
        return purged

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The oldest live messages of every shard, read without claiming (those sent before
        a purge are gone, as for a receive, while their removal runs)."""
        now = self._clock.now_ms()
        found: list[Message] = []
        for shard in queue.shards:
            found += self._stores.of(shard.cluster).peek(queue.queue_id, shard.id, limit,
                                                         queue.purged_ms)
        live = [m for m in found if not m.is_expired(now) and m.sent_ms > queue.purged_ms]
        return sorted(live, key=lambda m: (m.sent_ms, m.message_id))[:limit]

    def counts(self, queue: QueueRecord) -> Counts:
        """Approximate counts over every shard."""
        total = Counts()
        for counted in self.shard_counts(queue).values():
            total = total + counted
        return total

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard: the count items of a cluster's shards in one
        BatchGetItem (per hundred), however many shards the queue has grown to."""
        now = self._clock.now_ms()
        by_cluster: dict[str, list[int]] = {}
        for shard in queue.shards:
            by_cluster.setdefault(shard.cluster, []).append(shard.id)
        found: dict[int, Counts] = {}
        for cluster, ids in by_cluster.items():
            store = self._stores.of(cluster)
            if isinstance(store, CountsMany):
                counted = store.count_many([(queue.queue_id, i) for i in ids], now)
                found.update({i: counted[(queue.queue_id, i)] for i in ids})
            else:
                found.update({i: store.count(queue.queue_id, i, now) for i in ids})
        return {s.id: found[s.id] for s in queue.shards}


def _by_cluster(queue: QueueRecord, refs: list[MessageRef]) -> dict[str, list[MessageRef]]:
    """Claims grouped by the cluster of their shard; a forgotten shard holds nothing."""
    grouped: dict[str, list[MessageRef]] = {}
    for ref in refs:
        placed = queue.shard(ref.shard)
        if placed is not None:
            grouped.setdefault(placed.cluster, []).append(ref)
    return grouped


def _candidate(shard: int, message: Message) -> Candidate:
    """A message just stored, as a read of the index would show it (the claim reads the
    item back: `message` is left out, so what the store holds is what is returned)."""
    return Candidate(shard=shard, message_id=message.message_id,
                     visible_at=message.visible_at, expires_ms=message.expires_ms,
                     receive_count=0, sent_ms=message.sent_ms)
