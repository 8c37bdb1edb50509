"""The admin API: queues across accounts, message inspection, shards and clusters.

These routes carry an IAM authorizer on AWS, so only principals granted
`execute-api:Invoke` on them (the admins) can call them.
"""

from __future__ import annotations

from typing import Any

from chalicelib.clusters.shards import MAX_SHARDS
from chalicelib.domain.messages import Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.services import Services
from chalicelib.service.exceptions import InvalidParameterValueError

PEEK_BODY_CHARS = 1024
MAX_PEEK = 100
CONFIGURE_CLUSTERS = ("More clusters are configured with DMQ_CLUSTERS (e.g. DMQ_CLUSTERS=c2, "
                      "set before DMQ starts).")


def _record(queue: QueueRecord) -> dict[str, Any]:
    return {
        "queue_id": queue.queue_id, "account": queue.account, "name": queue.name,
        "region": queue.region, "arn": queue.arn, "shard_count": queue.shard_count,
        "shards": [s.to_json() for s in queue.shards], "created_ms": queue.created_ms,
        "modified_ms": queue.modified_ms, "attributes": queue.attributes, "tags": queue.tags,
    }


def list_queues(services: Services) -> dict[str, Any]:
    """Every active queue of every account."""
    return {"queues": [_record(q) for q in services.queues.all_queues()]}


def describe_queue(services: Services, account: str, name: str) -> dict[str, Any]:
    """One queue's record and its approximate counts."""
    queue = services.queues.get(account, name)
    counts = services.messages.counts(queue, fresh=True)
    return {**_record(queue), "visible": counts.visible, "in_flight": counts.in_flight,
            "delayed": counts.delayed, "autoscale": _autoscale(services, queue)}


def _message(message: Message) -> dict[str, Any]:
    return {
        "message_id": message.message_id, "sent_ms": message.sent_ms,
        "visible_at": message.visible_at, "expires_ms": message.expires_ms,
        "receive_count": message.receive_count, "body_md5": message.body_md5,
        "body": message.body[:PEEK_BODY_CHARS],
        "body_truncated": len(message.body) > PEEK_BODY_CHARS,
        "body_in_s3": message.body_key is not None,
        "attributes": sorted(message.attributes),
    }


def peek_messages(services: Services, account: str, name: str, limit: int) -> dict[str, Any]:
    """The oldest messages of a queue, read without claiming them (no receive is counted)."""
    queue = services.queues.get(account, name)
    messages = services.messages.peek(queue, max(1, min(limit, MAX_PEEK)))
    return {"queue_id": queue.queue_id, "messages": [_message(m) for m in messages]}


def _number(body: dict[str, Any] | None, field: str) -> float:
    value = (body or {}).get(field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterValueError(f"The request body needs a number in '{field}'.")
    return float(value)


def set_shards(
    services: Services, account: str, name: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    """Scale a queue to `count` active shards; shards scaled in drain first. The count is
    pinned: the autoscaler leaves the queue alone until it is unpinned."""
    count = _number(body, "count")
    if not count.is_integer() or not 1 <= count <= MAX_SHARDS:
        raise InvalidParameterValueError(f"count must be an integer from 1 to {MAX_SHARDS}.")
    queue = services.queues.get(account, name)
    scaled = services.queues.set_shard_count(queue, int(count))
    if services.autoscaler is not None:
        services.autoscaler.pin(scaled, True)
    return {**_record(scaled), "autoscale": _autoscale(services, scaled)}


def set_autoscale(
    services: Services, account: str, name: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    """Pin a queue's shard count (`{"pinned": true}`) or hand it back to the autoscaler."""
    pinned = (body or {}).get("pinned")
    if not isinstance(pinned, bool):
        raise InvalidParameterValueError("The request body needs true or false in 'pinned'.")
    queue = services.queues.get(account, name)
    if services.autoscaler is not None:
        services.autoscaler.pin(queue, pinned)
    return {**_record(queue), "autoscale": _autoscale(services, queue)}


def _autoscale(services: Services, queue: QueueRecord) -> str:
    """How the queue's shard count is set (`Autoscaler.mode`; 'off' with no autoscaler)."""
    return services.autoscaler.mode(queue) if services.autoscaler is not None else "off"


def split_queue(
    services: Services, account: str, name: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    """Spread a hot queue onto another cluster (the one given, or the ring's choice)."""
    queue = services.queues.get(account, name)
    cluster = (body or {}).get("cluster") or services.clusters.split_target(queue)
    if not isinstance(cluster, str) or cluster not in services.settings.clusters:
        raise InvalidParameterValueError(
            ("No other cluster can take this queue" if cluster is None
             else f"Unknown cluster {cluster}") + f"; configured: "
            f"{list(services.settings.clusters)}. {CONFIGURE_CLUSTERS}"
        )
    return _record(services.queues.split(queue, cluster))


def list_clusters(services: Services) -> dict[str, Any]:
    """Every cluster: capacity, recorded utilization, whether it takes new queues, queues."""
    return {"clusters": services.clusters.view(services.queues.all_queues())}


def set_cluster_capacity(
    services: Services, cluster: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    """Set a cluster's capacity in active shards (0 stops placing queues there)."""
    capacity = _number(body, "capacity")
    if capacity < 0 or cluster not in services.settings.clusters:
        raise InvalidParameterValueError(
            f"capacity must be >= 0 and the cluster one of {list(services.settings.clusters)}."
            f" {CONFIGURE_CLUSTERS}"
        )
    services.clusters.set_capacity(cluster, capacity)
    return list_clusters(services)
