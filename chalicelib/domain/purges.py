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
from dataclasses import dataclass, field, replace
from enum import StrEnum

from chalicelib.domain.messages import Counts


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
    # The queue's counts at the cutoff, as its stores held them, and what the removal
    # took of them so far (each message by the count it weighed in when removed).
    present: Counts = field(default_factory=Counts)
    taken: Counts = field(default_factory=Counts)

    @property
    def removed(self) -> int:
        """How many messages the removal took so far."""
        return self.taken.total

    @property
    def purge_id(self) -> str:
        """Unique per queue and cutoff."""
        return f"{self.queue_id}#{self.cutoff_ms}"

    @property
    def finished(self) -> bool:
        """Every shard was read to its end."""
        return all(s.done for s in self.shards)

    def counts_after(self, stored: Counts) -> Counts:
        """What of the `stored` counts (as the stores hold them now) is not purged: the
        stored counts less the messages of the cutoff the removal has not taken yet.
        Once the purge is finished the stored counts stand alone.

        How many are left in all is known (kept at the cutoff, less what the removal
        took), but not in which count: a message of the cutoff can only turn visible
        (its delay or visibility timeout runs out; a receive never claims it again). So
        the in-flight and delayed counts lose at most what each had left of the cutoff,
        and the visible count the rest, none below zero.

        Approximate while the removal runs, as every count is: high by the removals the
        stream has not counted yet; where a message of the cutoff turned visible and one
        sent after it is hidden, one count shows it high and the other low; and low by a
        message of the cutoff that went some other way (one received before the purge
        and deleted by its consumer, or met by a receive after its timeout: a receive
        drops the purged messages it meets), which the removal never takes."""
        left = max(0, self.present.total - self.taken.total)
        in_flight = min(max(0, self.present.in_flight - self.taken.in_flight),
                        stored.in_flight, left)
        delayed = min(max(0, self.present.delayed - self.taken.delayed), stored.delayed,
                      left - in_flight)
        visible = min(stored.visible, left - in_flight - delayed)
        return Counts(stored.visible - visible, stored.in_flight - in_flight,
                      stored.delayed - delayed)

    def with_step(self, shard: int, start: str | None, removed: Counts) -> PendingPurge:
        """The purge after a step of one shard that ended at `start` (None: its end) and
        removed `removed`."""
        shards = tuple(replace(s, start=start, done=start is None) if s.shard == shard else s
                       for s in self.shards)
        return replace(self, shards=shards, taken=self.taken + removed)


def shards_to_json(shards: tuple[ShardProgress, ...]) -> str:
    """The shards' progress as stored."""
    return json.dumps([{"id": s.shard, "c": s.cluster, "s": s.start, "d": s.done}
                       for s in shards], separators=(",", ":"))


def shards_from_json(text: str) -> tuple[ShardProgress, ...]:
    """The shards' progress from what `shards_to_json` wrote."""
    return tuple(ShardProgress(int(s["id"]), str(s["c"]), s.get("s"), bool(s.get("d")))
                 for s in json.loads(text))
