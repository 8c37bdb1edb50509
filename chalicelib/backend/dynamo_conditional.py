"""The message store's conditional writes on DynamoDB: deletes on the claim token, expiry
deletes, and visibility changes, one transaction per pass (a plain call for one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.items import Item
from chalicelib.backend.store import VisibilityChange
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.domain.messages import MessageRef, VisibilityOutcome
from chalicelib.dynamo_batches import transact_write
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_BATCH_RETRIES = 5
# A transaction holds at most 100 items: expiry deletes go in chunks of that.
_EXPIRY_CHUNK = 100


class ConditionalWrites:
    """Deletes and visibility changes of one messages table, each on its condition."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self.table = table

    def delete_expired(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> None:
        """Transactions of conditional deletes of expired messages (best effort: the
        sweeper retries); a message already gone fails its condition and is left out."""
        ops = [{"Delete": {"TableName": self.table, "Key": items.key(queue_id, shard, m),
                           "ConditionExpression": "attribute_exists(sk)"}}
               for m in dict.fromkeys(message_ids)]
        for start in range(0, len(ops), _EXPIRY_CHUNK):
            self._conditional(ops[start:start + _EXPIRY_CHUNK])

    def delete_claimed(self, refs: Sequence[MessageRef], any_claim: bool = False) -> None:
        """Conditional deletes on the claim token: one DeleteItem, or one transaction per
        pass for several.

        Two handles of one message (a stale one and the latest) go in separate passes:
        a transaction may touch an item only once, and the latest one must still delete.
        """
        unique = list(dict.fromkeys(refs))
        for group in _distinct_passes(unique):
            self._conditional([_delete_op(self.table, unique[i], any_claim) for i in group])

    def change_visibility(
        self, changes: Sequence[VisibilityChange], now_ms: int
    ) -> list[VisibilityOutcome]:
        """Conditional updates (claim held, still in flight), one transaction per pass.

        Entries naming the same message are applied in order, in separate passes.
        """
        outcomes = [VisibilityOutcome.CHANGED] * len(changes)
        for group in _distinct_passes([c.ref for c in changes]):
            ops = [_visibility_op(self.table, changes[i], now_ms) for i in group]
            for position, old in self._conditional(ops).items():
                index = group[position]
                outcomes[index] = _visibility_outcome(old, changes[index])
        return outcomes

    def _conditional(self, ops: list[dict[str, Any]]) -> dict[int, Item | None]:
        """Run conditional writes; return {op index: old item or None} for failed conditions.

        A single write is a plain call. Otherwise the writes go in one transaction; when
        some conditions fail, the transaction is cancelled and the others run again.
        """
        failed: dict[int, Item | None] = {}
        pending = list(range(len(ops)))
        for _ in range(_BATCH_RETRIES):
            if not pending:
                break
            pending = self._conditional_round(ops, pending, failed)
        if pending:
            raise StoreUnavailableError("conditional writes kept conflicting")
        return failed

    def _conditional_round(
        self, ops: list[dict[str, Any]], pending: list[int], failed: dict[int, Item | None],
    ) -> list[int]:
        if len(pending) == 1:
            return self._conditional_single(ops, pending[0], failed)
        chosen = [ops[i] for i in pending]
        try:
            transact_write(self._db, chosen)
        except TransactionCancelledError as exc:
            retry = []
            for index, reason in zip(pending, exc.reasons, strict=False):
                if reason.get("Code") == "ConditionalCheckFailed":
                    failed[index] = reason.get("Item")
                else:
                    retry.append(index)
            return retry
        return []

    def _conditional_single(
        self, ops: list[dict[str, Any]], index: int, failed: dict[int, Item | None]
    ) -> list[int]:
        (kind, op), = ops[index].items()
        call = self._db.delete_item if kind == "Delete" else self._db.update_item
        try:
            with translate_errors():
                call(**op)
        except ConditionFailedError as exc:
            failed[index] = exc.item
        return []


def _distinct_passes(refs: Sequence[MessageRef]) -> list[list[int]]:
    """Group indexes of `refs` into passes in which no message appears twice, in order."""
    passes: list[list[int]] = []
    used: list[set[tuple[str, int, str]]] = []
    for index, ref in enumerate(refs):
        item = (ref.queue_id, ref.shard, ref.message_id)
        free = next((n for n, seen in enumerate(used) if item not in seen), len(passes))
        if free == len(passes):
            passes.append([])
            used.append(set())
        passes[free].append(index)
        used[free].add(item)
    return passes


def _delete_op(table: str, ref: MessageRef, any_claim: bool = False) -> dict[str, Any]:
    key = items.key(ref.queue_id, ref.shard, ref.message_id)
    if any_claim:  # the message, if it is still there (the count moves only then)
        return {"Delete": {"TableName": table, "Key": key,
                           "ConditionExpression": "attribute_exists(sk)"}}
    return {"Delete": {"TableName": table, "Key": key,
                       "ConditionExpression": "claim = :tok",
                       "ExpressionAttributeValues": {":tok": {"S": ref.claim_token}}}}


def _visibility_op(table: str, change: VisibilityChange, now_ms: int) -> dict[str, Any]:
    ref = change.ref
    values = {":vis": {"N": str(change.visible_at)}, ":tok": {"S": ref.claim_token}}
    # The latest claim's handle acts even once its timeout has passed, until another
    # receive claims the message (SQS's observed behaviour); an older one only while the
    # message is in flight, and only with `any_claim`.
    latest = "claim = :tok" if ref.claim_token else "visible_at > :now AND claim = :tok"
    if change.any_claim:
        condition = f"attribute_exists(sk) AND (visible_at > :now OR {latest})"
    else:
        condition = latest
    if ":now" in condition:
        values[":now"] = {"N": str(now_ms)}
    return {"Update": {"TableName": table,
                       "Key": items.key(ref.queue_id, ref.shard, ref.message_id),
                       "UpdateExpression": "SET visible_at = :vis",
                       "ConditionExpression": condition,
                       "ExpressionAttributeValues": values,
                       "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def _visibility_outcome(old: Item | None, change: VisibilityChange) -> VisibilityOutcome:
    if not old:
        return VisibilityOutcome.NOT_FOUND
    if not change.any_claim and old.get("claim", {}).get("S") != change.ref.claim_token:
        return VisibilityOutcome.NOT_FOUND
    return VisibilityOutcome.NOT_IN_FLIGHT
