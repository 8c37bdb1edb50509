"""An in-memory MessageStore for unit tests of the queue logic (never used by the product)."""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib.backend.store import CandidatePage, NewPuts, VisibilityChange
from chalicelib.clusters.shard_load import ShardLoad
from chalicelib.domain.messages import Candidate, Counts, Message, MessageRef, VisibilityOutcome


class MemoryStore:
    """The MessageStore primitives over dicts, with the same conditions as DynamoDB's."""

    def __init__(self) -> None:
        self.shards: dict[tuple[str, int], dict[str, Message]] = {}
        self.items_read = 0
        self.claim_batches: list[int] = []  # the size of every claim_many call, in order
        self.load: dict[tuple[str, int], ShardLoad] = {}

    def _shard(self, queue_id: str, shard: int) -> dict[str, Message]:
        return self.shards.setdefault((queue_id, shard), {})

    def put_messages(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> set[str]:
        for shard, message in placed:
            self._shard(queue_id, shard)[message.message_id] = message
        return set()

    def put_if_absent(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> None:
        for shard, message in placed:
            self._shard(queue_id, shard).setdefault(message.message_id, message)

    def put_new(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> NewPuts:
        written: set[str] = set()
        existing: set[str] = set()
        for shard, message in placed:
            messages = self._shard(queue_id, shard)
            if message.message_id in messages:
                existing.add(message.message_id)
            else:
                messages[message.message_id] = message
                written.add(message.message_id)
        return NewPuts(frozenset(written), frozenset(existing))

    def find_candidates(
        self, queue_id: str, shard: int, now_ms: int, limit: int, after: Candidate | None,
        low: int = 0,
    ) -> CandidatePage:
        ordered = sorted(
            (m for m in self._shard(queue_id, shard).values() if low <= m.visible_at <= now_ms),
            key=lambda m: (m.visible_at, m.message_id),
        )
        if after is not None:
            ordered = [m for m in ordered
                       if (m.visible_at, m.message_id) > (after.visible_at, after.message_id)]
        page = ordered[:limit]
        self.items_read += len(page)
        found = [Candidate(shard, m.message_id, m.visible_at, m.expires_ms, m.receive_count)
                 for m in page]
        return CandidatePage(found, len(ordered) > limit, len(found))

    def claim(
        self, queue_id: str, shard: int, candidate: Candidate, visible_at: int, token: str,
        now_ms: int,
    ) -> Message | None:
        messages = self._shard(queue_id, shard)
        current = messages.get(candidate.message_id)
        if current is None or current.visible_at != candidate.visible_at:
            return None
        claimed = current.with_changes(
            visible_at=visible_at, claim_token=token, receive_count=current.receive_count + 1,
            first_receive_ms=current.first_receive_ms or now_ms,
        )
        messages[candidate.message_id] = claimed
        return claimed

    def claim_many(
        self, queue_id: str, shard: int, claims: Sequence[tuple[Candidate, str]],
        visible_at: int, now_ms: int,
    ) -> list[Message | None]:
        self.claim_batches.append(len(claims))
        return [self.claim(queue_id, shard, candidate, visible_at, token, now_ms)
                for candidate, token in claims]

    def move(
        self, queue_id: str, shard: int, candidate: Candidate, target_queue_id: str,
        target_shard: int, target_retention_ms: int, now_ms: int, source_arn: str | None = None,
    ) -> bool:
        messages = self._shard(queue_id, shard)
        current = messages.get(candidate.message_id)
        if current is None or current.visible_at != candidate.visible_at:
            return False
        del messages[candidate.message_id]
        self._shard(target_queue_id, target_shard)[current.message_id] = (
            current.moved_to_dead_letters(now_ms, target_retention_ms, source_arn))
        return True

    def delete_expired(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> None:
        for message_id in message_ids:
            self._shard(queue_id, shard).pop(message_id, None)

    def delete_claimed(self, refs: Sequence[MessageRef], any_claim: bool = False) -> None:
        for ref in refs:
            messages = self._shard(ref.queue_id, ref.shard)
            current = messages.get(ref.message_id)
            if current is not None and (any_claim or _held(current, ref)):
                del messages[ref.message_id]

    def change_visibility(
        self, changes: Sequence[VisibilityChange], now_ms: int
    ) -> list[VisibilityOutcome]:
        outcomes = []
        for change in changes:
            messages = self._shard(change.ref.queue_id, change.ref.shard)
            current = messages.get(change.ref.message_id)
            latest = current is not None and _held(current, change.ref)
            if current is None or (not change.any_claim and not latest):
                outcomes.append(VisibilityOutcome.NOT_FOUND)
            elif current.visible_at <= now_ms and not latest:
                outcomes.append(VisibilityOutcome.NOT_IN_FLIGHT)
            else:
                messages[change.ref.message_id] = current.with_changes(
                    visible_at=change.visible_at
                )
                outcomes.append(VisibilityOutcome.CHANGED)
        return outcomes

    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        messages = self._shard(queue_id, shard).values()
        return Counts(
            visible=sum(1 for m in messages if m.visible_at <= now_ms),
            in_flight=sum(1 for m in messages if m.visible_at > now_ms and m.receive_count),
            delayed=sum(1 for m in messages if m.visible_at > now_ms and not m.receive_count),
        )

    def peek(self, queue_id: str, shard: int, limit: int, purged_ms: int = 0) -> list[Message]:
        return sorted((m for m in self._shard(queue_id, shard).values()
                       if m.sent_ms > purged_ms),
                      key=lambda m: (m.sent_ms, m.message_id))[:limit]

    def loads(self, shards: Sequence[tuple[str, int]], now_ms: int,
              window_ms: int) -> dict[tuple[str, int], ShardLoad]:
        """What `load` says each shard carries (set by the test; none by default)."""
        return {pair: self.load.get(pair, ShardLoad()) for pair in shards}

    def is_empty(self, queue_id: str, shard: int) -> bool:
        return not self._shard(queue_id, shard)

    def purge(self, queue_id: str, shard: int) -> int:
        messages = self._shard(queue_id, shard)
        count = len(messages)
        messages.clear()
        return count

    def read_messages(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> list[Message]:
        messages = self._shard(queue_id, shard)
        return [messages[m] for m in message_ids if m in messages]


def _held(message: Message, ref: MessageRef) -> bool:
    """Whether the message is held under the claim of `ref`: one never received holds
    none, so no token (not even an empty one) names its claim."""
    return bool(message.claim_token) and message.claim_token == ref.claim_token
