"""How many messages each queue shard holds: sharded counters in the control table.

A shard's count is spread over `slots` items, `count#<messages table>#<queue id>#<shard>#<slot>`,
each with a number `n` changed only by `ADD`. A write picks a random slot, so concurrent
writers to one shard rarely contend for one item; a read sums the slots (one
BatchGetItem), so GetQueueAttributes costs the same whatever the backlog.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.domain.exceptions import StoreError
from chalicelib.dynamo_batches import get_all, write_all
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger("dmq.counters")
SLOTS = 4


class ShardCounters:
    """Reads and changes the message counters of queue shards (one control table)."""

    def __init__(
        self, client: DynamoDBClient, table: str, slots: int = SLOTS,
        pick: Callable[[int], int] = random.randrange,
    ) -> None:
        self._db = client
        self.table = table
        self._slots = slots
        self._pick = pick

    def key(self, messages_table: str, pk: str, slot: int) -> dict[str, Any]:
        """The control-table key of one slot of a shard (`pk` is `<queue id>#<shard>`)."""
        return {"key": {"S": f"count#{messages_table}#{pk}#{slot}"}}

    def add_op(self, messages_table: str, pk: str, delta: int) -> dict[str, Any]:
        """A TransactWriteItems `Update` adding `delta` to a random slot of a shard."""
        return {"Update": {
            "TableName": self.table,
            "Key": self.key(messages_table, pk, self._pick(self._slots)),
            "UpdateExpression": "ADD n :d",
            "ExpressionAttributeValues": {":d": {"N": str(delta)}},
        }}

    def add(self, messages_table: str, pk: str, delta: int) -> None:
        """Add `delta` to a shard's count (one UpdateItem); StoreError on a fault."""
        if delta:
            with translate_errors():
                self._db.update_item(**self.add_op(messages_table, pk, delta)["Update"])

    def add_quietly(self, messages_table: str, pk: str, delta: int) -> None:
        """Add, but only log a fault: the writes it counts have landed and must stand
        (failing them would make clients send again), and the count is approximate."""
        try:
            self.add(messages_table, pk, delta)
        except StoreError:
            logger.warning("count of %s in %s missed a change of %+d", pk, messages_table,
                           delta, exc_info=True)

    def total(self, messages_table: str, queue_id: str, shard: int) -> int:
        """The messages a shard holds by its counters (never below 0)."""
        pk = items.partition_key(queue_id, shard)
        keys = [self.key(messages_table, pk, slot) for slot in range(self._slots)]
        found = get_all(self._db, self.table, keys, consistent=False)
        return max(0, sum(int(i["n"]["N"]) for i in found if "n" in i))

    def reset(self, messages_table: str, pk: str, value: int) -> None:
        """Set a shard's count (a resync replaced the whole shard): slot 0 holds it all."""
        puts = [{"PutRequest": {"Item": {**self.key(messages_table, pk, slot),
                                         "n": {"N": str(value if slot == 0 else 0)}}}}
                for slot in range(self._slots)]
        write_all(self._db, self.table, puts)
