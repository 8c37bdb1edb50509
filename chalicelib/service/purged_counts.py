"""Counts that drop at a purge, not as its removal goes (`PendingPurge.counts_after`).

PurgeQueue answers at once and its messages are removed in the background, a step at a
time; the stored counts follow the removal. So that a count shows what SQS shows (a
purged queue is empty within a minute, whatever its backlog), a count of a queue whose
last purge or deletion (`purged_ms`) is still pending takes off what that purge holds.

What this costs: nothing for a queue never purged; for a purged one, one consistent
BatchGetItem of its purge record (a hundred queues to a request) while its removal runs,
and once more when it has finished: a finished purge is remembered, by queue, for the
life of the process, so a queue's counts stop reading the control table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from chalicelib.domain.messages import Counts
from chalicelib.domain.queues import QueueRecord
from chalicelib.metadata.purges import PurgeRepository


def purge_id_of(queue: QueueRecord) -> str:
    """The id of the purge (or deletion) that marked the queue last."""
    return f"{queue.queue_id}#{queue.purged_ms}"


class PurgedCounts:
    """Queues' counts less what their pending purges took."""

    def __init__(self, repo: PurgeRepository) -> None:
        self._repo = repo
        self._lock = threading.Lock()
        self._finished: dict[str, int] = {}  # queue id -> its last purge known finished

    def of(self, queue: QueueRecord, stored: Counts) -> Counts:
        """One queue's counts, from what its stores hold."""
        return self.of_many([queue], {queue.queue_id: stored})[queue.queue_id]

    def of_many(self, queues: Iterable[QueueRecord],
                stored: Mapping[str, Counts]) -> dict[str, Counts]:
        """Each queue's counts by id, from what the stores hold (`stored`, by id)."""
        queues = [q for q in queues if q.queue_id in stored]
        with self._lock:
            marked = [q for q in queues
                      if q.purged_ms > self._finished.get(q.queue_id, 0)]
        counts = dict(stored)
        if not marked:
            return counts
        pending = self._repo.get_many(sorted({purge_id_of(q) for q in marked}))
        with self._lock:
            for queue in marked:
                purge = pending.get(purge_id_of(queue))
                if purge is None:
                    known = self._finished.get(queue.queue_id, 0)
                    self._finished[queue.queue_id] = max(known, queue.purged_ms)
                else:
                    counts[queue.queue_id] = purge.counts_after(stored[queue.queue_id])
        return counts
