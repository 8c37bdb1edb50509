"""The storage interface the queue logic runs over (the DynamoDB store implements it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from chalicelib.backend.dynamo_moves import Move, MoveOutcome, ProgressOp
from chalicelib.clusters.shard_load import ShardLoad
from chalicelib.domain.messages import Candidate, Counts, Message, MessageRef, VisibilityOutcome


@dataclass(frozen=True)
class CandidatePage:
    """Visible candidates at the head of a shard, and whether more may follow."""

    candidates: list[Candidate]
    more: bool
    items_read: int


@dataclass(frozen=True)
class VisibilityChange:
    """A request to move a claimed message's `visible_at`.

    `any_claim`: the change applies to the message while it is in flight under any claim
    (an older receipt handle of a standard queue's message acts on its current receive, as
    in SQS); otherwise only under the claim of `ref`. Under the message's latest claim it
    applies even once the timeout has passed (SQS accepts that handle until the message
    is received again)."""

    ref: MessageRef
    visible_at: int
    any_claim: bool = False


@dataclass(frozen=True)
class NewPuts:
    """What writing new messages only where none stands did, by message id: `written`,
    or `existing` (an item held the key already: the message a first attempt of the same
    request stored)."""

    written: frozenset[str] = frozenset()
    existing: frozenset[str] = frozenset()


class MessageStore(Protocol):
    """Primitives over one messages table; all queue logic lives above them."""

    table: str

    def put_messages(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> set[str]:
        """Store new messages (each with its shard) in one batch; return the ids not stored."""
        ...

    def put_if_absent(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> None:
        """Write messages that are not there yet (sync replication); never overwrite."""
        ...

    def put_new(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> NewPuts:
        """Store new messages, each only if no item holds its key (a message of a
        deduplicated send, whose retry names the same keys); one conditional request for
        one message, one per ten for more. An item that stands is left as it is. Raises a
        StoreError when the writes cannot be made (nothing is then known unwritten)."""
        ...

    def find_candidates(
        self, queue_id: str, shard: int, now_ms: int, limit: int, after: Candidate | None,
        low: int = 0,
    ) -> CandidatePage:
        """Read up to `limit` candidates with `low <= visible_at <= now_ms` from the
        visibility index, oldest first."""
        ...

    def claim(
        self, queue_id: str, shard: int, candidate: Candidate, visible_at: int, token: str,
        now_ms: int,
    ) -> Message | None:
        """Claim a candidate if it is still where the index showed it; None on a lost race."""
        ...

    def claim_many(
        self, queue_id: str, shard: int, claims: Sequence[tuple[Candidate, str]],
        visible_at: int, now_ms: int,
    ) -> list[Message | None]:
        """Claim several candidates of one shard, each with its own token, in one go.

        The result follows `claims`: the claimed message, or None when another receiver
        won it (or re-claimed it before it could be read back). Only messages held
        under the caller's token are ever returned.
        """
        ...

    def move(
        self, queue_id: str, shard: int, candidate: Candidate, target_queue_id: str,
        target_shard: int, target_retention_ms: int, now_ms: int, source_arn: str | None = None,
    ) -> bool:
        """Atomically move a candidate to another queue (dead letters); False on a lost race.

        `source_arn` is recorded on the moved message as its DeadLetterQueueSourceArn."""
        ...

    def delete_expired(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> None:
        """Remove messages whose retention has passed."""
        ...

    def delete_claimed(self, refs: Sequence[MessageRef], any_claim: bool = False) -> None:
        """Delete messages still held by these claims; stale claims delete nothing.

        With `any_claim`, a message is deleted whatever claim it is under now (the
        handles of a standard queue's message all delete it, as in SQS)."""
        ...

    def change_visibility(
        self, changes: Sequence[VisibilityChange], now_ms: int
    ) -> list[VisibilityOutcome]:
        """Move `visible_at` of in-flight messages held by these claims (with `any_claim`,
        by any claim), and of a message whose timeout passed under its latest claim."""
        ...

    def peek(self, queue_id: str, shard: int, limit: int, purged_ms: int = 0) -> list[Message]:
        """The oldest messages of a shard by send time (`sent_ms`, then id), without
        claiming them. Message ids do not sort in send order, so a store that cannot
        read a whole shard at a bounded cost returns the oldest of a bounded sample. With
        the queue's last purge (`purged_ms`), the sample leaves out what that purge's
        removal has still to delete, however much it is."""
        ...

    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        """Approximate visible, in-flight and delayed counts of one shard."""
        ...

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """True when the shard holds no message at all (visible, in flight or delayed)."""
        ...

    def loads(self, shards: Sequence[tuple[str, int]], now_ms: int,
              window_ms: int) -> dict[tuple[str, int], ShardLoad]:
        """Messages in and out per second of each (queue id, shard) over the last
        `window_ms`, of any number of queues at once."""
        ...

    def purge(self, queue_id: str, shard: int) -> int:
        """Delete every message of one shard; return how many."""
        ...

    def remove_sent_before(self, queue_id: str, shard: int, before_ms: int | None,
                           start: str | None, max_items: int,
                           now_ms: int) -> tuple[Counts, str | None]:
        """One bounded step of a purge's removal: from `start` (None: the beginning), read
        about `max_items` messages and delete those sent before `before_ms` (None: all);
        return how many went, by the count each weighed in at `now_ms`, and where the
        next step starts (None: the shard is done)."""
        ...

    def read_messages(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> list[Message]:
        """The messages of one shard with these ids (consistent reads; gone ones left out)."""
        ...

    def move_many(
        self, queue_id: str, shard: int, moves: Sequence[Move], progress: ProgressOp
    ) -> MoveOutcome:
        """Move messages of one shard to their targets in transactions that also run
        `progress(n)`, the caller's conditional write for n moves (redrive tasks)."""
        ...
