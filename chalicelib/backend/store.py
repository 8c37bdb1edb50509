"""The storage interface the queue logic runs over (the DynamoDB store implements it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from chalicelib.domain.messages import Candidate, Counts, Message, MessageRef, VisibilityOutcome


@dataclass(frozen=True)
class CandidatePage:
    """Visible candidates at the head of a shard, and whether more may follow."""

    candidates: list[Candidate]
    more: bool
    items_read: int


@dataclass(frozen=True)
class VisibilityChange:
    """A request to move a claimed message's `visible_at`."""

    ref: MessageRef
    visible_at: int


class MessageStore(Protocol):
    """Primitives over one messages table; all queue logic lives above them."""

    def put_messages(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> set[str]:
        """Store new messages (each with its shard) in one batch; return the ids not stored."""
        ...

    def put_if_absent(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> None:
        """Write messages that are not there yet (sync replication); never overwrite."""
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
        target_shard: int, target_retention_ms: int, now_ms: int,
    ) -> bool:
        """Atomically move a candidate to another queue (dead letters); False on a lost race."""
        ...

    def delete_expired(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> None:
        """Remove messages whose retention has passed."""
        ...

    def delete_claimed(self, refs: Sequence[MessageRef]) -> None:
        """Delete messages still held by these claims; stale claims delete nothing."""
        ...

    def change_visibility(
        self, changes: Sequence[VisibilityChange], now_ms: int
    ) -> list[VisibilityOutcome]:
        """Move `visible_at` of in-flight messages held by these claims."""
        ...

    def peek(self, queue_id: str, shard: int, limit: int) -> list[Message]:
        """The oldest messages of a shard in send order, without claiming them."""
        ...

    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        """Approximate visible, in-flight and delayed counts of one shard."""
        ...

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """True when the shard holds no message at all (visible, in flight or delayed)."""
        ...

    def purge(self, queue_id: str, shard: int) -> int:
        """Delete every message of one shard; return how many."""
        ...
