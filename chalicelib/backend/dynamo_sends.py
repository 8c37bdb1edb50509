"""Writes of new messages that happen once: a message is put only where no item holds its
key (`attribute_not_exists(sk)`). Request deduplication (docs/request-dedup.md) derives
the ids and places of a send's messages from the request, so that the puts of a retry
meet the messages its first attempt stored, and leave them as they are.

- One message is one conditional PutItem. More are one TransactWriteItems of conditional
  Puts per ten (ten items of up to 400 KB stay within a transaction's 4 MB). A cancelled
  transaction gives one reason per Put: `ConditionalCheckFailed` means that message is
  stored already; the other Puts go again, in a new transaction, for at most `ROUNDS`
  rounds. Puts still cancelled then fail the call (StoreUnavailableError, a 503 that SDKs
  retry under the same invocation id): nothing of them was written. Any other fault
  raises at once, its outcome unknown, and the retry of the call settles it.
- A Put that fails its condition returns the item that stands (ALL_OLD). When that item
  is the very one this call wrote (the store client sent a put again after losing the
  answer to one that had landed), the message counts as written by this call. (An
  identical item from an earlier attempt, sent in the same millisecond without
  encryption, counts so too: that only repeats its replication and wakeup.)
- Large bodies and attributes go to S3 through the store's offload before the write,
  under object names of this call's own: a retry must never replace the objects of the
  message a first attempt stored (every attempt seals with a nonce of its own, and maybe
  with another data key). When a message turns out to be stored already, this call's
  objects for it are deleted again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.store import NewPuts
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreError,
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.domain.messages import Message
from chalicelib.domain.unique_ids import random_bytes
from chalicelib.dynamo_batches import transact_write
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ROUNDS = 5
TRANSACTION_PUTS = 10
_ABSENT = "attribute_not_exists(sk)"
_OBJECT_FIELDS = ("body_key", "attrs_key")
Item = dict[str, Any]
Offload = Callable[[str, Message], Message]


def _message_id(item: Item) -> str:
    return str(item["sk"]["S"])


@dataclass
class _Tally:
    """What the puts did so far, by message id, and this call's S3 objects that no item
    names (their message was stored already)."""

    written: set[str] = field(default_factory=set)
    existing: set[str] = field(default_factory=set)
    orphans: list[str] = field(default_factory=list)

    def standing(self, item: Item, old: Item | None) -> None:
        """The put of `item` met `old` (None: the store did not say what stands)."""
        if old == item:
            self.written.add(_message_id(item))  # this call's own put, sent twice
            return
        self.existing.add(_message_id(item))
        if old is not None:  # without the standing item, the objects may be its own
            self.orphans += [str(item[f]["S"]) for f in _OBJECT_FIELDS if f in item]


class DynamoSends:
    """Conditional puts of new messages into one messages table."""

    def __init__(self, client: DynamoDBClient, table: str, offload: Offload,
                 bodies: BodyStore) -> None:
        self._db = client
        self._table = table
        self._offload = offload
        self._bodies = bodies

    def put(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> NewPuts:
        """Put each message (with its shard) unless its key is taken; see the module."""
        pending = self._items(queue_id, placed)
        tally = _Tally()
        try:
            for start in range(0, len(pending), TRANSACTION_PUTS):
                self._write(pending[start:start + TRANSACTION_PUTS], tally)
        finally:
            self._drop(tally.orphans)
        return NewPuts(frozenset(tally.written), frozenset(tally.existing))

    def _items(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> list[Item]:
        """The items to put, large bodies and attributes offloaded under this call's names."""
        suffix = random_bytes(6).hex()
        result = []
        for shard, message in placed:
            named = message.with_changes(message_id=f"{message.message_id}.{suffix}")
            stored = self._offload(queue_id, named).with_changes(message_id=message.message_id)
            result.append(items.to_item(queue_id, shard, stored))
        return result

    def _write(self, chunk: list[Item], tally: _Tally) -> None:
        """Rounds of one request each until every put is done, at most ROUNDS."""
        pending = chunk
        for _ in range(ROUNDS):
            if not pending:
                return
            pending = self._round(pending, tally)
        if pending:
            raise StoreUnavailableError(f"{len(pending)} conditional puts kept being cancelled")

    def _round(self, pending: list[Item], tally: _Tally) -> list[Item]:
        """One request for the pending puts; the puts to send again."""
        if len(pending) == 1:
            self._put_one(pending[0], tally)
            return []
        try:
            transact_write(self._db, [self._op(item) for item in pending])
        except TransactionCancelledError as exc:
            retry = []
            for index, item in enumerate(pending):
                reason = exc.reasons[index] if index < len(exc.reasons) else {}
                if reason.get("Code") == "ConditionalCheckFailed":
                    tally.standing(item, reason.get("Item"))
                else:  # cancelled for another Put's sake, a conflict or a throttle
                    retry.append(item)
            return retry
        tally.written.update(_message_id(item) for item in pending)
        return []

    def _put_one(self, item: Item, tally: _Tally) -> None:
        """One conditional PutItem. A fault other than the condition raises: the outcome
        is unknown, and the SDK's retry of the whole call (same ids) settles it."""
        try:
            with translate_errors():
                self._db.put_item(TableName=self._table, Item=item, ConditionExpression=_ABSENT,
                                  ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ConditionFailedError as exc:
            tally.standing(item, exc.item)
            return
        tally.written.add(_message_id(item))

    def _op(self, item: Item) -> Item:
        return {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": _ABSENT,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}

    def _drop(self, keys: list[str]) -> None:
        """Delete objects no item names (best effort: one left behind is only storage)."""
        if keys:
            with suppress(StoreError, OSError), translate_errors():
                self._bodies.delete_many(keys)
