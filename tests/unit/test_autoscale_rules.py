"""GIVEN a queue's load over successive checks WHEN the autoscaler's rules decide THEN it
splits only after a sustained excess, at most x2 a step, merges only after a cool-down at
most /2 a step, and leaves a pinned queue alone."""

from __future__ import annotations

from chalicelib.clusters.autoscale_rules import (
    MAX_SHARDS,
    ScalePolicy,
    ScaleState,
    decide,
    next_due_ms,
)
from chalicelib.clusters.shard_load import SLOT_MS, ShardLoad

POLICY = ScalePolicy(target_rate=100, interval_s=10, cooldown_s=60, checks=3)
S = 10_000  # one interval, in ms


def _run(active: int, rates: list[float], state: ScaleState | None = None,
         policy: ScalePolicy = POLICY) -> list[int]:
    """The active shard count after each check."""
    state = state or ScaleState()
    seen = []
    for i, rate in enumerate(rates):
        decision = decide(policy, active, rate, state, i * S)
        active, state = decision.shards, decision.state
        seen.append(active)
    return seen


def test_a_sustained_excess_splits_after_the_checks_in_a_row() -> None:
    assert _run(1, [150, 150]) == [1, 1]
    assert _run(1, [150, 150, 150]) == [1, 1, 2]


def test_a_burst_between_quiet_checks_splits_nothing() -> None:
    assert _run(1, [150, 150, 50, 150, 150, 50, 150]) == [1] * 7


def test_a_split_doubles_at_most_and_aims_at_headroom() -> None:
    # 5x the target from 1 shard: 2, then 4, then 7 (500 / (0.8 * 100))
    assert _run(1, [500] * 9) == [1, 1, 2, 2, 2, 4, 4, 4, 7]
    # a small excess over 4 shards adds what headroom needs, at least one
    assert _run(4, [410] * 3)[-1] == 6
    assert _run(MAX_SHARDS, [10**6] * 3)[-1] == MAX_SHARDS


def test_a_steady_load_within_twenty_percent_changes_nothing() -> None:
    # 7 shards at 500/s: 71/s each; +-20% stays between the marks
    assert set(_run(7, [500, 600, 400, 560, 440] * 6)) == {7}


def test_a_quiet_queue_merges_after_the_cool_down_then_halves_each_check() -> None:
    shards = _run(7, [0.0] * 12)
    # under the low mark since the window before check 0 (its whole window was quiet):
    # the cool-down (6 intervals) ends at check 5
    assert shards[:5] == [7] * 5
    assert shards[5:8] == [4, 2, 1]
    assert shards[8:] == [1] * 4


def test_merging_stops_where_the_shards_would_no_longer_be_quiet() -> None:
    # 4 shards at 60/s in all: 15/s each is under the low mark (20/s); at 2 shards, 30/s
    # each is not, and the queue stays there
    assert _run(4, [60.0] * 12)[6:] == [2] * 6


def test_a_merge_never_leaves_fewer_shards_than_the_load_needs_at_headroom() -> None:
    # with a low mark of half the target, 4 shards at 180/s are quiet (45/s each), but
    # the load needs 3 shards at headroom (180 / 80), not 2
    policy = ScalePolicy(target_rate=100, interval_s=10, cooldown_s=60, low_fraction=0.5)
    assert _run(4, [180.0] * 8, policy=policy)[-1] == 3


def test_load_between_the_marks_restarts_the_cool_down() -> None:
    # 4 shards: 100/s in all is 25/s each, over the low mark
    shards = _run(4, [0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0])
    assert set(shards) == {4}
    assert _run(4, [0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0])[-2:] == [2, 1]


def test_a_pinned_queue_or_a_disabled_policy_is_left_alone() -> None:
    assert _run(1, [10**4] * 5, ScaleState(pinned=True)) == [1] * 5
    off = ScalePolicy(target_rate=100, enabled=False)
    assert _run(8, [0] * 50, policy=off) == [8] * 50


