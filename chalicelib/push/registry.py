"""Push subscriptions and their concurrency slots in the control table.

Four kinds of item, none read by a scan:
- `pushsub#<id>`: one subscription (its queue, target and batching settings);
- `pushsubs#<queue id>`: the string set `ids` of a queue's subscriptions;
- `pushsubs#all`: the string set `ids` of every subscription, which the back end runs;
- `pushslot#<id>#<n>`: concurrency slot n of a subscription, held by one delivery worker
  until `until` (epoch ms). A subscription has MaximumConcurrency slots, so no more
  workers than that deliver its batches at once, across every process.

Creating and deleting a subscription are one transaction over the first three.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import ConditionFailedError, TransactionCancelledError
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import lost_race, translate_errors
from chalicelib.push.subscription import Subscription

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ALL_KEY = "pushsubs#all"


def _sub_key(sub_id: str) -> dict[str, Any]:
    return {"key": {"S": f"pushsub#{sub_id}"}}


def _queue_key(queue_id: str) -> dict[str, Any]:
    return {"key": {"S": f"pushsubs#{queue_id}"}}


def _slot_key(sub_id: str, slot: int) -> dict[str, Any]:
    return {"key": {"S": f"pushslot#{sub_id}#{slot}"}}


def _to_item(sub: Subscription) -> dict[str, Any]:
    item: dict[str, Any] = {
        **_sub_key(sub.sub_id),
        "sub_id": {"S": sub.sub_id}, "queue_id": {"S": sub.queue_id},
        "queue_arn": {"S": sub.queue_arn}, "batch_size": {"N": str(sub.batch_size)},
        "window_s": {"N": str(sub.window_s)}, "report": {"BOOL": sub.report_failures},
        "enabled": {"BOOL": sub.enabled}, "modified_ms": {"N": str(sub.modified_ms)},
    }
    if sub.endpoint is not None:
        item["endpoint"] = {"S": sub.endpoint}
    if sub.function_name is not None:
        item["function"] = {"S": sub.function_name}
    if sub.max_concurrency is not None:
        item["concurrency"] = {"N": str(sub.max_concurrency)}
    return item


def _from_item(item: dict[str, Any]) -> Subscription:
    def text(name: str) -> str | None:
        return str(item[name]["S"]) if name in item else None

    return Subscription(
        sub_id=str(item["sub_id"]["S"]), queue_id=str(item["queue_id"]["S"]),
        queue_arn=str(item["queue_arn"]["S"]), endpoint=text("endpoint"),
        function_name=text("function"), batch_size=int(item["batch_size"]["N"]),
        window_s=int(item["window_s"]["N"]), report_failures=bool(item["report"]["BOOL"]),
        max_concurrency=int(item["concurrency"]["N"]) if "concurrency" in item else None,
        enabled=bool(item["enabled"]["BOOL"]), modified_ms=int(item["modified_ms"]["N"]),
    )


class SubscriptionRepository:
    """Reads and writes one region's push subscriptions and their slots."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    # -- subscriptions -------------------------------------------------------------------
    def get(self, sub_id: str) -> Subscription | None:
        """One subscription, read consistently, or None."""
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key=_sub_key(sub_id),
                                     ConsistentRead=True).get("Item")
        return _from_item(dict(item)) if item else None

    def ids_of(self, queue_id: str) -> list[str]:
        """The ids of a queue's subscriptions (one GetItem)."""
        return self._ids(_queue_key(queue_id))

    def for_queue(self, queue_id: str) -> list[Subscription]:
        """A queue's subscriptions."""
        return self._many(self.ids_of(queue_id))

    def every(self) -> list[Subscription]:
        """Every subscription of the region (one GetItem, then batch reads)."""
        return self._many(self._ids({"key": {"S": ALL_KEY}}))

    def create(self, sub: Subscription, most_per_queue: int) -> bool:
        """Record a subscription; False when its queue already has `most_per_queue`."""
        ops: list[dict[str, Any]] = [
            {"Put": {"TableName": self._table, "Item": _to_item(sub),
                     "ConditionExpression": "attribute_not_exists(#k)",
                     "ExpressionAttributeNames": {"#k": "key"}}},
            {"Update": {"TableName": self._table, "Key": _queue_key(sub.queue_id),
                        "UpdateExpression": "ADD ids :id",
                        "ConditionExpression": "attribute_not_exists(ids) OR size(ids) < :most",
                        "ExpressionAttributeValues": {":id": {"SS": [sub.sub_id]},
                                                      ":most": {"N": str(most_per_queue)}}}},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": ALL_KEY}},
                        "UpdateExpression": "ADD ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [sub.sub_id]}}}},
        ]
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError as exc:
            if lost_race(exc):
                return False
            raise
        return True

    def delete(self, sub: Subscription) -> None:
        """Remove a subscription from its item and both sets, in one transaction."""
        ops: list[dict[str, Any]] = [
            {"Delete": {"TableName": self._table, "Key": _sub_key(sub.sub_id)}},
            {"Update": {"TableName": self._table, "Key": _queue_key(sub.queue_id),
                        "UpdateExpression": "DELETE ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [sub.sub_id]}}}},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": ALL_KEY}},
                        "UpdateExpression": "DELETE ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [sub.sub_id]}}}},
        ]
        transact_write(self._db, ops)

    def _ids(self, key: dict[str, Any]) -> list[str]:
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key=key,
                                     ConsistentRead=True).get("Item") or {}
        return sorted(str(v) for v in item.get("ids", {}).get("SS", []))

    def _many(self, ids: Sequence[str]) -> list[Subscription]:
        subs = (_from_item(item) for item in
                get_all(self._db, self._table, [_sub_key(i) for i in ids]))
        found = {sub.sub_id: sub for sub in subs}
        return [found[i] for i in ids if i in found]

    # -- concurrency slots ---------------------------------------------------------------
    def hold_slot(self, sub_id: str, slot: int, owner: str, now_ms: int, until_ms: int) -> bool:
        """Take or extend slot `slot` until `until_ms`: True when it is free, expired or
        already this owner's; False when another worker holds it."""
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self._table, Key=_slot_key(sub_id, slot),
                    UpdateExpression="SET #o = :owner, #u = :until",
                    ConditionExpression="attribute_not_exists(#o) OR #o = :owner OR #u < :now",
                    ExpressionAttributeNames={"#o": "owner", "#u": "until"},
                    ExpressionAttributeValues={":owner": {"S": owner},
                                               ":until": {"N": str(until_ms)},
                                               ":now": {"N": str(now_ms)}},
                )
        except ConditionFailedError:
            return False
        return True

    def release_slot(self, sub_id: str, slot: int, owner: str) -> None:
        """Give a slot back, if this owner still holds it."""
        try:
            with translate_errors():
                self._db.delete_item(
                    TableName=self._table, Key=_slot_key(sub_id, slot),
                    ConditionExpression="#o = :owner",
                    ExpressionAttributeNames={"#o": "owner"},
                    ExpressionAttributeValues={":owner": {"S": owner}},
                )
        except ConditionFailedError:
            return
