"""Resizing a queue's shard map: scale out, scale in (drain), take back, split."""

from __future__ import annotations

import pytest

from chalicelib.clusters.shards import MAX_SHARDS, resize, split
from chalicelib.domain.queues import Shard, shards_from_text, shards_to_text


def _states(shards: tuple[Shard, ...]) -> list[tuple[int, str, bool]]:
    return [(s.id, s.cluster, s.draining) for s in shards]


def test_a_new_queue_gets_ids_from_zero_on_its_cluster() -> None:
    assert _states(resize((), 3, "c1", 5)) == [(0, "c1", False), (1, "c1", False),
                                               (2, "c1", False)]


def test_scaling_in_marks_the_highest_active_shards_draining_with_the_time() -> None:
    shards = resize(resize((), 4, "default", 0), 2, "default", 1234)
    assert _states(shards) == [(0, "default", False), (1, "default", False),
                               (2, "default", True), (3, "default", True)]
    assert shards[2].draining_since_ms == 1234


def test_scaling_out_takes_back_draining_shards_before_adding_new_ones() -> None:
    shards = resize(resize((), 4, "a", 0), 1, "a", 10)
    grown = resize(shards, 3, "b", 20)
    assert _states(grown) == [(0, "a", False), (1, "a", False), (2, "a", False),
                              (3, "a", True)]
    assert _states(resize(grown, 5, "b", 30))[-1] == (4, "b", False)


def test_resizing_to_the_same_count_changes_nothing() -> None:
    shards = resize((), 2, "a", 0)
    assert resize(shards, 2, "a", 99) == shards


@pytest.mark.parametrize("count", [0, MAX_SHARDS + 1])
def test_counts_outside_the_limits_are_refused(count: int) -> None:
    with pytest.raises(ValueError):
        resize((), count, "a", 0)


def test_split_adds_as_many_shards_on_the_other_cluster() -> None:
    shards = split(resize((), 2, "a", 0), "b")
    assert _states(shards) == [(0, "a", False), (1, "a", False), (2, "b", False),
                               (3, "b", False)]


def test_the_shard_map_round_trips_through_its_stored_text() -> None:
    shards = resize(resize((), 3, "a", 0), 2, "a", 77)
    assert shards_from_text(shards_to_text(shards)) == shards
