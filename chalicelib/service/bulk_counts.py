"""The counts of many queues at once, for the views that show every queue (`GET /metrics`,
the console's list). A shard out of its store's active set (`ShardCounters.active`: the
shards that hold messages or counted a record lately) holds nothing, so only the active
shards are read: their count items together, a hundred per BatchGetItem, and the
visibility index only of the shards with messages turning visible in the current minute,
instead of a request set per queue. What a count means is `MessageService.counts`'s: the
two agree, but for a shard whose first message is being counted this moment (it joins the
set just after its count)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from chalicelib.clusters.stores import ActiveShards, ClusterStores
from chalicelib.domain.messages import Counts
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo.service import is_fifo
from chalicelib.service.purged_counts import PurgedCounts


@runtime_checkable
class CountsMany(Protocol):
    """A store that counts many shards at once."""

    def count_many(self, shards: Sequence[tuple[str, int]], now_ms: int,
                   weighted: bool = False) -> dict[tuple[str, int], Counts]:
        """The counts of each (queue id, shard)."""
        ...


def counts_of(queues: Iterable[QueueRecord], stores: ClusterStores, now_ms: int,
              one: Callable[[QueueRecord], Counts],
              purged: PurgedCounts | None = None) -> dict[str, Counts]:
    """Each queue's counts over its shards, by queue id, less what pending purges took
    (`purged`, as the message service's count does). A queue on a store that cannot count
    in bulk is counted by `one` (the message service's count)."""
    queues = list(queues)
    groups: dict[tuple[str, bool], list[tuple[str, int]]] = {}
    alone: list[QueueRecord] = []
    for queue in queues:
        if not all(isinstance(stores.of(s.cluster), CountsMany) for s in queue.shards):
            alone.append(queue)
            continue
        fifo = is_fifo(queue)
        for shard in queue.shards:
            groups.setdefault((shard.cluster, fifo), []).append((queue.queue_id, shard.id))
    totals = {q.queue_id: Counts() for q in queues}
    active: dict[str, set[tuple[str, int]] | None] = {}
    for (cluster, fifo), pairs in groups.items():
        store = stores.of(cluster)
        assert isinstance(store, CountsMany)
        if cluster not in active:
            active[cluster] = set(store.active_shards()) \
                if isinstance(store, ActiveShards) else None
        held = active[cluster]
        if held is not None:  # a shard out of the active set holds nothing
            pairs = [pair for pair in pairs if pair in held]
        for (queue_id, _), counts in store.count_many(pairs, now_ms, fifo).items():
            totals[queue_id] = totals[queue_id] + counts
    if purged is not None:  # `one` takes off the purges of the queues it counts
        counted = {q.queue_id for q in alone}
        totals = purged.of_many([q for q in queues if q.queue_id not in counted], totals)
    for queue in alone:
        totals[queue.queue_id] = one(queue)
    return totals
