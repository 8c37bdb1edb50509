"""When a queue's shards should split or merge: the autoscaler's rules, with no AWS.

The rules follow systems that scale partitions under live traffic:
- split only after the load per shard has stayed over the target for `checks`
  consecutive checks (Pulsar splits a bundle after three), or for that many intervals
  since its first busy slot (the local timer checks again then), so a burst does not
  split;
- never more than x2 or /2 in one step (Kinesis resharding), and a split aims at
  `headroom` of the target (the Kinesis scaling utility scales up at 80%), so the load
  after it is not at the edge again;
- merge only after every shard has stayed under `low_fraction` of the target for a
  whole cool-down (a long cool-off after scaling down), then one halving an interval
  while the load stays low; a queue never has fewer shards than its load needs at
  headroom. The quiet time starts with the first quiet slot of the load after the last
  busy one (`quiet_since_ms`), not with the check that first saw it, and the local timer
  checks again the moment a merge falls due (`next_due_ms`), so a queue is back to one
  shard within the cool-down and one interval per halving.

The load per shard is the queue's busier rate (messages in or out per second) over its
active shards: sends spread evenly over a standard queue's shards, and a spread over
equal shards is what a split buys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

MAX_SHARDS = 64
WINDOW_MIN_MS = 5_000
WINDOW_MAX_MS = 60_000


@dataclass(frozen=True)
class ScalePolicy:
    """The autoscaler's settings."""

    target_rate: float = 100.0  # messages per second per shard that trigger a split
    interval_s: float = 60.0
    cooldown_s: float = 300.0
    checks: int = 3
    low_fraction: float = 0.2
    headroom: float = 0.8
    enabled: bool = True

    @property
    def window_ms(self) -> int:
        """The rate window: the last check interval, within WINDOW_MIN_MS..WINDOW_MAX_MS
        (the load slots the stream keeps span no more)."""
        return min(WINDOW_MAX_MS, max(WINDOW_MIN_MS, int(self.interval_s * 1000)))

    def needed(self, rate: float) -> int:
        """The shards `rate` needs at headroom."""
        return max(1, math.ceil(rate / (self.target_rate * self.headroom)))


@dataclass(frozen=True)
class ScaleState:
    """What the autoscaler remembers of a queue between checks."""

    above: int = 0  # consecutive checks over the target
    above_since_ms: int | None = None  # since when the load has been over the target
    below_since_ms: int | None = None  # since when every check was under the low mark
    changed_ms: int = 0  # the last split or merge
    pinned: bool = False  # an admin set the shard count: no automatic change


@dataclass(frozen=True)
class Decision:
    """A check's outcome: the active shards the queue should have, and the new state."""

    shards: int
    state: ScaleState

    def kind(self, active: int) -> str:
        """'split', 'merge' or '' (no change)."""
        return "split" if self.shards > active else "merge" if self.shards < active else ""


def decide(policy: ScalePolicy, active: int, rate: float, state: ScaleState,
           now_ms: int, window_start_ms: int | None = None,
           quiet_since_ms: int | None = None, busy_since_ms: int | None = None) -> Decision:
    """The shard count for a queue with `active` shards carrying `rate` messages/s over
    a window that began at `window_start_ms` (default: `window_ms` before now), quiet
    since `quiet_since_ms`, or over the target since `busy_since_ms`, when the load's
    slots tell (default: the window's start)."""
    if window_start_ms is None:
        window_start_ms = now_ms - policy.window_ms
    if state.pinned or not policy.enabled:
        return Decision(active, state)
    state = _observed(policy, rate / max(active, 1), state, window_start_ms, quiet_since_ms,
                      busy_since_ms)
    if active < MAX_SHARDS and (state.above >= policy.checks or _due(
            _split_due_ms(policy, state), now_ms)):
        wanted = min(2 * active, MAX_SHARDS, max(active + 1, policy.needed(rate)))
        return Decision(wanted, replace(state, above=0, above_since_ms=None,
                                        changed_ms=now_ms))
    if _due(_merge_due_ms(policy, active, state), now_ms):
        wanted = max(math.ceil(active / 2), policy.needed(rate))
        if wanted < active:
            return Decision(wanted, replace(state, changed_ms=now_ms))
    return Decision(active, state)


def _observed(policy: ScalePolicy, per_shard: float, state: ScaleState,
              window_start_ms: int, quiet_since_ms: int | None,
              busy_since_ms: int | None) -> ScaleState:
    """The state once this check's load is counted: over the target (since its first busy
    slot, never before the last change), under the low mark (since its first quiet
    slot), or between the two."""
    if per_shard > policy.target_rate:
        since = state.above_since_ms
        if since is None:
            since = max(window_start_ms if busy_since_ms is None else busy_since_ms,
                        state.changed_ms)
        return replace(state, above=state.above + 1, above_since_ms=since, below_since_ms=None)
    if per_shard < policy.target_rate * policy.low_fraction:
        below = state.below_since_ms
        if below is None:
            below = window_start_ms if quiet_since_ms is None else quiet_since_ms
        return replace(state, above=0, above_since_ms=None, below_since_ms=below)
    return replace(state, above=0, above_since_ms=None, below_since_ms=None)


def _due(at_ms: int | None, now_ms: int) -> bool:
    return at_ms is not None and now_ms >= at_ms


def _split_due_ms(policy: ScalePolicy, state: ScaleState) -> int | None:
    """When an excess that lasts splits: `checks` intervals after it began."""
    if state.above_since_ms is None:
        return None
    return state.above_since_ms + round(policy.checks * policy.interval_s * 1000)


def _merge_due_ms(policy: ScalePolicy, active: int, state: ScaleState) -> int | None:
    """When a quiet queue merges: the cool-down after its quiet time began, and an
    interval after its last change."""
    if active <= 1 or state.below_since_ms is None:
        return None
    return max(state.below_since_ms + round(policy.cooldown_s * 1000),
               state.changed_ms + round(policy.interval_s * 1000))


def next_due_ms(policy: ScalePolicy, active: int, state: ScaleState) -> int | None:
    """When the queue should be checked again, sooner than its interval, if its load
    stays as it is: a lasting excess splits, a lasting quiet merges (None: nothing in
    sight)."""
    if state.pinned or not policy.enabled:
        return None
    due = [at for at in (_split_due_ms(policy, state) if active < MAX_SHARDS else None,
                         _merge_due_ms(policy, active, state)) if at is not None]
    return min(due, default=None)
