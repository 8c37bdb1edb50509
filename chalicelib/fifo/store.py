"""The FIFO store the FIFO service runs over: its types and its protocol.

The service (`chalicelib.fifo.service`) holds the ordering rules: which groups are ready,
which of their messages go, when a head is removed or moved. A store offers the
primitives, each one agreeing write: `DynamoFifoStore` on DynamoDB
(`chalicelib.fifo.dynamo`), and a twin in memory for the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chalicelib.domain.messages import Counts, Message, MessageRef

# A claim's plan: the group as read, the messages it takes, and its claim token.
ClaimPlan = tuple["GroupState", Sequence["FifoEntry"], str]


@dataclass(frozen=True)
class GroupState:
    """A group item as a receive sees it."""

    shard: int
    group: str
    visible_at: int
    place: int = -1  # its place in the receive that holds or last held it (`claim_place`)


@dataclass(frozen=True)
class FifoEntry:
    """A stored FIFO message with its shard and sort key."""

    shard: int
    sort_key: str
    message: Message
    until: int  # end of its visibility timeout (0 if never received)
    ready_at: int  # when its send delay ends


@dataclass(frozen=True)
class SendLayout:
    """Where a send's side items go once a queue was resharded: each message's dedup
    partition (`dedup_shards`, by the message's index; none: its own shard's), and the
    counters of shards made by the resharding (`seeds`: shard id -> when it opened)."""

    dedup_shards: Sequence[int] = ()
    seeds: Mapping[int, int] = field(default_factory=dict)

    def dedup_shard(self, index: int, shard: int) -> int:
        """The shard partition of message `index`'s dedup item."""
        return self.dedup_shards[index] if self.dedup_shards else shard


@dataclass(frozen=True)
class SendOutcome:
    """What a send stored: the message as stored, or the original of a duplicate."""

    message: Message
    duplicate: bool


class FifoStore(Protocol):
    """FIFO primitives over one messages table (one cluster)."""

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """True when the shard holds no message."""
        ...

    def send(self, queue_id: str, scope: str, placed: Sequence[tuple[int, Message]],
             now_ms: int, generation: int = 0, layout: SendLayout | None = None,
             purged_ms: int = 0) -> list[SendOutcome]:
        """Store messages (each with its shard) in order; a live dedup id's message comes
        back as the original. A dedup id sent by `purged_ms` (the queue's last purge) is
        not live: a purge clears the deduplication history, as in SQS."""
        ...

    def ready_groups(self, queue_id: str, shard: int, now_ms: int,
                     limit: int) -> list[GroupState]:
        """Groups whose `visible_at` has passed, oldest first."""
        ...

    def first_visible_at(self, queue_id: str, shard: int, until_ms: int) -> int | None:
        """The earliest `visible_at` of the shard's groups, if one is before `until_ms`."""
        ...

    def head(self, queue_id: str, shard: int, group: str, limit: int) -> list[FifoEntry]:
        """A group's first messages, in order."""
        ...

    def claim(self, queue_id: str, plans: Sequence[ClaimPlan], until: int, now_ms: int,
              attempt: tuple[str, str, bool] | None = None) -> list[int]:
        """Claim the planned groups with their messages until `until`, all or each
        group's plan dropped; the indexes of the plans claimed."""
        ...

    def set_group_visible_at(self, queue_id: str, group: GroupState, visible_at: int) -> None:
        """Move a group's `visible_at`, unless another process moved it first."""
        ...

    def drop_group(self, queue_id: str, group: GroupState) -> None:
        """Delete a group found empty, unless a send added to it since."""
        ...

    def remove_head(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry]) -> bool:
        """Delete messages at the head of an unheld group."""
        ...

    def move(self, queue_id: str, group: GroupState, entry: FifoEntry, target_queue_id: str,
             target_shard: int, moved: Message, target_seed_ms: int = 0) -> bool:
        """Move an unheld group's head to a dead-letter queue's group."""
        ...

    def attempt(self, queue_id: str, attempt_id: str, now_ms: int) -> list[MessageRef] | None:
        """The messages a live receive attempt claimed; None when there is none."""
        ...

    def read(self, refs: Sequence[MessageRef]) -> list[FifoEntry]:
        """The messages still stored among `refs`."""
        ...

    def delete(self, refs: Sequence[MessageRef], now_ms: int) -> dict[int, str]:
        """Delete in-flight messages; {index: "expired"} for those visible again."""
        ...

    def change_visibility(self, ref: MessageRef, until: int, now_ms: int) -> str:
        """Move an in-flight message's group hold; what became of it."""
        ...

    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        """Approximate counts of a shard."""
        ...

    def count_many(self, shards: Sequence[tuple[str, int]],
                   now_ms: int) -> dict[tuple[str, int], Counts]:
        """Approximate counts of each (queue id, shard), read together."""
        ...

    def purge(self, queue_id: str, shard: int) -> int:
        """Delete every message and group of a shard; how many items went."""
        ...

    def remove_sent_before(self, queue_id: str, shard: int, before_ms: int | None,
                           start: str | None, max_items: int,
                           now_ms: int) -> tuple[Counts, str | None]:
        """One bounded step of a purge's removal (`MessageStore.remove_sent_before`); with
        `before_ms` None the shard's group items go too."""
        ...

    def peek(self, queue_id: str, shard: int, limit: int) -> list[Message]:
        """The first messages of a shard, without receiving them."""
        ...
