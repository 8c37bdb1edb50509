"""What the DynamoDB FIFO store's parts share: the table, the keys and the numbering state.

`DynamoFifoStore` (`chalicelib.fifo.dynamo`) is built in layers, one module each:
this base, the sends (`dynamo_fifo_sends`), the claims (`dynamo_fifo_claims`), then the
deletes, visibility changes and counts.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from chalicelib.backend import items
from chalicelib.backend.items import Item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from chalicelib.backend.dynamo_store import DynamoMessageStore

# Rounds of a send or a delete whose transaction lost some of its conditions.
SEND_ROUNDS = 8
# Sequence numbers a process reserves at a time, per shard.
BLOCK = 100


def n_attr(value: int) -> dict[str, str]:
    """A DynamoDB number."""
    return {"N": str(value)}


def s_attr(value: str) -> dict[str, str]:
    """A DynamoDB string."""
    return {"S": value}


class FifoBase:
    """FIFO primitives over one messages table; the ordering rules live in the service."""

    def __init__(self, base: DynamoMessageStore) -> None:
        self._base = base
        self._db: DynamoDBClient = base.client
        self.table = base.table
        self._blocks: dict[tuple[str, int, int], tuple[int, int]] = {}
        self._lock = threading.Lock()

    # -- keys ---------------------------------------------------------------------------
    def _key(self, pk: str, sk: str) -> Item:
        return {"pk": s_attr(pk), "sk": s_attr(sk)}

    @staticmethod
    def dedup_pk(queue_id: str, shard: int, scope: str) -> str:
        """Dedup items of scope `queue` share one partition; `messageGroup` ones live in
        their group's shard."""
        if scope == "messageGroup":
            return items.partition_key(queue_id, shard)
        return f"{queue_id}#dedup"

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """True when the shard holds no message (no group item is left in the index)."""
        return self._base.is_empty(queue_id, shard)
