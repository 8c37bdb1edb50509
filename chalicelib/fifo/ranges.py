"""A FIFO queue's shards as ranges of the group hash, and how they split and merge.

A shard owns the groups whose hash `h` (`fifo.group_hash`) has `h % mod == rem`. A queue
created with `n` shards starts as the slots of `n`: its i-th shard by id owns `(i, n)`,
which is where the original layout put each group, so nothing moves when a queue is
first resharded. A split turns `(rem, mod)` into its halves `(rem, 2 mod)` and
`(rem + mod, 2 mod)`; a merge is the reverse, of siblings that are all whole shards (a
queue created with an odd count `n > 1` merges its `n` original shards into one).

A resharding never moves a message, and a group's order holds across it, as Kinesis
keeps order per key across a shard split:
- the parents stop taking sends at a switch time `at_ms`, a moment ahead (longer than
  any front end keeps an older copy of the queue record), and the children take them
  from then on: every sender switches at the same instant;
- a child delivers nothing while any ancestor still in the map holds a message, so a
  group's older messages, in its old shard, all go before its newer ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from chalicelib.domain.queues import Shard
from chalicelib.fifo.rules import group_hash

# Shard ids stay below 1000 (the sequence numbers of the earlier layout held them).
MAX_SHARD_ID = 999
# Shards one map may hold, draining ones included (resizes faster than the old shards
# drain would otherwise grow the queue record without bound).
MAX_MAP = 256


class MapFullError(ValueError):
    """A resize would leave more shards in the map than MAX_MAP."""


@dataclass(frozen=True)
class Range:
    """The groups whose hash is `rem` modulo `mod`."""

    rem: int
    mod: int

    def holds(self, hashed: int) -> bool:
        """True when a group of this hash belongs to the range."""
        return hashed % self.mod == self.rem

    def halves(self) -> tuple[Range, Range]:
        """The two ranges a split makes."""
        return Range(self.rem, 2 * self.mod), Range(self.rem + self.mod, 2 * self.mod)

    def parent(self) -> Range | None:
        """The range a merge of this one and its siblings makes (None for the whole)."""
        if self.mod <= 1:
            return None
        if self.mod % 2:
            return Range(0, 1)
        half = self.mod // 2
        return Range(self.rem % half, half)

    def siblings(self) -> tuple[Range, ...]:
        """The ranges merged together with this one (itself included)."""
        up = self.parent()
        if up is None:
            return (self,)
        if self.mod % 2:
            return tuple(Range(r, self.mod) for r in range(self.mod))
        return up.halves()


def ranged(shards: Sequence[Shard]) -> tuple[Shard, ...]:
    """The shards with their ranges written out (a queue never resharded has none: its
    i-th shard by id owns the slot i of the shard count)."""
    if any(s.mod for s in shards):
        return tuple(shards)
    ordered = sorted(shards, key=lambda s: s.id)
    return tuple(replace(s, rem=i, mod=len(ordered), base=len(ordered))
                 for i, s in enumerate(ordered))


def range_of(shard: Shard) -> Range:
    """A ranged shard's range."""
    return Range(shard.rem, shard.mod)


def base_of(shards: Sequence[Shard]) -> int:
    """The shard count the queue was created with: the slots its dedup items use."""
    return max((s.base for s in shards if s.mod), default=0) or len(shards)


def dedup_slot(shards: Sequence[Shard], group: str) -> int:
    """The shard partition that keeps a group's dedup items (DeduplicationScope=
    messageGroup) whatever the resharding: its slot in the original layout."""
    return group_hash(group) % base_of(shards)


def sends_at(shard: Shard, now_ms: int) -> bool:
    """True when the shard takes new messages at `now_ms`."""
    return shard.opens_at_ms <= now_ms and (not shard.draining
                                            or now_ms < shard.draining_since_ms)


def owner(shards: Sequence[Shard], group: str, now_ms: int) -> Shard:
    """The shard a group's new messages go to at `now_ms`."""
    hashed = group_hash(group)
    holders = [s for s in ranged(shards) if range_of(s).holds(hashed)]
    for shard in holders:
        if sends_at(shard, now_ms):
            return shard
    # Unreachable with a well-formed map (the parents take sends until the children do);
    # the newest holder keeps a send somewhere the receives read.
    return max(holders or shards, key=lambda s: (s.opens_at_ms, s.id))


