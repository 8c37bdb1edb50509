"""GIVEN receivers of one shard in one process WHEN one reads the visibility index while
others finish or wait THEN a receiver that is done never waits for another's read, what
it released during that read is not handed out by it, and a read serves the receivers
waiting behind it."""

from __future__ import annotations

import threading

from chalicelib.backend.store import CandidatePage
from chalicelib.domain.messages import Candidate
from chalicelib.service.frontier import HEAD_EVERY_S, READ_AHEAD, READ_MOST, Frontier
from tests.unit.test_frontier import Clock, Index, _candidates, _ids

WAIT_S = 5.0


class BlockingIndex(Index):
    """An index whose next read blocks until released, and says when it began."""

    def __init__(self, candidates: list[Candidate], limit: int = 3) -> None:
        super().__init__(candidates, limit)
        self.block = False
        self.started = threading.Event()
        self.go_on = threading.Event()

    def fetch(self, start: Candidate | None) -> CandidatePage:
        page = super().fetch(start)
        if self.block:
            self.block = False
            self.started.set()
            assert self.go_on.wait(WAIT_S)
        return page


def test_a_release_does_not_wait_for_another_receivers_read() -> None:
    # GIVEN a receiver holding m000..m002, and another whose read of the index is stuck
    index, frontier = BlockingIndex(_candidates(10)), Frontier(Clock())
    first = frontier.reserve(index.fetch, None)
    held = first.__enter__()
    index.block = True
    second: list[list[str]] = []

    def read_next() -> None:
        with frontier.reserve(index.fetch, None) as page:
            second.append(_ids(page.candidates))

    reader = threading.Thread(target=read_next)
    reader.start()
    assert index.started.wait(WAIT_S)
    # WHEN the first receiver is done with its claims
    released = threading.Thread(target=first.__exit__, args=(None, None, None))
    released.start()
    # THEN it releases at once, while the other read is still under way
    released.join(WAIT_S)
    assert not released.is_alive()
    assert frontier.claiming() == 0
    assert _ids(held.candidates) == ["m000", "m001", "m002"]
    index.go_on.set()
    reader.join(WAIT_S)
    # AND that read, begun before the release, hands out none of what was released
    assert second == [["m003", "m004", "m005"]]


def test_a_read_that_saw_released_candidates_leaves_them_out() -> None:
    # GIVEN a receiver holding m000..m002, and a read from the head (one is due) that
    # will see them while their claims end
    clock = Clock()
    index, frontier = BlockingIndex(_candidates(10)), Frontier(clock)
    holder = frontier.reserve(index.fetch, None)
    assert _ids(holder.__enter__().candidates) == ["m000", "m001", "m002"]
    clock.now += HEAD_EVERY_S
    index.block = True
    seen: list[list[str]] = []

    def read() -> None:
        with frontier.reserve(index.fetch, None) as page:
            seen.append(_ids(page.candidates))

    reader = threading.Thread(target=read)
    reader.start()
    assert index.started.wait(WAIT_S)
    # WHEN they are released during that read (their claims written)
    holder.__exit__(None, None, None)
    index.go_on.set()
    reader.join(WAIT_S)
    # THEN the read, which began at the head, does not hand them out
    assert index.starts[-1] is None
    assert seen == [[]]


def test_a_read_asks_for_the_receivers_waiting_behind_it() -> None:
    # GIVEN a frontier with two receivers waiting for their turn behind a third's
    index, frontier = BlockingIndex(_candidates(100), limit=30), Frontier(Clock())
    assert frontier.read_size(10) == 10
    index.block = True
    results: dict[str, list[str]] = {}

    def receive(name: str, size: int) -> None:
        with frontier.reserve(index.fetch, None, take=10) as page:
            results[name] = _ids(page.candidates)

    first = threading.Thread(target=receive, args=("first", 10))
    first.start()
    assert index.started.wait(WAIT_S)
    waiters = [threading.Thread(target=receive, args=(name, 10)) for name in ("a", "b")]
    for waiter in waiters:
        waiter.start()
    for _ in range(500):
        if frontier.read_size(10) == 30:
            break
        threading.Event().wait(0.01)
    # THEN the next read would ask for them too (bounded)
    assert frontier.read_size(10) == 30
    assert frontier.read_size(READ_MOST) == READ_MOST
    # WHEN the read (of 30, as asked) ends
    index.go_on.set()
    for thread in (first, *waiters):
        thread.join(WAIT_S)
    # THEN the waiters took what it kept, with no read of their own, all disjoint
    taken = [m for ids in results.values() for m in ids]
    assert len(taken) == 30 == len(set(taken))
    assert len(index.starts) == 1
    assert READ_AHEAD <= 30
