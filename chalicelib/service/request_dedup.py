"""Request deduplication for standard queues (docs/request-dedup.md).

An SDK sends the same `amz-sdk-invocation-id` with every retry of one call. When a
SendMessage or SendMessageBatch to a standard queue carries one, each message's id is
derived from the call (caller, queue, action, invocation id) and from its entry (the
entry id and a digest of its parameters), and its place (cluster and shard) from those.
The store then writes a message only where no item holds its key yet: a retry names the
same messages in the same places, finds them stored, and is answered as the first
attempt was, without enqueuing them again and without any write beyond the messages'.

This module owns which sends are deduplicated and the ids and places of their messages;
the conditional writes are the store's (`MessageStore.put_new`). FIFO queues have their
own deduplication (MessageDeduplicationId) and are left alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from chalicelib.domain.messages import call_message_id
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.fifo.service import is_fifo


def _bucket(parts: Sequence[str], size: int) -> int:
    """A number below `size` for `parts`, the same in every process."""
    text = json.dumps(list(parts), separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % size


@dataclass(frozen=True)
class SendCall:
    """One SDK call that sends: who sent it to which queue, as which action, under which
    invocation id (the same for every retry of the call)."""

    caller: str
    queue_id: str
    action: str
    invocation_id: str

    def message_id(self, entry_id: str, digest: str, position: int = 0) -> str:
        """The id of one entry's message. `digest` is of the entry's parameters: the same
        invocation id with other parameters is no retry, and names another message. The
        ids of one call sort in the order of its entries (`position`)."""
        return call_message_id((self.caller, self.queue_id, self.action, self.invocation_id),
                               position, (entry_id, digest))

    def cluster(self, queue: QueueRecord) -> str:
        """The cluster of the call's messages: one per call, so that a batch is one write,
        drawn over the active shards as a random draw would be (a cluster weighs as many
        shards as it has)."""
        ring = sorted(queue.active_shards, key=lambda s: s.id)
        key = (self.caller, self.queue_id, self.action, self.invocation_id)
        return ring[_bucket(key, len(ring))].cluster


def shard_for(message_id: str, shards: Sequence[Shard]) -> int:
    """The shard of `shards` that a message id hashes to."""
    ordered = sorted(s.id for s in shards)
    return ordered[_bucket((message_id,), len(ordered))]


class RequestDedup:
    """Picks the send calls whose messages get ids and places derived from the request."""

    def call(self, queue: QueueRecord, caller: str, action: str,
             invocation_id: str | None) -> SendCall | None:
        """The call to deduplicate: a send to a standard queue with an invocation id
        (None otherwise: its messages get fresh ids and random places)."""
        if not invocation_id or is_fifo(queue):
            return None
        return SendCall(caller, queue.queue_id, action, invocation_id)
