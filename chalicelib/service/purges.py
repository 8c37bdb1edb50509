"""The background half of PurgeQueue and DeleteQueue (`domain.purges`).

The request marks the queue's record (`purged_ms`: receives treat every message sent
before it as gone) and records a pending purge in the control table; `advance`, run by
the `remove_purged_messages` schedule (every minute on AWS, every second locally), then
deletes the stored messages a bounded step at a time, keeping each shard's progress, so
that a crash or restart resumes where the removal stopped. The deletes are plain
BatchWriteItems: their stream records take the messages out of the shard counts, and the
lifecycle audit sees each message removed, as after a DeleteMessage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from chalicelib.clock import Clock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.messages import Counts
from chalicelib.domain.purges import PendingPurge, PurgeKind, ShardProgress
from chalicelib.domain.queues import QueueRecord, QueueStatus
from chalicelib.fifo.store import FifoStore
from chalicelib.metadata.purges import PurgeRepository

logger = logging.getLogger("dmq.purges")

# Messages read per step of one shard: a step is a handful of requests, and its
# progress is saved after it.
STEP_ITEMS = 5_000
# With nothing pending, the control table is read again only this often (or at once after
# a purge recorded by this process).
RECHECK_S = 30.0
# A purge whose queue is still not marked this long after its cutoff failed (its request
# answered an error): it is dropped without removing anything.
VOID_AFTER_MS = 60_000


class PurgeService:
    """Records purges and runs their removal."""

    def __init__(self, repo: PurgeRepository, records: Callable[[str], QueueRecord | None],
                 stores: ClusterStores, fifo_stores: Mapping[str, FifoStore],
                 clock: Clock) -> None:
        self._repo = repo
        self._records = records  # a queue's current record (a fresh read)
        self._stores = stores
        self._fifo_stores = fifo_stores
        self._clock = clock
        self._lock = threading.Lock()
        self._dirty = True  # something may be pending: read the table at the next run
        self._checked_at = float("-inf")

    def record(self, queue: QueueRecord, cutoff_ms: int, kind: PurgeKind,
               present: Counts) -> None:
        """Record the removal of `queue`'s messages sent before `cutoff_ms`, with the
        queue's stored counts at the cutoff (`present`): one transaction on the control
        table, whatever the backlog. Written before the queue's record is marked: a purge
        whose mark failed is found void and dropped."""
        current = self._records(queue.queue_id) or queue  # its shard map as it stands
        self._repo.add(PendingPurge(
            queue_id=queue.queue_id, cutoff_ms=cutoff_ms, kind=kind,
            fifo=queue.name.endswith(".fifo"), present=present,
            shards=tuple(ShardProgress(s.id, s.cluster) for s in current.shards)))
        with self._lock:
            self._dirty = True

    def busy(self) -> bool:
        """Whether a run may find work (the last found some, or a purge was recorded)."""
        with self._lock:
            return self._dirty

    def advance(self, run_s: float) -> int:
        """Step the pending purges for about `run_s` seconds (at least one step each);
        return how many messages went."""
        now = time.monotonic()
        with self._lock:
            if not self._dirty and now - self._checked_at < RECHECK_S:
                return 0
            self._dirty = False
            self._checked_at = now
        deadline = now + run_s
        removed = 0
        left = False
        for purge in self._repo.pending():
            gone, finished = self._run(purge, deadline)
            removed += gone
            left = left or not finished
        if left:
            with self._lock:
                self._dirty = True
        return removed

    def _run(self, purge: PendingPurge, deadline: float) -> tuple[int, bool]:
        """Step one purge until it is done or the time is up; (removed, finished)."""
        valid, before = self._cutoff(purge)
        if not valid:
            if self._clock.now_ms() - purge.cutoff_ms < VOID_AFTER_MS:
                return 0, False  # its request may still be marking the queue
            logger.info("purge %s is void (the queue was not marked); dropped",
                        purge.purge_id)
            self._repo.finish(purge)
            return 0, True
        removed = steps = 0
        for shard in [s.shard for s in purge.shards]:
            progress = next(s for s in purge.shards if s.shard == shard)
            while not progress.done:
                if steps and time.monotonic() >= deadline:
                    return removed, False
                steps += 1
                gone, start = self._step(purge, progress, before)
                purge = purge.with_step(shard, start, gone)
                self._repo.save(purge)
                removed += gone.total
                progress = next(s for s in purge.shards if s.shard == shard)
        self._repo.finish(purge)
        logger.info("purge %s done: %d messages removed", purge.purge_id, purge.removed)
        return removed, True

    def _cutoff(self, purge: PendingPurge) -> tuple[bool, int | None]:
        """Whether the purge is valid (the queue's record was marked: else it is void and
        nothing goes), and what goes: messages sent before the cutoff, or every message
        (None: the queue is still the one this deleted, so a send that raced the delete
        goes too)."""
        record = self._records(purge.queue_id)
        if record is None or record.purged_ms < purge.cutoff_ms:
            return False, None
        if (purge.kind is PurgeKind.DELETE and record.status is QueueStatus.DELETED
                and record.deleted_ms == purge.cutoff_ms):
            return True, None
        return True, purge.cutoff_ms

    def _step(self, purge: PendingPurge, progress: ShardProgress,
              before: int | None) -> tuple[Counts, str | None]:
        now = self._clock.now_ms()
        if purge.fifo:
            fifo = self._fifo_stores[progress.cluster]
            return fifo.remove_sent_before(purge.queue_id, progress.shard, before,
                                           progress.start, STEP_ITEMS, now)
        return self._stores.of(progress.cluster).remove_sent_before(
            purge.queue_id, progress.shard, before, progress.start, STEP_ITEMS, now)
