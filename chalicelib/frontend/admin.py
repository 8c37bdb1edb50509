"""The admin API: every queue across accounts, one queue in detail, and message inspection.

These routes carry an IAM authorizer on AWS, so only principals granted
`execute-api:Invoke` on them (the admins) can call them.
"""

from __future__ import annotations

from typing import Any

from chalicelib.backend.messages import Message
from chalicelib.frontend.services import Services
from chalicelib.metadata.types import QueueRecord

PEEK_BODY_CHARS = 1024
MAX_PEEK = 100


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
    counts = services.messages.counts(queue)
    return {**_record(queue), "visible": counts.visible, "in_flight": counts.in_flight,
            "delayed": counts.delayed}


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
