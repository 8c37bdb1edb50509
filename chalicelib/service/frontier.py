"""Receivers in one process hand each other disjoint candidates.

Every receiver of a shard reads the head of the same visibility index. When several
run at once in one process (the local server, or any long-running host), they would
read the same candidates and race to claim them: each lost race is a wasted
conditional write. A `Frontier` per shard serialises the reads of that process's
receivers and starts each read after the candidates others are still claiming, so
they claim disjoint messages and read no more than they claim.

Candidates before the frontier that become visible again (a visibility timeout ran
out, a claim failed) are not starved: a read goes back to the head of the index when
nothing is being claimed, when the tail past the frontier runs dry, and at least
every `HEAD_EVERY_S` seconds. Other processes (other Lambda containers) still race;
the conditional claim keeps that safe, and the contention estimate spreads them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from chalicelib.backend.store import CandidatePage
from chalicelib.domain.messages import Candidate

HEAD_EVERY_S = 1.0

Fetch = Callable[[Candidate | None], CandidatePage]


@dataclass(frozen=True)
class Reserved:
    """Candidates reserved for one receiver, and where its read of the index ended."""

    candidates: list[Candidate]
    last: Candidate | None
    more: bool
    items_read: int


def _order(candidate: Candidate) -> tuple[int, str]:
    """Index order: visible_at, then message id."""
    return candidate.visible_at, candidate.message_id


class Frontier:
    """The candidates this process's receivers of one shard are claiming right now."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._claiming: dict[str, Candidate] = {}
        self._clock = clock
        self._head_at = clock()

    @contextmanager
    def reserve(self, fetch: Fetch, after: Candidate | None) -> Iterator[Reserved]:
        """Read candidates no other receiver here is claiming; release them after the block.

        `fetch(start)` reads the index after `start` (None: from the head). `after` is
        where the caller's own previous read ended, when it asks for more.
        """
        with self._lock:
            reserved = self._read(fetch, after)
            for candidate in reserved.candidates:
                self._claiming[candidate.message_id] = candidate
        try:
            yield reserved
        finally:
            with self._lock:
                for candidate in reserved.candidates:
                    self._claiming.pop(candidate.message_id, None)

    def claiming(self) -> int:
        """How many candidates are reserved right now."""
        with self._lock:
            return len(self._claiming)

    def _read(self, fetch: Fetch, after: Candidate | None) -> Reserved:
        start = self._start(after)
        page = fetch(start)
        if start is not None and after is None and not page.candidates:
            # Nothing past the frontier: what other receivers left visible is at the head.
            self._head_at = self._clock()
            head = fetch(None)
            return self._fresh(head, page.items_read + head.items_read)
        return self._fresh(page, page.items_read)

    def _start(self, after: Candidate | None) -> Candidate | None:
        busy = list(self._claiming.values())
        if after is not None:
            busy.append(after)
        now = self._clock()
        if not busy or (after is None and now - self._head_at >= HEAD_EVERY_S):
            self._head_at = now
            return None
        return max(busy, key=_order)

    def _fresh(self, page: CandidatePage, items_read: int) -> Reserved:
        fresh = [c for c in page.candidates if c.message_id not in self._claiming]
        last = page.candidates[-1] if page.candidates else None
        return Reserved(fresh, last, page.more, items_read)
