"""Redrive moves: many messages out of one queue shard, each into its own target, in
transactions that also record the task's progress.

Each transaction deletes every moving message from the source (conditional on the
`visible_at` it was read with, so a message a receiver claimed meanwhile stays), puts its
new copy into its target (which may be another cluster's table: one transaction may span
tables), and runs the caller's own write (the task's progress,
conditional on the task still running). Either all of it lands or none of it: a crash
between two steps leaves every message exactly once, in the source or in its target, and
the task's count matches. When conditions fail, the cancellation reasons say which: a
lost message is dropped and the rest go again; a failed progress write means the task
stopped (cancelled), and nothing more moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.items import Item
from chalicelib.domain.exceptions import StoreUnavailableError, TransactionCancelledError
from chalicelib.domain.messages import Message
from chalicelib.dynamo_batches import get_all, transact_write

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ROUNDS = 5
# A transaction holds at most 100 items: each move takes two, plus the progress write
# (25 a chunk keeps a task's progress fine-grained).
CHUNK = 25
_CONDITION = "ConditionalCheckFailed"


@dataclass(frozen=True)
class Move:
    """One message to move: as read from the source, and as its target receives it."""

    seen: Message
    target_table: str
    target_queue_id: str
    target_shard: int
    message: Message


@dataclass(frozen=True)
class MoveOutcome:
    """How many messages moved; `stopped` when the caller's own write failed its condition."""

    moved: int
    stopped: bool = False


# The caller's write for a chunk: given the moves already made by this call and the chunk's.
ProgressOp = Callable[[int, int], dict[str, Any]]


class BatchMoves:
    """Runs redrive moves out of one messages table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def read(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> list[Item]:
        """Consistent BatchGetItem of one shard's items (bounded retries), in the order
        asked; items no longer there are left out (StoreThrottledError when some keys stay
        unprocessed: their items are not known to be gone)."""
        keys = [items.key(queue_id, shard, m) for m in dict.fromkeys(message_ids)]
        found = {str(item["sk"]["S"]): item for item in get_all(self._db, self._table, keys)}
        return [found[m] for m in message_ids if m in found]

    def move(
        self, queue_id: str, shard: int, moves: Sequence[Move], progress: ProgressOp,
    ) -> MoveOutcome:
        """Move in chunks; `progress(done, n)` is the caller's write for a chunk of n moves
        after `done` moves of earlier chunks."""
        moved = 0
        for start in range(0, len(moves), CHUNK):
            chunk = list(moves[start:start + CHUNK])
            outcome = self._chunk(queue_id, shard, chunk, partial(progress, moved))
            moved += outcome.moved
            if outcome.stopped:
                return MoveOutcome(moved, stopped=True)
        return MoveOutcome(moved)

    def _chunk(
        self, queue_id: str, shard: int, moves: list[Move],
        progress: Callable[[int], dict[str, Any]],
    ) -> MoveOutcome:
        pending = moves
        for attempt in range(ROUNDS):
            if not pending:
                return MoveOutcome(0)
            ops = [*self._ops(queue_id, shard, pending), progress(len(pending))]
            try:
                transact_write(self._db, ops)
            except TransactionCancelledError as exc:
                codes = [str(r.get("Code", "")) for r in exc.reasons]
                codes += [""] * (len(ops) - len(codes))
                if codes[-1] == _CONDITION:
                    return MoveOutcome(0, stopped=True)
                # The deletes come first, one per move, in order.
                pending = [m for m, code in zip(pending, codes, strict=False) if code != _CONDITION]
                if any(code not in ("", "None", _CONDITION) for code in codes):
                    time.sleep(0.01 * 2**attempt)  # a conflict or throttle: back off a little
                continue
            return MoveOutcome(len(pending))
        raise StoreUnavailableError("redrive moves kept being cancelled")

    def _ops(self, queue_id: str, shard: int, moves: list[Move]) -> list[dict[str, Any]]:
        deletes = [{"Delete": {
            "TableName": self._table,
            "Key": items.key(queue_id, shard, m.seen.message_id),
            "ConditionExpression": "visible_at = :seen",
            "ExpressionAttributeValues": {":seen": {"N": str(m.seen.visible_at)}},
        }} for m in moves]
        puts = [{"Put": {
            "TableName": m.target_table,
            "Item": items.to_item(m.target_queue_id, m.target_shard, m.message),
            "ConditionExpression": "attribute_not_exists(sk)",
        }} for m in moves]
        return deletes + puts
