"""Pending purges: the removal, in the background, of the messages that PurgeQueue or
DeleteQueue left behind (pure Python).

PurgeQueue and DeleteQueue answer once they have marked the queue's record (`purged_ms`):
from then on a receive treats every message sent before that time as gone. The stored
messages are removed afterwards, a bounded step at a time, by a schedule; each shard's
progress (where its last step ended) is kept, so a removal goes on where it stopped
after a crash or restart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum


class PurgeKind(StrEnum):
    """What left the messages behind."""

    PURGE = "purge"  # PurgeQueue: messages sent before the cutoff go, later ones stay
    DELETE = "delete"  # DeleteQueue: every message goes while the queue stays deleted


@dataclass(frozen=True)
class ShardProgress:
    """How far the removal got in one shard: `start` is where the next step reads from
    (opaque to all but the store; None: from the beginning), `done` once it read to the
    end."""

    shard: int
    cluster: str
    start: str | None = None
    done: bool = False


@dataclass(frozen=True)
class PendingPurge:
    """One purge or deletion whose messages are still being removed."""

    queue_id: str
    cutoff_ms: int  # messages sent before this are gone
    kind: PurgeKind
    fifo: bool
    shards: tuple[ShardProgress, ...]
    removed: int = 0

    @property
    def purge_id(self) -> str:
        """Unique per queue and cutoff."""
        return f"{self.queue_id}#{self.cutoff_ms}"

    @property
    def finished(self) -> bool:
        """Every shard was read to its end."""
        return all(s.done for s in self.shards)

    def with_step(self, shard: int, start: str | None, removed: int) -> PendingPurge:
        """The purge after a step of one shard that ended at `start` (None: its end)."""
        shards = tuple(replace(s, start=start, done=start is None) if s.shard == shard else s
                       for s in self.shards)
        return replace(self, shards=shards, removed=self.removed + removed)


def shards_to_json(shards: tuple[ShardProgress, ...]) -> str:
    """The shards' progress as stored."""
    return json.dumps([{"id": s.shard, "c": s.cluster, "s": s.start, "d": s.done}
                       for s in shards], separators=(",", ":"))


def shards_from_json(text: str) -> tuple[ShardProgress, ...]:
    """The shards' progress from what `shards_to_json` wrote."""
    return tuple(ShardProgress(int(s["id"]), str(s["c"]), s.get("s"), bool(s.get("d")))
                 for s in json.loads(text))