def test_the_quiet_time_starts_at_the_last_busy_slot_and_merges_fall_due_on_time() -> None:
    # GIVEN a queue of 4 shards whose first quiet check sees its load stop 3 s into the
    # window (the slots say so): the cool-down counts from then, not from the check
    state = ScaleState()
    first = decide(POLICY, 4, 0.0, state, 50_000, 40_000, quiet_since_ms=43_000)
    assert first.state.below_since_ms == 43_000
    # THEN the first merge falls due at the cool-down's end, the next an interval later
    assert next_due_ms(POLICY, 4, first.state) == 103_000
    assert decide(POLICY, 4, 0.0, first.state, 102_999).shards == 4
    merged = decide(POLICY, 4, 0.0, first.state, 103_000)
    assert merged.shards == 2 and next_due_ms(POLICY, 2, merged.state) == 113_000
    # AND a check in between (the interval's own tick) does not halve again early
    assert decide(POLICY, 2, 0.0, merged.state, 110_000).shards == 2
    assert decide(POLICY, 2, 0.0, merged.state, 113_000).shards == 1
    # AND nothing is due for one shard, a busy queue, or a pinned one
    assert next_due_ms(POLICY, 1, merged.state) is None
    assert next_due_ms(POLICY, 4, ScaleState()) is None
    assert next_due_ms(POLICY, 4, ScaleState(below_since_ms=0, pinned=True)) is None


def test_a_loads_quiet_time_is_its_trailing_run_of_quiet_slots() -> None:
    load = ShardLoad(0.0, 0.0, ((50.0, 40.0), (12.0, 9.0), (0.0, 3.0), (0.0, 0.0)), 100)
    assert load.quiet_since_ms(14.0) == 101 * SLOT_MS  # 12/s is under 14/s
    assert load.quiet_since_ms(10.0) == 102 * SLOT_MS
    assert ShardLoad(0.0, 0.0, ((0.0, 0.0), (20.0, 0.0)), 7).quiet_since_ms(14.0) is None
    both = load + ShardLoad(0.0, 0.0, ((0.0, 0.0), (5.0, 0.0), (0.0, 0.0), (0.0, 0.0)), 100)
    assert both.slots[1] == (17.0, 9.0) and both.quiet_since_ms(14.0) == 102 * SLOT_MS


def test_an_excess_splits_once_it_has_lasted_the_checks_intervals_from_its_first_busy_slot(
) -> None:
    # GIVEN a check that sees the load over the target since a slot 4 s before its window
    # ended (the slots say so), with 3 checks of 10 s to wait
    first = decide(POLICY, 2, 500.0, ScaleState(), 50_000, 38_000, busy_since_ms=44_000)
    assert first.shards == 2 and first.state.above_since_ms == 44_000
    # THEN the split falls due 30 s after the excess began, not at the third check
    assert next_due_ms(POLICY, 2, first.state) == 74_000
    assert decide(POLICY, 2, 500.0, first.state, 73_999).shards == 2
    split = decide(POLICY, 2, 500.0, first.state, 74_000)
    assert split.shards == 4 and split.state.above_since_ms is None
    # AND an excess never counts from before the last change
    after = decide(POLICY, 4, 900.0, split.state, 80_000, 68_000, busy_since_ms=60_000)
    assert after.state.above_since_ms == 74_000
    # AND a check under the target forgets the excess
    calm = decide(POLICY, 2, 150.0, first.state, 60_000)
    assert calm.state.above_since_ms is None and next_due_ms(POLICY, 2, calm.state) is None


def test_a_loads_busy_time_is_its_trailing_run_of_busy_slots() -> None:
    load = ShardLoad(0.0, 0.0, ((0.0, 0.0), (30.0, 2.0), (10.0, 50.0), (60.0, 0.0)), 10)
    assert load.busy_since_ms(20.0) == 11 * SLOT_MS
    assert load.busy_since_ms(55.0) == 13 * SLOT_MS
    assert load.busy_since_ms(60.0) is None
