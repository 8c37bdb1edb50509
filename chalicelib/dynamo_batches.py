"""The store access layer: every BatchGetItem, BatchWriteItem and TransactWriteItems DMQ
makes goes through here, on a client made by `chalicelib.aws.Clients`.

DynamoDB may leave part of a batch unprocessed (UnprocessedItems, UnprocessedKeys) when a
partition is hot: that part is sent again, alone, after a pause that doubles from
`Retry.first_pause_s` up to `Retry.max_pause_s`, with jitter (each pause drawn between half
and all of its ceiling), for at most `Retry.attempts` requests per chunk. Writes go in
chunks of 25 requests and reads in chunks of 100 keys, DynamoDB's limits.

What stays unprocessed after the last attempt is handled one of two ways, chosen by the
function each caller calls:

- `write_all` and `get_all` raise StoreThrottledError: nothing is silently dropped (a
  read that returned part of the items would look like items that are gone);
- `write_some` and `get_some` return what stayed unprocessed, for the callers that handle
  a partial result themselves (a batch send reports the entries it could not store).

Faults are mapped by `chalicelib.dynamo_errors.translate_errors`: a failed condition is a
ConditionFailedError, a cancelled transaction a TransactionCancelledError with its
reasons, a throttle a StoreThrottledError.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import StoreThrottledError
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_WRITE_MAX = 25  # requests in one BatchWriteItem
BATCH_GET_MAX = 100  # keys in one BatchGetItem

Item = dict[str, Any]


@dataclass(frozen=True)
class Retry:
    """How unprocessed parts are sent again: at most `attempts` requests per chunk, the
    first included, with jittered pauses that double from `first_pause_s` up to
    `max_pause_s` in between."""

    attempts: int = 5
    first_pause_s: float = 0.01
    max_pause_s: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[float, float], float] = random.uniform

    def pause(self, retry: int) -> None:
        """Wait before retry number `retry` (1 for the first retry)."""
        ceiling = min(self.max_pause_s, self.first_pause_s * 2 ** (retry - 1))
        self.sleep(self.jitter(ceiling / 2, ceiling))


RETRY = Retry()


def _chunks(values: Sequence[Item], size: int) -> Iterator[list[Item]]:
    for start in range(0, len(values), size):
        yield [dict(v) for v in values[start:start + size]]


def write_some(client: DynamoDBClient, table: str, requests: Sequence[Item],
               retry: Retry = RETRY) -> list[Item]:
    """BatchWriteItem `requests` (PutRequest / DeleteRequest) in chunks of 25; return the
    requests still unprocessed after the last attempt (empty when all were written)."""
    left: list[Item] = []
    for chunk in _chunks(requests, BATCH_WRITE_MAX):
        for attempt in range(retry.attempts):
            if attempt:
                retry.pause(attempt)
            with translate_errors():
                result = client.batch_write_item(
                    RequestItems={table: chunk})  # type: ignore[dict-item]
            chunk = [dict(r) for r in result.get("UnprocessedItems", {}).get(table, [])]
            if not chunk:
                break
        left.extend(chunk)
    return left


def write_all(client: DynamoDBClient, table: str, requests: Sequence[Item],
              retry: Retry = RETRY) -> None:
    """BatchWriteItem every request; StoreThrottledError when some stay unprocessed."""
    left = write_some(client, table, requests, retry)
    if left:
        raise StoreThrottledError(f"{len(left)} of {len(requests)} writes to {table} stayed "
                                  f"unprocessed after {retry.attempts} attempts")


def get_some(client: DynamoDBClient, table: str, keys: Sequence[Item], *,
             consistent: bool = True, projection: str | None = None,
             names: dict[str, str] | None = None,
             retry: Retry = RETRY) -> tuple[list[Item], list[Item]]:
    """BatchGetItem `keys` in chunks of 100: the items found (in no particular order; a
    key with no item gives none) and the keys still unprocessed after the last attempt."""
    found: list[Item] = []
    left: list[Item] = []
    for chunk in _chunks(keys, BATCH_GET_MAX):
        for attempt in range(retry.attempts):
            if attempt:
                retry.pause(attempt)
            request: dict[str, Any] = {"Keys": chunk, "ConsistentRead": consistent}
            if projection is not None:
                request["ProjectionExpression"] = projection
            if names:
                request["ExpressionAttributeNames"] = names
            with translate_errors():
                result = client.batch_get_item(
                    RequestItems={table: request})  # type: ignore[dict-item]
            found.extend(dict(i) for i in result.get("Responses", {}).get(table, []))
            unprocessed = result.get("UnprocessedKeys", {}).get(table)
            chunk = [dict(k) for k in unprocessed.get("Keys", [])] if unprocessed else []
            if not chunk:
                break
        left.extend(chunk)
    return found, left


def get_all(client: DynamoDBClient, table: str, keys: Sequence[Item], *,
            consistent: bool = True, projection: str | None = None,
            names: dict[str, str] | None = None, retry: Retry = RETRY) -> list[Item]:
    """BatchGetItem every key: the items found; StoreThrottledError when some keys stay
    unprocessed (their items are neither known to be there nor known to be gone)."""
    found, left = get_some(client, table, keys, consistent=consistent, projection=projection,
                           names=names, retry=retry)
    if left:
        raise StoreThrottledError(f"{len(left)} of {len(keys)} reads from {table} stayed "
                                  f"unprocessed after {retry.attempts} attempts")
    return found


def transact_write(client: DynamoDBClient, ops: Sequence[Item]) -> None:
    """One TransactWriteItems; a cancellation is a TransactionCancelledError with the
    reasons in the order of `ops` (see `dynamo_errors.lost_race`)."""
    with translate_errors():
        client.transact_write_items(TransactItems=list(ops))  # type: ignore[arg-type]
