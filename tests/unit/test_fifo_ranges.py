"""FIFO shards as ranges of the group hash: each group has exactly one shard taking its
sends at any instant, a resharding switches them all at one time, new shards wait for
their ancestors, and a group's dedup slot never moves."""

from __future__ import annotations

import random

import pytest

from chalicelib.domain.queues import Shard, shards_from_text, shards_to_text
from chalicelib.fifo import ranges as fifo_ranges
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.ranges import Range

GROUPS = [f"group-{i}" for i in range(400)]


def _owners(shards: tuple[Shard, ...], now_ms: int) -> dict[str, int]:
    return {g: fifo_ranges.owner(shards, g, now_ms).id for g in GROUPS}


def test_a_queue_never_resharded_keeps_its_original_layout() -> None:
    shards = (Shard(0), Shard(1), Shard(2))
    assert [(s.rem, s.mod, s.base) for s in fifo_ranges.ranged(shards)] == [
        (0, 3, 3), (1, 3, 3), (2, 3, 3)]
    assert _owners(shards, 5) == {g: fifo.shard_slot(g, 3) for g in GROUPS}


def test_a_split_switches_every_group_at_one_instant() -> None:
    before = (Shard(0),)
    after = fifo_ranges.resize(before, 2, "default", 10_000)
    assert [(s.id, s.draining_since_ms, s.rem, s.mod, s.parents, s.opens_at_ms)
            for s in after] == [(0, 10_000, 0, 1, (), 0), (1, 0, 0, 2, (0,), 10_000),
                                (2, 0, 1, 2, (0,), 10_000)]
    assert set(_owners(after, 9_999).values()) == {0}
    at_switch = _owners(after, 10_000)
    assert set(at_switch.values()) == {1, 2}
    assert all(at_switch[g] == 1 + fifo.group_hash(g) % 2 for g in GROUPS)


@pytest.mark.parametrize("seed", range(5))
def test_every_group_has_one_owner_through_any_resizing(seed: int) -> None:
    rng = random.Random(seed)
    shards: tuple[Shard, ...] = tuple(Shard(i) for i in range(rng.choice([1, 2, 3, 4])))
    base = len(shards)
    now = 1_000
    for _ in range(12):
        now += rng.choice([500, 6_000])
        shards = fifo_ranges.resize(shards, rng.randint(1, 16), "default", now + 6_000)
        for at in (now, now + 5_999, now + 6_000, now + 7_000):
            for group in GROUPS[:100]:
                hashed = fifo.group_hash(group)
                takers = [s for s in shards if fifo_ranges.sends_at(s, at)
                          and fifo_ranges.range_of(s).holds(hashed)]
                assert len(takers) == 1, (group, at, shards)
        assert all(s.id <= fifo_ranges.MAX_SHARD_ID for s in shards)
        assert fifo_ranges.base_of(shards) == base
        assert shards_from_text(shards_to_text(shards)) == shards


def test_merges_take_the_narrowest_siblings_and_odd_sets_merge_whole() -> None:
    four = fifo_ranges.resize((Shard(0),), 4, "default", 1)
    two = fifo_ranges.resize(four, 2, "default", 2)
    assert sorted((s.rem, s.mod) for s in two if not s.draining) == [(0, 2), (1, 2)]
    three = (Shard(0), Shard(1), Shard(2))
    # three original shards merge only all at once: two are not reachable, one is
    assert sum(not s.draining for s in fifo_ranges.resize(three, 2, "default", 5)) == 3
    one = fifo_ranges.resize(three, 1, "default", 5)
    assert [(s.rem, s.mod, s.parents) for s in one if not s.draining] == [(0, 1, (0, 1, 2))]


def test_a_resizing_in_one_step_leaves_no_shard_that_never_opens() -> None:
    eight = fifo_ranges.resize((Shard(0),), 8, "default", 100)
    assert [s.id for s in eight if s.draining] == [0]
    assert {s.parents for s in eight if not s.draining} == {(0,)}
    assert sorted(Range(s.rem, s.mod).rem for s in eight if not s.draining) == list(range(8))


def test_ancestors_follow_parents_closed_when_the_child_opened() -> None:
    split = fifo_ranges.resize((Shard(0),), 2, "default", 100)
    child = split[1]
    assert [a.id for a in fifo_ranges.ancestors(split, child)] == [0]
    again = fifo_ranges.resize(split, 4, "default", 200)
    grandchild = next(s for s in again if s.parents == (1,))
    assert sorted(a.id for a in fifo_ranges.ancestors(again, grandchild)) == [0, 1]
    # a shard that took a forgotten parent's id later is nobody's ancestor
    forgotten = (*tuple(s for s in split if s.id != 0), Shard(0, opens_at_ms=70000))
    assert fifo_ranges.ancestors(forgotten, child) == ()


def test_a_groups_dedup_slot_never_moves() -> None:
    shards: tuple[Shard, ...] = (Shard(0), Shard(1), Shard(2), Shard(3))
    slots = {g: fifo_ranges.dedup_slot(shards, g) for g in GROUPS}
    for count, at in ((8, 10), (2, 20), (1, 30), (5, 40)):
        shards = fifo_ranges.resize(shards, count, "default", at)
        assert {g: fifo_ranges.dedup_slot(shards, g) for g in GROUPS} == slots
