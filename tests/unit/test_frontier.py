"""GIVEN receivers of one shard in one process WHEN they read the visibility index
together THEN each gets candidates no other is claiming, and none is starved."""

from __future__ import annotations

from chalicelib.backend.store import CandidatePage
from chalicelib.domain.messages import Candidate
from chalicelib.service.frontier import HEAD_EVERY_S, Frontier


def _candidates(n: int) -> list[Candidate]:
    return [Candidate(0, f"m{i:03d}", visible_at=1000 + i, expires_ms=10**12, receive_count=0)
            for i in range(n)]


class Index:
    """A visibility index: candidates in order; reads record where they started."""

    def __init__(self, candidates: list[Candidate], limit: int = 3) -> None:
        self.candidates = candidates
        self.limit = limit
        self.starts: list[str | None] = []

    def fetch(self, start: Candidate | None) -> CandidatePage:
        self.starts.append(start.message_id if start else None)
        key = (start.visible_at, start.message_id) if start else None
        after = [c for c in self.candidates
                 if key is None or (c.visible_at, c.message_id) > key]
        page = after[: self.limit]
        return CandidatePage(page, len(after) > self.limit, len(page))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _ids(candidates: list[Candidate]) -> list[str]:
    return [c.message_id for c in candidates]


def test_concurrent_readers_get_disjoint_candidates() -> None:
    index, frontier = Index(_candidates(10)), Frontier(Clock())
    with (frontier.reserve(index.fetch, None) as first,
          frontier.reserve(index.fetch, None) as second,
          frontier.reserve(index.fetch, None) as third):
        assert _ids(first.candidates) == ["m000", "m001", "m002"]
        assert _ids(second.candidates) == ["m003", "m004", "m005"]
        assert _ids(third.candidates) == ["m006", "m007", "m008"]
        assert frontier.claiming() == 9
        assert first.items_read == second.items_read == third.items_read == 3
    assert frontier.claiming() == 0
    assert index.starts == [None, "m002", "m005"]


def test_a_reader_goes_back_to_the_head_when_nothing_is_claimed() -> None:
    index, frontier = Index(_candidates(10)), Frontier(Clock())
    with frontier.reserve(index.fetch, None):
        pass
    with frontier.reserve(index.fetch, None) as again:
        assert _ids(again.candidates) == ["m000", "m001", "m002"]


def test_past_an_empty_tail_the_reader_looks_at_the_head() -> None:
    # GIVEN m000..m002 being claimed and m003 left visible by a claim that failed elsewhere
    index, frontier = Index(_candidates(4)), Frontier(Clock())
    with frontier.reserve(index.fetch, None):
        with frontier.reserve(index.fetch, None) as second:
            assert _ids(second.candidates) == ["m003"]
        # WHEN a reader finds nothing past the frontier (m002)
        index.candidates = _candidates(4)[:3] + _candidates(6)[4:]  # m003 gone, m004-5 new
        index.candidates.insert(0, Candidate(0, "m-redelivered", 10, 10**12, 1))
        with frontier.reserve(index.fetch, None) as third:
            # THEN it reads past the frontier, then the head, skipping what is claimed
            assert _ids(third.candidates) == ["m004", "m005"]


def test_a_redelivered_message_before_the_frontier_is_not_starved() -> None:
    clock = Clock()
    index, frontier = Index(_candidates(30)), Frontier(clock)
    with frontier.reserve(index.fetch, None):
        index.candidates.insert(0, Candidate(0, "m-redelivered", 10, 10**12, 1))
        with frontier.reserve(index.fetch, None) as busy:
            assert "m-redelivered" not in _ids(busy.candidates)
        clock.now += HEAD_EVERY_S
        with frontier.reserve(index.fetch, None) as later:
            # the head again: m000 and m001 are still being claimed by the first reader
            assert _ids(later.candidates) == ["m-redelivered"]
            assert later.more and later.last is not None and later.last.message_id == "m001"


def test_a_reader_continuing_its_own_read_starts_after_its_last_candidate() -> None:
    index, frontier = Index(_candidates(10)), Frontier(Clock())
    with frontier.reserve(index.fetch, None) as first:
        pass
    with frontier.reserve(index.fetch, first.last) as more:
        assert _ids(more.candidates) == ["m003", "m004", "m005"]
        assert more.more and more.last is not None and more.last.message_id == "m005"
