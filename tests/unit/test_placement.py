"""Placement on the headroom-weighted hash ring: shares, full clusters, key movement, splits."""

from __future__ import annotations

from collections import Counter

import pytest

from chalicelib.clusters.placement import ClusterLoad, HashRing, NoClusterAvailable, split_targets

KEYS = [f"000000000000/queue-{i}" for i in range(10_000)]


def _equal(names: str, capacity: float = 100) -> list[ClusterLoad]:
    return [ClusterLoad(n, capacity, 0) for n in names]


def _shares(ring: HashRing) -> dict[str, float]:
    counts = Counter(ring.place(k) for k in KEYS)
    return {name: n / len(KEYS) for name, n in counts.items()}


def _moved(before: HashRing, after: HashRing) -> list[tuple[str, str]]:
    return [(b, a) for b, a in ((before.place(k), after.place(k)) for k in KEYS) if b != a]


def test_cluster_load_properties() -> None:
    load = ClusterLoad("a", 10, 4)
    assert (load.headroom, load.over_capacity, load.accepting) == (6, False, True)
    full = ClusterLoad("b", 10, 12)
    assert (full.headroom, full.over_capacity, full.accepting) == (0, True, False)
    assert not ClusterLoad("c", 0, 0).accepting


def test_placement_is_deterministic() -> None:
    first = [HashRing(_equal("abc")).place(k) for k in KEYS[:200]]
    again = [HashRing(list(reversed(_equal("abc")))).place(k) for k in KEYS[:200]]
    assert first == again
    assert set(first) == {"a", "b", "c"}


def test_shares_follow_headroom() -> None:
    shares = _shares(HashRing([ClusterLoad("a", 100, 25), ClusterLoad("b", 100, 75)]))
    assert abs(shares["a"] - 0.75) < 0.05, shares
    assert abs(shares["b"] - 0.25) < 0.05, shares


def test_equal_clusters_are_balanced() -> None:
    shares = _shares(HashRing(_equal("abcd")))
    assert set(shares) == set("abcd")
    assert all(abs(share - 0.25) < 0.1 for share in shares.values()), shares


def test_an_over_capacity_cluster_receives_nothing() -> None:
    loads = [ClusterLoad("a", 10, 10), ClusterLoad("b", 10, 3), ClusterLoad("c", 0, 0)]
    assert _shares(HashRing(loads)) == {"b": 1.0}


def test_a_tiny_headroom_still_gets_a_vnode() -> None:
    ring = HashRing([ClusterLoad("big", 1e9, 0), ClusterLoad("tiny", 1, 0.999)])
    assert ring.clusters == ["big", "tiny"]
    assert sorted(ring.place_distinct("k", 2)) == ["big", "tiny"]


def test_no_cluster_available_when_all_are_full() -> None:
    ring = HashRing([ClusterLoad("a", 10, 12), ClusterLoad("b", 5, 5), ClusterLoad("c", 0, 0)])
    with pytest.raises(NoClusterAvailable):
        ring.place("k")
    with pytest.raises(NoClusterAvailable):
        ring.place_distinct("k", 2)
    with pytest.raises(NoClusterAvailable):
        HashRing([]).place("k")


def test_adding_a_cluster_moves_only_its_share_to_it() -> None:
    moved = _moved(HashRing(_equal("abc")), HashRing(_equal("abcd")))
    assert len(moved) / len(KEYS) < 0.35
    assert all(after == "d" for _, after in moved)


def test_changing_one_clusters_load_moves_keys_only_to_or_from_it() -> None:
    idle = HashRing(_equal("abcd"))
    busy = HashRing([*_equal("abc"), ClusterLoad("d", 100, 60)])
    moved = _moved(idle, busy)
    assert 0.1 < len(moved) / len(KEYS) < 0.25
    assert all(before == "d" for before, _ in moved)
    assert all(after == "d" for _, after in _moved(busy, idle))


def test_place_distinct_returns_distinct_accepting_clusters() -> None:
    ring = HashRing([*_equal("abc"), ClusterLoad("full", 10, 10)])
    for key in KEYS[:100]:
        picked = ring.place_distinct(key, 5)
        assert sorted(picked) == ["a", "b", "c"]
        assert picked[0] == ring.place(key)
        two = ring.place_distinct(key, 2)
        assert len(set(two)) == 2 and two == picked[:2]
    assert ring.place_distinct("k", 0) == []


def test_split_targets_never_returns_current() -> None:
    loads = _equal("abc")
    ring = HashRing(loads)
    for key in KEYS[:200]:
        current = ring.place(key)
        target = split_targets(key, current, loads)
        assert target is not None and target != current
        assert target == ring.place_distinct(key, 2)[1]


def test_split_targets_skips_full_clusters_and_may_find_none() -> None:
    assert split_targets("k", "a", _equal("a")) is None
    assert split_targets("k", "a", [*_equal("a"), ClusterLoad("b", 10, 10)]) is None
    assert split_targets("k", "a", [ClusterLoad("a", 10, 10), *_equal("b")]) == "b"
    assert split_targets("k", "a", [ClusterLoad("a", 10, 10)]) is None


class _Control:
    """A control repository that counts its reads of the clusters' loads."""

    def __init__(self, loads: list[ClusterLoad]) -> None:
        self._loads = loads
        self.reads = 0

    @property
    def clusters(self) -> list[str]:
        return [c.name for c in self._loads]

    def loads(self) -> list[ClusterLoad]:
        self.reads += 1
        return self._loads


def test_one_cluster_places_every_queue_without_reading_its_load() -> None:
    from chalicelib.clusters.manager import ClusterManager

    for load in (ClusterLoad("only", 100, 0), ClusterLoad("only", 10, 50)):  # full, too
        control = _Control([load])
        manager = ClusterManager(control)  # type: ignore[arg-type]
        assert {manager.place(k) for k in KEYS[:50]} == {"only"}
        assert control.reads == 0


def test_two_clusters_read_their_loads_to_choose() -> None:
    from chalicelib.clusters.manager import ClusterManager

    control = _Control([ClusterLoad("a", 10, 10), ClusterLoad("b", 10, 3)])
    manager = ClusterManager(control)  # type: ignore[arg-type]
    assert {manager.place(k) for k in KEYS[:20]} == {"b"}
    assert control.reads == 20
