"""GIVEN a read of the visibility index that found more candidates than its receiver takes
WHEN the next receiver of the shard in this process comes THEN it is handed what was
kept, without a read, for at most HEAD_EVERY_S and never past the next head read; a lost
claim drops what is kept, and only candidates visible by then are handed out."""

from __future__ import annotations

from chalicelib.domain.messages import Candidate
from chalicelib.service.frontier import HEAD_EVERY_S, READ_AHEAD, Frontier
from tests.unit.test_frontier import Clock, Index


def _candidates(n: int) -> list[Candidate]:
    return [Candidate(0, f"m{i:03d}", visible_at=1000 + i, expires_ms=10**12, receive_count=0)
            for i in range(n)]


def _ids(candidates: list[Candidate]) -> list[str]:
    return [c.message_id for c in candidates]


def _setup(n: int = 30) -> tuple[Index, Frontier, Clock]:
    clock = Clock()
    return Index(_candidates(n), limit=READ_AHEAD), Frontier(clock), clock


def test_what_a_receiver_does_not_take_is_handed_to_the_next_without_a_read() -> None:
    index, frontier, _ = _setup()
    with frontier.reserve(index.fetch, None, take=1) as first:
        assert _ids(first.candidates) == ["m000"]
        assert first.items_read == READ_AHEAD and not first.kept
    assert frontier.kept() == READ_AHEAD - 1
    with frontier.reserve(index.fetch, None, take=1) as second:
        assert _ids(second.candidates) == ["m001"]
        assert second.kept and second.items_read == 0 and second.last is None
    assert index.starts == [None]
    assert frontier.kept() == READ_AHEAD - 2


def test_a_steady_receiver_reads_once_per_page() -> None:
    # GIVEN a receiver of one candidate at a time that claims what it is handed
    index, frontier, _ = _setup()
    handed: list[str] = []
    for _ in range(25):
        with frontier.reserve(index.fetch, None, take=1) as page:
            (candidate,) = page.candidates
            handed.append(candidate.message_id)
            index.candidates.remove(candidate)  # claimed: gone from the index
    # THEN every candidate came once, in index order, from one read per ten
    assert handed == [f"m{i:03d}" for i in range(25)]
    assert index.starts == [None, None, None]


def test_kept_candidates_expire_with_the_head_interval() -> None:
    index, frontier, clock = _setup()
    with frontier.reserve(index.fetch, None, take=1):
        pass
    clock.now += HEAD_EVERY_S * 0.9
    with frontier.reserve(index.fetch, None, take=1) as kept:
        assert kept.kept and _ids(kept.candidates) == ["m001"]
    clock.now += HEAD_EVERY_S * 0.1
    # the head is due: what was kept is dropped, the head read again
    with frontier.reserve(index.fetch, None, take=1) as again:
        assert not again.kept and _ids(again.candidates) == ["m000"]
    assert index.starts == [None, None]
    assert frontier.kept() == READ_AHEAD - 1


def test_a_message_visible_again_at_the_head_is_found_within_the_head_interval() -> None:
    index, frontier, clock = _setup()
    with frontier.reserve(index.fetch, None, take=1) as first:
        index.candidates.remove(first.candidates[0])
    index.candidates.insert(0, Candidate(0, "m-redelivered", 10, 10**12, 1))
    with frontier.reserve(index.fetch, None, take=1) as kept:
        assert _ids(kept.candidates) == ["m001"]
    clock.now += HEAD_EVERY_S
    with frontier.reserve(index.fetch, None, take=1) as head:
        assert _ids(head.candidates) == ["m-redelivered"]


def test_forget_drops_what_is_kept_so_the_next_receiver_reads() -> None:
    index, frontier, _ = _setup()
    with frontier.reserve(index.fetch, None, take=1):
        pass
    frontier.forget()  # a claim was lost: the rest is likely stale too
    assert frontier.kept() == 0
    with frontier.reserve(index.fetch, None, take=1) as page:
        assert not page.kept and _ids(page.candidates) == ["m000"]
    assert index.starts == [None, None]


def test_only_candidates_visible_by_the_receivers_time_are_handed_out() -> None:
    index, frontier, _ = _setup()
    with frontier.reserve(index.fetch, None, take=1):
        pass
    # kept: m001 (visible at 1001) to m009 (1009); the receiver's time is 1003
    with frontier.reserve(index.fetch, None, take=2, visible_by=1003) as early:
        assert early.kept and _ids(early.candidates) == ["m001", "m002"]
    with frontier.reserve(index.fetch, None, take=2, visible_by=1003) as short:
        # only m003 is visible by then: not enough kept, so the index is read
        assert not short.kept
    assert index.starts == [None, None]


def test_a_receiver_wanting_more_than_is_kept_reads_and_takes_no_kept_twice() -> None:
    index, frontier, _ = _setup()
    # m000 and m001 claimed, m002..m009 kept: a receiver wanting 10 reads past m001
    with (frontier.reserve(index.fetch, None, take=1) as first,
          frontier.reserve(index.fetch, None, take=1) as second,
          frontier.reserve(index.fetch, None, take=10) as third):
        assert _ids(third.candidates) == [f"m{i:03d}" for i in range(2, 12)]
        assert frontier.kept() == 0
        seen = _ids(first.candidates) + _ids(second.candidates) + _ids(third.candidates)
        assert len(seen) == len(set(seen)) == 12
    assert index.starts == [None, "m001"]


def test_concurrent_receivers_are_handed_disjoint_kept_candidates() -> None:
    index, frontier, _ = _setup()
    with (frontier.reserve(index.fetch, None, take=1) as first,
          frontier.reserve(index.fetch, None, take=1) as second,
          frontier.reserve(index.fetch, None, take=3) as third):
        assert _ids(first.candidates) == ["m000"]
        assert _ids(second.candidates) == ["m001"]
        assert _ids(third.candidates) == ["m002", "m003", "m004"]
        assert frontier.claiming() == 5 and frontier.kept() == 5
    assert index.starts == [None]


def test_a_receiver_continuing_its_own_read_is_not_handed_kept_candidates() -> None:
    index, frontier, _ = _setup()
    with frontier.reserve(index.fetch, None, take=1) as first:
        # its read ends at what it was handed: the rest is kept, so there is more
        assert first.more and first.last is not None and first.last.message_id == "m000"
    with frontier.reserve(index.fetch, first.last, take=1) as more:
        assert not more.kept and _ids(more.candidates) == ["m001"]
    assert index.starts == [None, "m000"]
    assert frontier.kept() == READ_AHEAD - 1  # m002..m010


def test_without_take_a_read_keeps_nothing() -> None:
    index, frontier, _ = _setup()
    with frontier.reserve(index.fetch, None) as page:
        assert len(page.candidates) == READ_AHEAD
    assert frontier.kept() == 0


def test_reads_ask_ahead_only_while_receives_come_steadily() -> None:
    index, frontier, clock = _setup(30)
    # GIVEN a shard not read yet, or last read over HEAD_EVERY_S ago: a read of one asks
    # for one (a slow receiver would pay for entries it never claims)
    assert frontier.read_size(1) == 1
    with frontier.reserve(index.fetch, None, 1):
        pass
    # WHEN the next receive comes within HEAD_EVERY_S THEN it reads ahead
    clock.now += HEAD_EVERY_S / 2
    assert frontier.read_size(1) == READ_AHEAD
    assert frontier.read_size(25) == 25
    clock.now += HEAD_EVERY_S
    assert frontier.read_size(1) == 1
