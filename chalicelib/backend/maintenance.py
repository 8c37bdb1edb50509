"""Back-end work run by stream and schedule handlers: body clean-up and retention sweeps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.store import MessageStore
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import Candidate
from chalicelib.domain.queues import QueueRecord

SWEEP_PAGE = 100
SWEEP_MAX_PAGES = 20


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
    """Delete visible messages past retention (emulators never run TTL; AWS lags by days)."""
    removed = 0
    for queue in queues:
        for shard in queue.shards:
            for low in (0, LANE_BASE):  # the main lane, then a fair queue's noisy lane
                removed += _sweep_shard(stores.of(shard.cluster), queue.queue_id, shard.id,
                                        now_ms, low)
    return removed


def _sweep_shard(store: MessageStore, queue_id: str, shard: int, now_ms: int,
                 low: int = 0) -> int:
    removed = 0
    after: Candidate | None = None
    for _ in range(SWEEP_MAX_PAGES):
        page = store.find_candidates(queue_id, shard, low + now_ms, SWEEP_PAGE, after, low)
        expired = [c.message_id for c in page.candidates if c.expires_ms <= now_ms]
        if expired:
            store.delete_expired(queue_id, shard, expired)
            removed += len(expired)
        if not expired or not page.more:
            break
        after = page.candidates[-1]
    return removed
