"""How many messages each queue shard holds, kept from the messages table's stream.

No request writes a count. The stream handler (`apply_records`) turns each batch of
stream records into one change per queue shard and writes it with one UpdateItem on the
shard's count item in the control table, `count#<messages table>#<queue id>#<shard>#0`:

- `n`: the shard's messages, changed only by `ADD`;
- `seq`: the zero-padded sequence number of the last stream record counted in.

The update is conditional on `seq` being older than the first record it counts, so a
batch seen again (a retried handler, a pump that restarts after kill -9 from an older
checkpoint) is never counted twice: the failed condition returns the stored `seq`, and
only the records after it are counted. This rests on what DynamoDB Streams promise for
one partition key: its records reach one handler at a time, in sequence order.

A record counts +1 when an item becomes a live message and -1 when one stops being
(deleted, purged, expired by TTL, moved, or replaced by a replication tombstone);
claims and visibility changes count nothing, and cost nothing.

Slots 1 to 3 of each shard are read too: earlier versions spread request-path counts
over four slots, and messages counted there are counted out here when they go.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.replica import is_tombstone, padded
from chalicelib.domain import fifo
from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.dynamo_batches import get_all
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger("dmq.counters")
SLOTS = 4  # read: slot 0 is kept from the stream, 1 to 3 hold older counts
_ROUNDS = 3
_NOT_MESSAGES = (fifo.GROUP_PREFIX, fifo.DEDUP_PREFIX, fifo.SEQUENCE_KEY)
_CONDITION = "attribute_not_exists(seq) OR seq < :first"


@dataclass(frozen=True)
class Change:
    """One stream record's effect on its shard's count."""

    table: str
    pk: str
    seq: str  # padded: string order is stream order
    delta: int


def is_live_message(image: Mapping[str, Any] | None) -> bool:
    """Whether an item image is a message that counts (not FIFO bookkeeping, not a
    replication tombstone)."""
    if not image or is_tombstone(image) or "sk" not in image:
        return False
    return not str(image["sk"].get("S", "")).startswith(_NOT_MESSAGES)


def table_of(record: Mapping[str, Any]) -> str:
    """The table a stream record (Lambda event form) came from, by its source ARN."""
    arn = str(record.get("eventSourceARN", ""))
    return arn.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in arn else ""


def changes_of(records: Sequence[Mapping[str, Any]]) -> list[Change]:
    """The count changes of a batch, in order; records that change no count are left out."""
    found: list[Change] = []
    for record in records:
        data = record.get("dynamodb", {})
        delta = int(is_live_message(data.get("NewImage"))) \
            - int(is_live_message(data.get("OldImage")))
        pk = data.get("Keys", {}).get("pk", {}).get("S")
        if delta and pk:
            found.append(Change(table_of(record), str(pk), padded(str(data["SequenceNumber"])),
                                delta))
    return found


class ShardCounters:
    """Reads the message counts of queue shards; the stream handler keeps them."""

    def __init__(self, client: DynamoDBClient, table: str, slots: int = SLOTS) -> None:
        self._db = client
        self.table = table
        self._slots = slots

    def key(self, messages_table: str, pk: str, slot: int = 0) -> dict[str, Any]:
        """The control-table key of one slot of a shard (`pk` is `<queue id>#<shard>`)."""
        return {"key": {"S": f"count#{messages_table}#{pk}#{slot}"}}

    def total(self, messages_table: str, queue_id: str, shard: int) -> int:
        """The messages a shard holds by its count (one BatchGetItem; never below 0)."""
        pk = items.partition_key(queue_id, shard)
        keys = [self.key(messages_table, pk, slot) for slot in range(self._slots)]
        found = get_all(self._db, self.table, keys, consistent=False)
        return max(0, sum(int(i["n"]["N"]) for i in found if "n" in i))

    def apply_records(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Count a batch of messages-table stream records in: one conditional UpdateItem
        per shard that gained or lost messages. Returns the writes made. A store fault
        raises, so the batch is handed over again (and counted once)."""
        per_shard: dict[tuple[str, str], list[Change]] = {}
        for change in changes_of(records):
            per_shard.setdefault((change.table, change.pk), []).append(change)
        writes = 0
        for (table, pk), changes in per_shard.items():
            writes += self._apply(table, pk, changes)
        return writes

    def _apply(self, table: str, pk: str, changes: list[Change]) -> int:
        """Add the changes after the stored `seq`; the writes it took."""
        for attempt in range(_ROUNDS):
            delta = sum(c.delta for c in changes)
            try:
                with translate_errors():
                    self._db.update_item(
                        TableName=self.table, Key=self.key(table, pk),
                        UpdateExpression="ADD n :d SET seq = :last",
                        ConditionExpression=_CONDITION,
                        ExpressionAttributeValues={":d": {"N": str(delta)},
                                                   ":first": {"S": changes[0].seq},
                                                   ":last": {"S": changes[-1].seq}},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
                return attempt + 1
            except ConditionFailedError as exc:
                stored = str((exc.item or {}).get("seq", {}).get("S", ""))
                changes = [c for c in changes if c.seq > stored]
                if not changes:
                    return attempt + 1  # all of it was counted before
        raise ConditionFailedError(f"the count of {pk} in {table} kept moving")
