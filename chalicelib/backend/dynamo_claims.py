"""Several claims in one TransactWriteItems.

A claim per candidate (a conditional UpdateItem) made receive cost one request per
message. Here every candidate of a receive gets its own conditional Update in one
transaction. When some conditions fail (another receiver won those), DynamoDB
cancels the whole transaction; the cancellation reasons say which, and the rest go
again in a further transaction.

A transaction returns no items. The visibility index projects a compact message whole
(`backend.items`), so the query that found the candidates read those already: a won
claim is that message with the claim's changes applied (its condition, `visible_at` as
the query saw it, proves that nothing changed it in between). A wide item, and every
item of a table made by an earlier version (its index projects only `expires_ms` and
`rc`), is read back with one consistent BatchGetItem. A visibility timeout of 0 lets
another receiver re-claim an item between the two requests: an item read back under
another claim token is treated as lost, so a message is never handed out under a claim
that is not the caller's. botocore fills in the transaction's ClientRequestToken, which
makes its own retries of a transaction that landed (a lost answer) idempotent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.items import Item
from chalicelib.domain.exceptions import StoreUnavailableError, TransactionCancelledError
from chalicelib.domain.messages import Candidate, Message
from chalicelib.dynamo_batches import get_some, transact_write

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ROUNDS = 5
# Cancellation reasons that say nothing against this claim: the item can go again at once.
_INNOCENT = frozenset({"None", ""})
logger = logging.getLogger(__name__)

CLAIM_UPDATE = (
    "SET visible_at = :vis, claim = :tok, rc = rc + :one, rcv = :now, "
    "frc = if_not_exists(frc, :now)"
)


def claim_values(seen: int, visible_at: int, token: str, now_ms: int) -> dict[str, Any]:
    """The expression values of a claim: `visible_at = :seen`, then CLAIM_UPDATE."""
    return {
        ":vis": {"N": str(visible_at)},
        ":tok": {"S": token},
        ":one": {"N": "1"},
        ":now": {"N": str(now_ms)},
        ":seen": {"N": str(seen)},
    }


def claimed(message: Message, visible_at: int, token: str, now_ms: int) -> Message:
    """The message once CLAIM_UPDATE has applied to it."""
    return message.with_changes(
        visible_at=visible_at, claim_token=token, receive_count=message.receive_count + 1,
        first_receive_ms=message.first_receive_ms or now_ms)


class BatchClaims:
    """Claims many candidates of one shard: one transaction, and one batch read of those
    the index query did not read whole."""

    def __init__(
        self, client: DynamoDBClient, table: str, complete: Callable[[Message], Message]
    ) -> None:
        self._db = client
        self._table = table
        self._complete = complete  # reads a message's parts kept in S3

    def claim(
        self, queue_id: str, shard: int, claims: Sequence[tuple[Candidate, str]],
        visible_at: int, now_ms: int,
    ) -> list[Message | None]:
        """Claim each (candidate, token); the message per claim, None where it was lost."""
        ops = [self._op(queue_id, shard, c, token, visible_at, now_ms) for c, token in claims]
        won = self._transact(ops)
        read = self._read([ops[i]["Update"]["Key"] for i in won
                           if claims[i][0].message is None])
        result: list[Message | None] = [None] * len(claims)
        for index in won:
            candidate, token = claims[index]
            if candidate.message is not None:
                result[index] = self._complete(
                    claimed(candidate.message, visible_at, token, now_ms))
                continue
            item = read.get(candidate.message_id)
            if item is not None and item.get("claim", {}).get("S") == token:
                result[index] = self._complete(items.from_item(item))
        return result

    def _op(
        self, queue_id: str, shard: int, candidate: Candidate, token: str, visible_at: int,
        now_ms: int,
    ) -> dict[str, Any]:
        return {"Update": {
            "TableName": self._table,
            "Key": items.key(queue_id, shard, candidate.message_id),
            "UpdateExpression": CLAIM_UPDATE,
            "ConditionExpression": "visible_at = :seen",
            "ExpressionAttributeValues": claim_values(candidate.visible_at, visible_at, token,
                                                      now_ms),
        }}

    def _transact(self, ops: list[dict[str, Any]]) -> list[int]:
        """Run the claims until they land or lose their condition; the indexes that won."""
        pending = list(range(len(ops)))
        for attempt in range(ROUNDS):
            if not pending:
                return []
            try:
                transact_write(self._db, [ops[i] for i in pending])
            except TransactionCancelledError as exc:
                codes = [str(r.get("Code", "")) for r in exc.reasons]
                pending = [i for i, code in zip(pending, codes, strict=False)
                           if code != "ConditionalCheckFailed"]
                if any(code not in _INNOCENT | {"ConditionalCheckFailed"} for code in codes):
                    time.sleep(0.01 * 2**attempt)  # a conflict or throttle: back off a little
                continue
            return pending
        if not pending:
            return []
        raise StoreUnavailableError("claims kept being cancelled")

    def _read(self, keys: list[Item]) -> dict[str, Item]:
        """Consistent BatchGetItem of the won items, by message id (bounded retries; a
        partial result is explicit here: what stays unprocessed is left out)."""
        got, pending = get_some(self._db, self._table, keys)
        found = {str(item["sk"]["S"]): item for item in got}
        if pending:
            # Claimed but not read: they come back after their visibility timeout.
            logger.warning("%d claimed messages could not be read back", len(pending))
        return found
