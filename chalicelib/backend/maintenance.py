"""Back-end work run by stream and schedule handlers: body clean-up and retention sweeps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.store import MessageStore
from chalicelib.clusters.stores import ActiveShards, ClusterStores
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import Candidate
from chalicelib.domain.queues import QueueRecord

SWEEP_PAGE = 100
SWEEP_MAX_PAGES = 20
# An active shard is swept again at least this often (messages in flight at its last
# sweep, a retention lowered since), and sooner when its oldest head message expires.
SWEEP_GAP_MS = 10 * 60_000
MAX_DUE = 100_000  # shards whose next sweep a process remembers


def removed_body_keys(records: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
    """S3 keys of bodies (and large attributes) of removed items (deleted, purged, expired)."""
    keys = []
    for event_name, old_image in records:
        if event_name != "REMOVE" or not old_image:
            continue
        keys += [str(old_image[f]["S"]) for f in ("body_key", "attrs_key") if f in old_image]
    return keys


def release_bodies(
    bodies: BodyStore, records: Iterable[tuple[str, Mapping[str, Any] | None]]
) -> int:
    """Delete the S3 bodies of removed messages; a dead-letter move keeps its own copy."""
    keys = removed_body_keys(records)
    if keys:
        bodies.delete_many(keys)
    return len(keys)


def sweep_expired(stores: ClusterStores, queues: Iterable[QueueRecord], now_ms: int) -> int:
    """Delete visible messages past retention (emulators never run TTL; AWS lags by days).

    Only active shards are visited (`ClusterStores.ActiveShards`: those holding messages
    or written lately, a small set the stream handler keeps), each when its sweep falls
    due: at once when it joins the set, then when the oldest head message it saw expires,
    and at least every SWEEP_GAP_MS. The empty, quiet ones leave the set. A cluster whose
    store keeps no such set has every shard of `queues` swept, as before."""
    removed = 0
    homed = {q.queue_id: q for q in queues}
    for cluster, store in stores.items():
        if not isinstance(store, ActiveShards):
            shards = [(q.queue_id, s.id) for q in homed.values() for s in q.shards
                      if s.cluster == cluster]
            removed += sum(_sweep_shard(store, q, s, now_ms)[0] for q, s in shards)
            continue
        active = store.active_shards()
        for queue_id, shard in active:
            queue = homed.get(queue_id)
            placed = queue.shard(shard) if queue is not None else None
            due_key = (cluster, queue_id, shard)
            if placed is None or placed.cluster != cluster or \
                    stores.sweep_due.get(due_key, 0) > now_ms:
                continue
            swept, next_expiry = _sweep_shard(store, queue_id, shard, now_ms)
            removed += swept
            stores.sweep_due[due_key] = min(now_ms + SWEEP_GAP_MS,
                                            next_expiry if next_expiry is not None
                                            else now_ms + SWEEP_GAP_MS)
        store.release_quiet(active, now_ms)
        if len(stores.sweep_due) > MAX_DUE:
            stores.sweep_due.clear()
    return removed


def _sweep_shard(store: MessageStore, queue_id: str, shard: int,
                 now_ms: int) -> tuple[int, int | None]:
    """Sweep both lanes of a shard: the messages removed, and the earliest expiry of the
    unexpired ones it read at their heads (None: it read none)."""
    removed, earliest = 0, None
    for low in (0, LANE_BASE):  # the main lane, then a fair queue's noisy lane
        lane_removed, lane_earliest = _sweep_lane(store, queue_id, shard, now_ms, low)
        removed += lane_removed
        if lane_earliest is not None:
            earliest = lane_earliest if earliest is None else min(earliest, lane_earliest)
    return removed, earliest


def _sweep_lane(store: MessageStore, queue_id: str, shard: int, now_ms: int,
                low: int = 0) -> tuple[int, int | None]:
    removed, earliest = 0, None
    after: Candidate | None = None
    for _ in range(SWEEP_MAX_PAGES):
        page = store.find_candidates(queue_id, shard, low + now_ms, SWEEP_PAGE, after, low)
        expired = [c.message_id for c in page.candidates if c.expires_ms <= now_ms]
        kept = [c.expires_ms for c in page.candidates if c.expires_ms > now_ms]
        if kept:
            earliest = min(kept) if earliest is None else min(earliest, *kept)
        if expired:
            store.delete_expired(queue_id, shard, expired)
            removed += len(expired)
        if not expired or not page.more:
            break
        after = page.candidates[-1]
    return removed, earliest
