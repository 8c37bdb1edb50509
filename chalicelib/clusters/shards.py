"""The internal cluster manager's shard work: resizing a queue and forgetting drained shards.

Scaling out adds shards (or takes back draining ones). Scaling in marks the highest
active shards draining: sends stop going there at once, receives keep reading them, and
a shard is forgotten only once it is empty and has been draining for longer than any
front end can keep an older copy of the queue record (the metadata cache), so that no
late send lands in a shard nobody reads.
"""

from __future__ import annotations

from chalicelib.clusters.autoscale_rules import MAX_SHARDS
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.fifo import ranges as fifo_ranges
from chalicelib.fifo.service import is_fifo
from chalicelib.service.exceptions import InvalidAttributeValueError

__all__ = ["DRAIN_GRACE_MS", "MAX_SHARDS", "SWITCH_MS", "drained", "reshaped", "resize", "split"]
DRAIN_GRACE_MS = 60_000
# A FIFO resharding's default switch delay: the metadata cache's 5 s, and a second more.
SWITCH_MS = 6_000


def reshaped(queue: QueueRecord, count: int, cluster: str, now_ms: int,
             switch_ms: int = SWITCH_MS) -> tuple[Shard, ...]:
    """The queue's shard map with `count` shards taking sends: a standard queue's now; a
    FIFO queue's hash ranges split or merged, switching `switch_ms` from now (a merge
    of an odd set of original shards may leave it above `count`)."""
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"a queue has 1 to {MAX_SHARDS} shards, not {count}")
    if is_fifo(queue):
        try:
            return fifo_ranges.resize(queue.shards, count, cluster, now_ms + switch_ms)
        except fifo_ranges.MapFullError:
            raise InvalidAttributeValueError(
                "Invalid value for the parameter DmqShardCount. Reason: the queue's earlier "
                "resizes are still draining; try again once its old shards are empty.") from None
    return resize(queue.shards, count, cluster, now_ms)


def resize(shards: tuple[Shard, ...], count: int, cluster: str, now_ms: int) -> tuple[Shard, ...]:
    """The shard map with `count` active shards; new shards go to `cluster`."""
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"a queue has 1 to {MAX_SHARDS} shards, not {count}")
    by_id = {s.id: s for s in shards}
    active = sorted(s.id for s in shards if not s.draining)
    if count < len(active):
        for shard_id in active[count:]:
            by_id[shard_id] = Shard(shard_id, by_id[shard_id].cluster, now_ms)
    missing = count - len(active)
    for shard_id in sorted(i for i, s in by_id.items() if s.draining):
        if missing <= 0:
            break
        by_id[shard_id] = Shard(shard_id, by_id[shard_id].cluster)
        missing -= 1
    next_id = max(by_id, default=-1) + 1
    for offset in range(max(missing, 0)):
        by_id[next_id + offset] = Shard(next_id + offset, cluster)
    return tuple(by_id[i] for i in sorted(by_id))


def split(shards: tuple[Shard, ...], cluster: str) -> tuple[Shard, ...]:
    """Spread a queue across `cluster` too: as many new shards there as it has active now."""
    active = [s for s in shards if not s.draining]
    next_id = max((s.id for s in shards), default=-1) + 1
    added = tuple(Shard(next_id + i, cluster) for i in range(len(active)))
    return shards + added


def drained(queue: QueueRecord, stores: ClusterStores, now_ms: int) -> tuple[Shard, ...]:
    """Draining shards that are past the grace period and hold no message."""
    return tuple(
        s for s in queue.shards
        if s.draining and now_ms - s.draining_since_ms >= DRAIN_GRACE_MS
        and stores.of(s.cluster).is_empty(queue.queue_id, s.id)
    )
