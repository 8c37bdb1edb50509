"""Each queue's gauges: its visible, in-flight and delayed messages and the age of its
oldest message, read as GetQueueAttributes reads them.

The counts come from the shard counts the stream keeps, less the hidden part of the
visibility index, so their cost never grows with the visible backlog; they are read for
all the queues at once, a hundred shards a request; the oldest age is
the oldest message by send time of a bounded read of each shard (message ids do not
order sends; a FIFO shard keeps its messages by group, so there it is the oldest of the
first `FIFO_HEADS` heads).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.messages import Counts
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo.service import is_fifo
from chalicelib.frontend.services import Services
from chalicelib.service import bulk_counts

FIFO_HEADS = 10
WORKERS = 8


@dataclass(frozen=True)
class QueueGauges:
    """One queue's gauges at one moment."""

    region: str
    account: str
    queue: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float
    dead_letter_queue: bool  # some queue's RedrivePolicy targets it
    shards: int = 1  # active shards (the autoscaler's or an admin's count)


def dead_letter_arns(queues: list[QueueRecord]) -> set[str]:
    """The ARNs the queues' redrive policies name as dead-letter queues."""
    return {q.redrive_policy.dead_letter_target_arn for q in queues if q.redrive_policy}


def read(services: Services, region: str, now_ms: int, workers: int = WORKERS,
         stores: ClusterStores | None = None) -> list[QueueGauges]:
    """The gauges of every active queue of the services' region. With the region's
    `stores`, the counts of every queue are read in bulk (`service.bulk_counts`: a hundred
    shards per store request), and only a queue that holds messages is peeked for its
    oldest message (an empty one is 0 s old); without, each queue is counted and peeked,
    `workers` queues at a time (each queue's reads wait on the store, not on this
    process)."""
    queues = services.queues.all_queues()
    targets = dead_letter_arns(queues)
    counted = (bulk_counts.counts_of(queues, stores, now_ms, services.messages.counts,
                                     services.messages.purged)
               if stores is not None else None)

    def gauges(queue: QueueRecord) -> QueueGauges:
        counts = counted[queue.queue_id] if counted is not None else \
            services.messages.counts(queue)
        held = counts.total
        heads = services.messages.peek(queue, FIFO_HEADS if is_fifo(queue) else 1) \
            if held or counted is None else []
        oldest = min((m.sent_ms for m in heads), default=None)
        age = max(0.0, (now_ms - oldest) / 1000) if oldest is not None else 0.0
        return QueueGauges(region, queue.account, queue.name, counts.visible,
                           counts.in_flight, counts.delayed, age, queue.arn in targets,
                           queue.shard_count)

    peeked = [q for q in queues if counted is None or _holds(counted[q.queue_id])]
    if len(peeked) < 2:
        return [gauges(q) for q in queues]
    # Only the queues that read the store go through the pool (a future costs tens of
    # microseconds: 10,000 of them were a third of a scrape's time).
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dmq-gauges") as pool:
        read = dict(zip((q.queue_id for q in peeked), pool.map(gauges, peeked), strict=True))
    return [read[q.queue_id] if q.queue_id in read else gauges(q) for q in queues]


def _holds(counts: Counts) -> bool:
    return counts.total > 0
