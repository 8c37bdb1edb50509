"""FIFO queues behind the message service's one interface (`message_kinds.MessageKind`):
the checks of FIFO sends and receives, and `fifo.FifoService`'s ordered operations, with
long polls woken when a group is released. Where every change is followed (the local
server's stream pump), a waiting receive that found nothing sleeps until a change wakes it
or its shards' first hidden group turns visible, as a standard queue's does: the shards'
hints are the standard queues' (`ShardHints`), which the stream's changes void."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

from chalicelib.backend.wakeups import Wakeups
from chalicelib.domain.messages import Counts, Message, MessageRef, VisibilityOutcome
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo import service as fifo_rules
from chalicelib.service.exceptions import SqsError
from chalicelib.service.message_kinds import Build, Received, SendRequest, Stored
from chalicelib.service.request_dedup import SendCall
from chalicelib.service.standard_receive import ShardHints


class FifoMessages:
    """The message operations of FIFO queues."""

    def __init__(self, fifo: fifo_rules.FifoService, wakeups: Wakeups,
                 hints: ShardHints | None = None) -> None:
        self._fifo = fifo
        self._wakeups = wakeups
        self._hints = hints or ShardHints()
        # Per thread: the queue a receive last read, and its shards' write counts before
        # the read (what a hint made after it must still match).
        self._reads = threading.local()

    def _touch(self, queue: QueueRecord) -> None:
        """This process wrote to the queue: what its shards' hints said may be wrong."""
        for shard in queue.shards:
            self._hints.touch(queue.queue_id, shard.id)

    def check_batch(self, queue: QueueRecord,
                    entries: Sequence[tuple[str | None, str | None]]) -> None:
        """Every entry names a group, and a dedup id unless the content gives one."""
        fifo_rules.check_fifo_batch(queue, entries)

    def prepare(self, queue: QueueRecord, request: SendRequest, now: int,
                call: SendCall | None, build: Build) -> Message:
        """A FIFO message with its group and dedup id (the queue's delay only: a FIFO
        message has no delay of its own)."""
        message = build(replace(request, delay_seconds=None), None)
        fifo_rules.check_fifo_send(queue, request.message_group_id, request.deduplication_id,
                                   request.delay_seconds)
        return fifo_rules.with_fifo_ids(queue, message, request.message_group_id or "",
                                        request.deduplication_id, now)

    def store(self, queue: QueueRecord, messages: list[Message],
              call: SendCall | None) -> Stored:
        """Store in order; a duplicate comes back as the original."""
        stored = self._fifo.store(queue, messages)
        self._touch(queue)
        return Stored(stored, frozenset(), bool(stored))

    def replay(self, queue: QueueRecord, attempt_id: str | None) -> list[Received] | None:
        """What a live ReceiveRequestAttemptId returned, with the same receipt handles."""
        fifo_rules.check_attempt_id(attempt_id)
        if not attempt_id:
            return None
        replayed = self._fifo.replay(queue, attempt_id)
        if replayed is None:
            return None
        return [Received(r.message, r.receipt_handle) for r in replayed]

    def receive_once(self, queue: QueueRecord, wanted: int, timeout: int,
                     attempt_id: str | None) -> list[Received]:
        """One pass over the shards: whole groups' heads, in order."""
        self._reads.last = (queue.queue_id, {
            s.id: self._hints.writes(queue.queue_id, s.id) for s in queue.shards})
        return [Received(r.message, r.receipt_handle)
                for r in self._fifo.receive_once(queue, wanted, timeout, attempt_id)]

    def quiet_until(self, queue: QueueRecord, now: int) -> int | None:
        """Until when no shard is expected to deliver (0: one may now), where changes are
        followed; None (look again at each poll interval) where they are not. Asked of a
        waiting receive whose pass found nothing: each shard it read is hinted empty until
        its first hidden group turns visible, unless a change came since the pass began
        (only a receive that waits pays that read)."""
        last, self._reads.last = getattr(self._reads, "last", None), None
        if not self._hints.following():
            return None
        if last is not None and last[0] == queue.queue_id:
            read_at, ready = self._fifo.ready_from(queue, self._hints.horizon_ms())
            for shard, until in ready.items():
                if shard in last[1]:
                    self._hints.hint_empty(queue.queue_id, shard, until, last[1][shard],
                                           read_at)
        return self._hints.quiet_until(queue.queue_id, [s.id for s in queue.shards])

    def delete(self, queue: QueueRecord,
               refs: Sequence[tuple[str, str, MessageRef]]) -> list[tuple[str, SqsError]]:
        """Delete, releasing the groups whose hold is done (served again at once)."""
        failed = self._fifo.delete(queue, refs)
        self._touch(queue)
        self._wakeups.notify(queue.queue_id)
        return failed

    def change_visibility(self, queue: QueueRecord, refs: Sequence[tuple[str, MessageRef]],
                          timeouts: Mapping[str, int], now: int) -> list[VisibilityOutcome]:
        """Each message's new timeout; a group may be released by it."""
        outcomes = [VisibilityOutcome(self._fifo.change_visibility(queue, ref, timeouts[eid]))
                    for eid, ref in refs]
        self._touch(queue)
        self._wakeups.notify(queue.queue_id)
        return outcomes

    def purge(self, queue: QueueRecord) -> int:
        """Delete every message and group."""
        return self._fifo.purge(queue)

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The groups' first messages, without claiming them."""
        return self._fifo.peek(queue, limit)

    def counts(self, queue: QueueRecord) -> Counts:
        """Approximate counts over every shard."""
        return self._fifo.counts(queue)

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard."""
        return self._fifo.shard_counts(queue)
