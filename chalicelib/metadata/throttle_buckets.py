"""The shared token buckets of throttling, one item each in the control table.

An item `throttle#<bucket>` holds one number, `tat` (microseconds; see
`domain.throttling`). Taking a lease of tokens is one conditional UpdateItem; only a
guess about the bucket that turned out wrong (another process drew it down, or it
had refilled) costs a second one, with the item DynamoDB returned on the failed
condition. Giving unspent tokens back is one conditional UpdateItem too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.domain import throttling
from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.domain.throttling import Limit
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A take tries its guess, then what the failed condition showed; past that (the bucket
# moved under it each time) the request is refused rather than the store asked again.
_TAKE_ATTEMPTS = 3


@dataclass(frozen=True)
class Grant:
    """What a take got: `count` tokens (0: none were left), and the bucket's `tat` as
    last seen (None if it was never written)."""

    count: int
    tat_us: int | None


class BucketStore:
    """Takes tokens from, and gives tokens back to, buckets kept in the control table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    @staticmethod
    def key(bucket: str) -> dict[str, Any]:
        """The control-table key of a bucket."""
        return {"key": {"S": f"throttle#{bucket}"}}

    def take(self, bucket: str, limit: Limit, now_us: int, wanted: int,
             guess_us: int | None) -> Grant:
        """Take up to `wanted` tokens at `now`, guessing the bucket's `tat` to be
        `guess_us`: as many as the bucket holds, or none (StoreError on a fault)."""
        tat = guess_us
        for _ in range(_TAKE_ATTEMPTS):
            count = min(wanted, throttling.available(limit, tat, now_us))
            if count < 1:
                return Grant(0, tat)
            try:
                return Grant(count, self._take(bucket, limit, now_us, count, tat))
            except ConditionFailedError as exc:
                tat = self._tat_of(exc.item, bucket)
        return Grant(0, tat)

    def _take(self, bucket: str, limit: Limit, now_us: int, count: int,
              tat: int | None) -> int:
        """One conditional UpdateItem taking `count` tokens; the new `tat`."""
        step = count * limit.interval_us
        if throttling.is_full(tat, now_us):
            request = {
                "UpdateExpression": "SET tat = :tat",
                "ConditionExpression": "attribute_not_exists(tat) OR tat <= :now",
                "ExpressionAttributeValues": {":tat": _n(now_us + step), ":now": _n(now_us)},
            }
        else:
            request = {
                "UpdateExpression": "SET tat = tat + :step",
                "ConditionExpression": "tat > :now AND tat <= :highest",
                "ExpressionAttributeValues": {
                    ":step": _n(step), ":now": _n(now_us),
                    ":highest": _n(throttling.highest_tat_for(limit, now_us, count))},
            }
        with translate_errors():
            result = self._db.update_item(
                TableName=self._table, Key=self.key(bucket), ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD", **request)  # type: ignore[arg-type]
        return int(result["Attributes"]["tat"]["N"])

    def give_back(self, bucket: str, limit: Limit, now_us: int, count: int) -> bool:
        """Give `count` unspent tokens back, unless that would overfill the bucket (it
        has refilled meanwhile): True when they went back."""
        if count < 1:
            return False
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self._table, Key=self.key(bucket),
                    UpdateExpression="SET tat = tat - :step",
                    ConditionExpression="tat >= :lowest",
                    ExpressionAttributeValues={
                        ":step": _n(count * limit.interval_us),
                        ":lowest": _n(throttling.lowest_tat_for_return(limit, now_us, count))})
        except ConditionFailedError:
            return False
        return True

    def tat(self, bucket: str) -> int | None:
        """The bucket's `tat`, read consistently (None if never written)."""
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key=self.key(bucket),
                                     ConsistentRead=True).get("Item")
        return _tat(item)

    def _tat_of(self, item: dict[str, Any] | None, bucket: str) -> int | None:
        """The `tat` a failed condition showed, or read (a store that returns no item
        on a failed condition)."""
        found = _tat(item)
        return found if found is not None else self.tat(bucket)


def _tat(item: dict[str, Any] | None) -> int | None:
    if not item or "tat" not in item:
        return None
    return int(item["tat"]["N"])


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}
