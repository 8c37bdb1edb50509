"""The lanes of a shard's visibility index (fair queues).

A shard's messages all live under its partition key, ordered by `visible_at` in the
visibility index. The index is cut into two ranges of that one key:

- the main lane, `visible_at` as it is (epoch ms, today's dates);
- the noisy lane, `visible_at + LANE_BASE`, where a standard queue's noisy tenants'
  new messages wait.

A receive reads the main lane (`visible_at <= now`, which never reaches the noisy
lane) and only when that leaves it short, the noisy lane (`LANE_BASE <= visible_at <=
LANE_BASE + now`). A claim moves the message back to the main lane, like any claim.
Both lanes share the partition key, so counts, purges, drains, replication and resyncs,
which all work per partition key, carry noisy-lane messages unchanged.
"""

from __future__ import annotations

# About 3,170 years of milliseconds: far past any real `visible_at` (12 h at most ahead).
LANE_BASE = 100_000_000_000_000


def to_noisy_lane(visible_at: int) -> int:
    """Where a message that becomes visible at `visible_at` sorts in the noisy lane."""
    return LANE_BASE + visible_at


def in_noisy_lane(visible_at: int) -> bool:
    """True for an index position in the noisy lane."""
    return visible_at >= LANE_BASE


def real_visible_at(visible_at: int) -> int:
    """The time a message becomes visible, whichever lane it waits in."""
    return visible_at - LANE_BASE if visible_at >= LANE_BASE else visible_at


def lane_slot(shard: int) -> int:
    """A key for per-shard bookkeeping of a shard's noisy lane (shard ids are >= 0)."""
    return -1 - shard
