"""Bringing a rejoining region's copy of a queue back in line with the new home.

The old home's items of each shard are replaced by the new home's. Messages the old home
holds that the new home never received (sends acknowledged before the failure that async
replication had not shipped yet) are first written to the new home, so they are not lost.

Every step writes before it removes, and removes only what the home does not hold: the
home's copies overwrite the old home's items in place (a removal would release the S3 body
the copy points to), and only then are the items left over (tombstones of messages the home
no longer has) deleted. A batch write hands unprocessed items back; they are retried with
growing pauses, and what still does not go through fails the resync, which stays pending,
instead of being dropped. Each step can run again, so the next attempt finishes the job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.dynamo_batches import Retry, write_all
from chalicelib.dynamo_errors import translate_errors
from chalicelib.regions.replica import SEQ, TOMB, padded

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

WRITE_ATTEMPTS = 8
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 2.0


def _pause(seconds: float) -> None:
    time.sleep(seconds)


@dataclass
class ResyncResult:
    """What one shard's resync did."""

    copied: int = 0
    recovered: int = 0
    removed: int = 0


def _items(client: DynamoDBClient, table: str, pk: str) -> Iterator[dict[str, Any]]:
    start: dict[str, Any] | None = None
    while True:
        args: dict[str, Any] = {"TableName": table, "KeyConditionExpression": "pk = :pk",
                                "ExpressionAttributeValues": {":pk": {"S": pk}}}
        if start:
            args["ExclusiveStartKey"] = start
        with translate_errors():
            page = client.query(**args)
        yield from page.get("Items", [])
        start = page.get("LastEvaluatedKey")
        if not start:
            return


def _write(client: DynamoDBClient, table: str, requests: list[dict[str, Any]]) -> None:
    """Write every request, retrying unprocessed ones with growing (jittered) pauses;
    StoreThrottledError when some never go through (nothing is silently dropped)."""
    write_all(client, table, requests, Retry(WRITE_ATTEMPTS, FIRST_PAUSE_S, MAX_PAUSE_S,
                                             sleep=lambda seconds: _pause(seconds)))


def resync_partition(
    home: DynamoDBClient, rejoining: DynamoDBClient, table: str, pk: str,
) -> ResyncResult:
    """Make the rejoining region's partition a copy of the home's; recover orphans first.

    Each region's stream counts what these writes change (`chalicelib.backend.counters`).
    """
    result = ResyncResult()
    at_home = {str(i["sk"]["S"]): i for i in _items(home, table, pk)}
    local = list(_items(rejoining, table, pk))
    orphans = [i for i in local if TOMB not in i and str(i["sk"]["S"]) not in at_home]
    _write(home, table, [{"PutRequest": {"Item": {k: v for k, v in i.items() if k != SEQ}}}
                         for i in orphans])
    result.recovered = len(orphans)
    for item in orphans:
        at_home[str(item["sk"]["S"])] = item
    base = padded("0")
    copies = [{"PutRequest": {"Item": {**i, SEQ: {"S": base}}}} for i in at_home.values()]
    _write(rejoining, table, copies)
    result.copied = len(copies)
    leftovers = [i for i in local if str(i["sk"]["S"]) not in at_home]
    _write(rejoining, table, [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}}
                              for i in leftovers])
    result.removed = len(leftovers)
    return result