def ancestors(shards: Sequence[Shard], shard: Shard) -> tuple[Shard, ...]:
    """The shard's parents still in the map, theirs, and so on. A parent closed at the
    instant its child opened: a shard of the map with a parent's id but any other
    closing time is a later one that took a forgotten parent's id, and no ancestor."""
    by_id = {s.id: s for s in shards}
    found: dict[int, Shard] = {}
    todo = [shard]
    while todo:
        child = todo.pop()
        for parent_id in child.parents:
            parent = by_id.get(parent_id)
            if (parent is not None and parent.id not in found
                    and parent.draining_since_ms == child.opens_at_ms):
                found[parent.id] = parent
                todo.append(parent)
    return tuple(found.values())


def resize(shards: Sequence[Shard], count: int, cluster: str, at_ms: int) -> tuple[Shard, ...]:
    """The map with `count` shards taking sends from `at_ms`: the widest ranges split
    first, the narrowest whole sibling sets merge first. A merge that would go below
    `count` (an odd set) is not made, so the count reached may stay above it."""
    current = list(ranged(shards))
    while _active(current) < count:
        widest = min((s for s in current if not s.draining), key=lambda s: (s.mod, s.id))
        current = _split(current, widest, cluster, at_ms)
    while _active(current) > count:
        siblings = _mergeable(current, _active(current) - count)
        if not siblings:
            break
        current = _merge(current, siblings, cluster, at_ms)
    if len(current) > MAX_MAP:
        raise MapFullError(f"{len(current)} shards, over {MAX_MAP}")
    return tuple(sorted(current, key=lambda s: s.id))


def _active(shards: Iterable[Shard]) -> int:
    return sum(1 for s in shards if not s.draining)


def _new_ids(shards: Sequence[Shard], count: int) -> list[int]:
    """The lowest ids no shard of the map has (a forgotten shard's id is used again, and
    its sequence counter is a new one: `FifoSends.reserve`)."""
    used = {s.id for s in shards}
    ids = [i for i in range(MAX_SHARD_ID + 1) if i not in used][:count]
    if len(ids) < count:
        raise ValueError("no shard id is free")
    return ids


def _closed(shards: list[Shard], gone: Sequence[Shard],
            at_ms: int) -> tuple[list[Shard], tuple[int, ...]]:
    """The map once `gone` stop taking sends at `at_ms`, and the parents their successor
    waits for. A shard made at this same switch never took a send: it is dropped, and
    its successor waits for its parents instead."""
    parents: list[int] = []
    kept = list(shards)
    for shard in gone:
        kept.remove(shard)
        if shard.parents and shard.opens_at_ms == at_ms:
            parents.extend(shard.parents)
        else:
            kept.append(replace(shard, draining_since_ms=at_ms))
            parents.append(shard.id)
    return kept, tuple(dict.fromkeys(parents))


def _split(shards: list[Shard], shard: Shard, cluster: str, at_ms: int) -> list[Shard]:
    kept, parents = _closed(shards, [shard], at_ms)
    first, second = _new_ids(kept, 2)
    low, high = range_of(shard).halves()
    return kept + [Shard(i, cluster, 0, r.rem, r.mod, shard.base, parents, at_ms)
                   for i, r in ((first, low), (second, high))]


def _mergeable(shards: list[Shard], room: int) -> list[Shard]:
    """The narrowest set of sibling shards, all taking sends, whose merge takes away at
    most `room` shards (empty when there is none)."""
    active = {range_of(s): s for s in shards if not s.draining}
    for leaf in sorted(active, key=lambda r: (-r.mod, r.rem)):
        siblings = leaf.siblings()
        if len(siblings) > 1 and len(siblings) - 1 <= room and all(r in active for r in siblings):
            return [active[r] for r in siblings]
    return []


def _merge(shards: list[Shard], siblings: list[Shard], cluster: str, at_ms: int) -> list[Shard]:
    up = range_of(siblings[0]).parent()
    if up is None:  # the whole range has no siblings to merge with
        return shards
    kept, parents = _closed(shards, siblings, at_ms)
    (new_id,) = _new_ids(kept, 1)
    return [*kept, Shard(new_id, cluster, 0, up.rem, up.mod, siblings[0].base, parents, at_ms)]
