"""The consistent-hash ring: weighted by headroom, skips full clusters, moves few keys."""

from __future__ import annotations

from collections import Counter

import pytest

from chalicelib.metadata.placement import ClusterLoad, HashRing, NoClusterAvailable, split_targets

KEYS = [f"000000000000/queue-{i}" for i in range(10_000)]


def _shares(ring: HashRing) -> dict[str, float]:
    counts = Counter(ring.place(k) for k in KEYS)
    return {name: n / len(KEYS) for name, n in counts.items()}


def test_placement_is_deterministic() -> None:
    loads = [ClusterLoad("a", 10, 0), ClusterLoad("b", 10, 0)]
    assert [HashRing(loads).place(k) for k in KEYS[:50]] == [
        HashRing(loads).place(k) for k in KEYS[:50]]


def test_equal_clusters_share_evenly() -> None:
    shares = _shares(HashRing([ClusterLoad(n, 100, 0) for n in "abc"]))
    assert all(abs(share - 1 / 3) < 0.1 for share in shares.values()), shares


def test_shares_follow_headroom() -> None:
    shares = _shares(HashRing([ClusterLoad("a", 100, 25), ClusterLoad("b", 100, 75)]))
    assert abs(shares["a"] - 0.75) < 0.05, shares


def test_a_full_cluster_gets_nothing_and_no_cluster_at_all_is_an_error() -> None:
    shares = _shares(HashRing([ClusterLoad("a", 10, 10), ClusterLoad("b", 10, 3)]))
    assert shares == {"b": 1.0}
    with pytest.raises(NoClusterAvailable):
        HashRing([ClusterLoad("a", 10, 12), ClusterLoad("b", 0, 0)]).place("k")


def test_adding_a_cluster_moves_about_its_share_of_keys() -> None:
    three = HashRing([ClusterLoad(n, 100, 0) for n in "abc"])
    four = HashRing([ClusterLoad(n, 100, 0) for n in "abcd"])
    moved = sum(three.place(k) != four.place(k) for k in KEYS) / len(KEYS)
    assert moved < 0.35, moved
    assert all(four.place(k) == "d" for k in KEYS if three.place(k) != four.place(k))


def test_place_distinct_and_split_targets() -> None:
    loads = [ClusterLoad(n, 100, 0) for n in "abc"]
    picked = HashRing(loads).place_distinct("k", 5)
    assert sorted(picked) == ["a", "b", "c"]
    target = split_targets("k", "a", loads)
    assert target in ("b", "c")
    assert split_targets("k", "a", [ClusterLoad("a", 100, 0)]) is None
