"""GIVEN writers of queue records in one process WHEN they move the catalogue's version at
the same time THEN they share moves, and none returns before a move that began after it
asked has landed; a failed move raises in its own writer and the others try again."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from chalicelib.metadata.catalogue_version import CatalogueVersion

WRITERS = 16


class _Store:
    """A version that takes a while to move, and records when each move began and ended."""

    def __init__(self, fail_first: int = 0) -> None:
        self.lock = threading.Lock()
        self.events = 0  # a clock of begins and ends
        self.moves: list[tuple[int, int]] = []  # (began, landed) per landed move
        self.release = threading.Event()
        self.fail_first = fail_first

    def tick(self) -> int:
        with self.lock:
            self.events += 1
            return self.events

    def move(self) -> None:
        began = self.tick()
        self.release.wait(5)
        with self.lock:
            if self.fail_first:
                self.fail_first -= 1
                raise RuntimeError("the store refused")
        self.moves.append((began, self.tick()))


def test_writers_at_the_same_time_share_moves_and_each_is_covered() -> None:
    store = _Store()
    version = CatalogueVersion(store.move)
    asked: dict[int, int] = {}
    returned: dict[int, int] = {}

    def writer(n: int) -> None:
        asked[n] = store.tick()
        version.moved()
        returned[n] = store.tick()

    with ThreadPoolExecutor(WRITERS) as pool:
        futures = [pool.submit(writer, n) for n in range(WRITERS)]
        while len(asked) < WRITERS:  # every writer has asked; the first move is held
            threading.Event().wait(0.01)
        store.release.set()
        for future in futures:
            future.result(timeout=10)
    # THEN far fewer moves than writers: the first alone, then one for all who waited
    assert 1 <= len(store.moves) <= 2
    # AND each writer returned after a move that began after it asked, and had landed
    for n in range(WRITERS):
        assert any(asked[n] < began and landed < returned[n]
                   for began, landed in store.moves), n


def test_a_lone_writer_moves_it_each_time() -> None:
    store = _Store()
    store.release.set()
    version = CatalogueVersion(store.move)
    for _ in range(3):
        version.moved()
    assert len(store.moves) == 3


def test_a_failed_move_raises_in_its_writer_and_the_waiting_ones_move_it_again() -> None:
    store = _Store(fail_first=1)
    version = CatalogueVersion(store.move)
    outcomes: list[str] = []

    def writer() -> None:
        try:
            version.moved()
            outcomes.append("moved")
        except RuntimeError:
            outcomes.append("failed")

    first = threading.Thread(target=writer)
    first.start()
    while store.events == 0:  # the first move has begun and is held
        threading.Event().wait(0.01)
    others = [threading.Thread(target=writer) for _ in range(4)]
    for thread in others:
        thread.start()
    threading.Event().wait(0.2)  # the others have asked, and wait on the held move
    store.release.set()
    for thread in [first, *others]:
        thread.join(10)
    # THEN only the writer whose move failed sees the failure; the others are covered by
    # a move that landed after it
    assert sorted(outcomes) == ["failed"] + ["moved"] * 4
    assert len(store.moves) == 1


def test_a_move_that_raises_anything_leaves_the_version_movable() -> None:
    calls: list[int] = []

    def move() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt

    version = CatalogueVersion(move)
    with pytest.raises(KeyboardInterrupt):
        version.moved()
    version.moved()  # not stuck waiting on a move nobody makes
    assert len(calls) == 2
