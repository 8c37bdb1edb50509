"""Receivers in one process hand each other disjoint candidates, and what a read left.

Every receiver of a shard reads the head of the same visibility index. When several
run at once in one process (the local server, or any long-running host), they would
read the same candidates and race to claim them: each lost race is a wasted
conditional write. A `Frontier` per shard serialises the reads of that process's
receivers and starts each read after the candidates others are still claiming, so
they claim disjoint messages and read no more than they claim. A receiver done with its
claims releases them without waiting for a read under way (a read does not hand out
what was released while it ran: it may have seen it before the claim was written), and
a read asks for the receivers waiting behind it too, who then take what it kept instead
of reading in turn (DMQ's batched lifecycle went from 0.84x to 0.90x of the store's
floor in `bench.request_cost`).

While receives of a shard come steadily (a read less than `HEAD_EVERY_S` before), a read
asks for at least `READ_AHEAD` candidates, and the candidates its receiver does not take
are kept: the next receiver of the shard here is handed them without a read,
so a steady receiver of one message at a time mostly makes one store request (the
claim), not two. Keeping them is safe because a claim is conditional on the
`visible_at` the read saw: one another process claimed or deleted meanwhile is a lost
claim, nothing worse, and the receiver then `forget`s the rest (likely stale too) so
the next receive reads again. Kept candidates live at most `HEAD_EVERY_S` and never
past the next read of the head, which replaces them.

Candidates before the frontier that become visible again (a visibility timeout ran
out, a claim failed) are not starved: a read goes back to the head when nothing is
being claimed and too little is kept, when the tail past the frontier runs dry, and at
least every `HEAD_EVERY_S` seconds. Other processes (other Lambda containers) still
race; the conditional claim keeps that safe, and the contention estimate spreads them.
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
# The fewest candidates a read asks for: a receive of ten takes them all, a receive of
# one leaves nine for the next receives here.
READ_AHEAD = 10
# The most a read asks for, when it reads for the receivers waiting behind it too.
READ_MOST = 100

Fetch = Callable[[Candidate | None], CandidatePage]


@dataclass(frozen=True)
class Reserved:
    """Candidates reserved for one receiver, and where its read of the index ended.

    `kept`: they were kept from an earlier read, so nothing was read (`last` is None).
    `others`: how many visible candidates the read found that other receivers here are
    claiming (left out of `candidates`): the shard is not empty, whatever they hold.
    `from_head`: the read began at the head of the index (not past the candidates other
    receivers here are claiming), so it saw every visible message up to where it ended.
    """

    candidates: list[Candidate]
    last: Candidate | None
    more: bool
    items_read: int
    kept: bool = False
    others: int = 0
    from_head: bool = False


def _order(candidate: Candidate) -> tuple[int, str]:
    """Index order: visible_at, then message id."""
    return candidate.visible_at, candidate.message_id


class Frontier:
    """The candidates this process's receivers of one shard are claiming right now, and
    those a read found that no receiver took (kept, with the time they were read)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()  # the state below; never held across a store call
        self._reading = threading.Lock()  # one reservation (and its read) at a time
        self._claiming: dict[str, Candidate] = {}
        # Released while a read was in flight: that read may have seen them before their
        # claim was written, so it must not hand them out (see `_fresh`).
        self._released: set[str] = set()
        self._in_flight = False
        self._waiting = 0  # receivers waiting for their turn to reserve
        self._kept: dict[str, tuple[Candidate, float]] = {}
        self._clock = clock
        self._head_at = clock()
        self._read_at: float | None = None  # the last read of the index, of any kind

    @contextmanager
    def reserve(self, fetch: Fetch, after: Candidate | None, take: int | None = None,
                visible_by: int | None = None) -> Iterator[Reserved]:
        """Candidates no other receiver here is claiming; released after the block.

        `fetch(start)` reads the index after `start` (None: from the head). `after` is
        where the caller's own previous read ended, when it asks for more. With `take`,
        at most that many are reserved: kept ones when enough are (only those with
        `visible_at <= visible_by`, when given), else a read's first, the rest of which
        is kept. Without it, all of a read's are reserved and none kept.
        """
        with self._lock:
            self._waiting += 1
        with self._reading:
            with self._lock:
                self._waiting -= 1
                reserved = self._from_kept(after, take, visible_by)
            if reserved is None:
                reserved = self._read(fetch, after, take)
            with self._lock:
                for candidate in reserved.candidates:
                    self._claiming[candidate.message_id] = candidate
        try:
            yield reserved
        finally:
            # Without waiting for a read under way: a receiver answers once its claim is
            # written, not after another receiver's read of the index.
            with self._lock:
                for candidate in reserved.candidates:
                    self._claiming.pop(candidate.message_id, None)
                    if self._in_flight:
                        self._released.add(candidate.message_id)

    def claiming(self) -> int:
        """How many candidates are reserved right now."""
        with self._lock:
            return len(self._claiming)

    def read_size(self, limit: int) -> int:
        """How many candidates a read for `limit` should ask for: READ_AHEAD while the
        shard was read less than HEAD_EVERY_S ago (a steady receiver, which uses what a
        read keeps before it expires), else `limit` (a slow one would only pay for index
        entries it never claims); and `limit` more for each receiver waiting for its turn
        now, which then takes what this read keeps instead of reading in turn (at most
        READ_MOST)."""
        with self._lock:
            steady = self._read_at is not None and self._clock() - self._read_at < HEAD_EVERY_S
            waiting = self._waiting
        own = max(limit, READ_AHEAD) if steady else limit
        return max(own, min(READ_MOST, own + limit * waiting))

    def kept(self) -> int:
        """How many candidates are kept for the next receivers."""
        with self._lock:
            return len(self._kept)

    def forget(self) -> None:
        """Drop the kept candidates (a claim was lost, or the shard was emptied)."""
        with self._lock:
            self._kept.clear()

    def _from_kept(self, after: Candidate | None, take: int | None,
                   visible_by: int | None) -> Reserved | None:
        """`take` kept candidates, oldest first; None when a read is due instead."""
        now = self._clock()
        if after is not None or take is None or now - self._head_at >= HEAD_EVERY_S:
            return None
        self._kept = {i: (c, at) for i, (c, at) in self._kept.items()
                      if now - at < HEAD_EVERY_S}
        usable = sorted((c for c, _ in self._kept.values()
                         if visible_by is None or c.visible_at <= visible_by), key=_order)
        if len(usable) < take:
            return None
        handed = usable[:take]
        for candidate in handed:
            del self._kept[candidate.message_id]
        return Reserved(handed, None, False, 0, kept=True)

    def _read(self, fetch: Fetch, after: Candidate | None, take: int | None) -> Reserved:
        """Read the index (under `_reading`, not `_lock`): the candidates a read hands out."""
        with self._lock:
            self._read_at = self._clock()
            start = self._start(after)
            self._in_flight = True
        try:
            page = fetch(start)
            if start is not None and after is None and not page.candidates:
                # Nothing past the frontier: what other receivers left visible is at the head.
                with self._lock:
                    self._to_head(self._clock())
                head = fetch(None)
                with self._lock:
                    return self._fresh(head, page.items_read + head.items_read, take, True)
            with self._lock:
                return self._fresh(page, page.items_read, take, start is None)
        finally:
            with self._lock:
                self._in_flight = False
                self._released.clear()

    def _start(self, after: Candidate | None) -> Candidate | None:
        busy = list(self._claiming.values())
        if after is not None:
            busy.append(after)
        now = self._clock()
        if not busy or (after is None and now - self._head_at >= HEAD_EVERY_S):
            self._to_head(now)
            return None
        return max(busy, key=_order)

    def _to_head(self, now: float) -> None:
        """A read of the head: it replaces whatever was kept."""
        self._head_at = now
        self._kept.clear()

    def _fresh(self, page: CandidatePage, items_read: int, take: int | None,
               from_head: bool) -> Reserved:
        """The read's fresh candidates, up to `take`; the rest is kept. The receiver's
        read then ends at the last it was handed, so that if it goes on, it goes on
        from there (to what was kept, unless someone took it meanwhile)."""
        fresh = [c for c in page.candidates
                 if c.message_id not in self._claiming and c.message_id not in self._released]
        others = len(page.candidates) - len(fresh)
        handed, rest = (fresh, []) if take is None else (fresh[:take], fresh[take:])
        for candidate in handed:
            self._kept.pop(candidate.message_id, None)
        if rest:
            now = self._clock()
            self._kept.update((c.message_id, (c, now)) for c in rest)
            return Reserved(handed, handed[-1] if handed else None, True, items_read,
                            others=others)
        last = page.candidates[-1] if page.candidates else None
        return Reserved(handed, last, page.more, items_read, others=others,
                        from_head=from_head)
