"""Cross-region replication: DynamoDB stream records applied to a replica region's table.

Every replicated item carries `_rseq`, the stream sequence number of the change that
wrote it, and each write is conditional on the replica holding nothing newer, so
replays and out-of-order records never roll an item back. A removal writes a
tombstone (the keys, `_rseq`, `_tomb` and the `expires_at` TTL) instead of deleting,
so that an older insert replayed later cannot bring the item back. A tombstone has no
`visible_at` and so stays out of the sparse `visible-index`. An item a synchronous
send wrote has no `_rseq`; the first stream record for it applies over it.

`_rseq` representation: stream sequence numbers are decimal strings of up to 40 digits
and a DynamoDB Number holds 38 significant digits, so `_rseq` is always a String, the
sequence number left-padded with zeros to 48 characters: string order is then numeric
order. One representation for every item, because a condition comparing a String
with a Number is false, which would stall an item for good.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SEQ = "_rseq"
TOMB = "_tomb"
TTL_ATTRIBUTE = "expires_at"
TOMBSTONE_TTL_S = 86_400
SEQ_WIDTH = 48
MAX_SEQ_DIGITS = 128  # as long as a Kinesis sequence number can be
# Names that start with `_` must be placeholders in an expression (DynamoDB refuses
# them as tokens; moto did not).
_CONDITION = "attribute_not_exists(#k) OR attribute_not_exists(#seq) OR #seq < :seq"
_WRITES = frozenset({"INSERT", "MODIFY"})


def padded(sequence_number: str) -> str:
    """A stream sequence number as the `_rseq` string, whose order is numeric: zero-padded
    to SEQ_WIDTH digits (DynamoDB Streams' have at most 40), or, longer (LocalStack's have
    56, as Kinesis's), `~`, its length in three digits, its digits: after every padded one
    (`~` sorts after the digits), and by length, then digits, among themselves."""
    digits = sequence_number.lstrip("0") or "0"
    if not sequence_number.isdigit() or len(digits) > MAX_SEQ_DIGITS:
        raise ValueError(f"not a stream sequence number: {sequence_number!r}")
    if len(digits) <= SEQ_WIDTH:
        return digits.rjust(SEQ_WIDTH, "0")
    return f"~{len(digits):03d}{digits}"


def is_tombstone(item: Mapping[str, Any]) -> bool:
    """True for the marker a replicated removal leaves in place of the item."""
    return TOMB in item


def live_item(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The item as its home table holds it: no replication bookkeeping; None if removed."""
    if is_tombstone(item):
        return None
    return {k: v for k, v in item.items() if k != SEQ}


@dataclass
class ApplyResult:
    """One batch's outcome.

    `applied`: records written. `skipped`: records not written because the replica, or a
    newer record for the same item in the batch, already had something newer; so
    applied + skipped is the batch size. `lags_ms`: per applied record, apply time minus
    the record's ApproximateCreationDateTime (never below 0).
    """

    applied: int = 0
    skipped: int = 0
    lags_ms: list[int] = field(default_factory=list)


def newest_per_key(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The record with the highest sequence number for each item key, in first-seen order."""
    newest: dict[str, Mapping[str, Any]] = {}
    for record in records:
        data = record["dynamodb"]
        key = repr(sorted(data["Keys"].items()))
        seen = newest.get(key)
        if seen is None or int(seen["dynamodb"]["SequenceNumber"]) < int(data["SequenceNumber"]):
            newest[key] = record
    return list(newest.values())


class ReplicaApplier:
    """Writes DynamoDB stream records (Lambda event format) into the same-named table
    of the region `client` talks to: one conditional PutItem per item key in a batch.
    The replica's own stream keeps its counts (`chalicelib.backend.counters`).
    """

    def __init__(self, client: DynamoDBClient, now_ms: Callable[[], int]) -> None:
        self._db = client
        self._now_ms = now_ms

    def apply(self, table: str, records: Sequence[Mapping[str, Any]]) -> ApplyResult:
        """Apply one batch of `table`'s stream records.

        A write the replica refuses as older than what it holds counts as skipped. Any
        other DynamoDB fault raises a StoreError (StoreThrottledError, StoreUnavailableError
        as `translate_errors` maps them), so that Lambda retries the batch; the retry is safe.
        """
        survivors = newest_per_key(records)
        result = ApplyResult(skipped=len(records) - len(survivors))
        for record in survivors:
            if not self._put(table, record):
                result.skipped += 1
                continue
            result.applied += 1
            created = record["dynamodb"].get("ApproximateCreationDateTime")
            if created is not None:
                result.lags_ms.append(max(0, self._now_ms() - round(float(created) * 1000)))
        return result

    def _put(self, table: str, record: Mapping[str, Any]) -> bool:
        """One conditional PutItem; False if the replica already holds a newer change."""
        data = record["dynamodb"]
        keys = dict(data["Keys"])
        seq = padded(str(data["SequenceNumber"]))
        event = record["eventName"]
        if event == "REMOVE":
            expires = self._now_ms() // 1000 + TOMBSTONE_TTL_S
            item = {**keys, TOMB: {"N": "1"}, TTL_ATTRIBUTE: {"N": str(expires)}}
        elif event in _WRITES and "NewImage" in data:
            item = {**data["NewImage"], **keys}
        else:
            raise ValueError(f"cannot replicate a {event} record without a new image")
        item[SEQ] = {"S": seq}
        try:
            with translate_errors():
                self._db.put_item(
                    TableName=table, Item=item, ConditionExpression=_CONDITION,
                    # Any key attribute will do: an item that exists has all of them.
                    ExpressionAttributeNames={"#k": next(iter(keys)), "#seq": SEQ},
                    ExpressionAttributeValues={":seq": {"S": seq}},
                )
        except ConditionFailedError:
            return False
        return True
