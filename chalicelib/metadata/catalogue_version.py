"""The catalogue's version: one number in the control table that every write of a queue
record moves, so that each process reads the catalogue (a Scan of the queues table) again
only after a change (`QueueRepository.catalogue`).

Writers that move it at the same time in one process share one move: a writer that comes
while a move is on its way waits for the next move, which then stands for every writer
that came before it started. So a burst of CreateQueue calls costs about one update per
store round trip, not one per queue, and a writer still returns only after a move that
began after its own write, as a move of its own would. (On Lambda a container serves one
request at a time, so each write there moves it itself.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class CatalogueVersion:
    """Moves of the version, shared by the writers of one process that come together."""

    def __init__(self, move: Callable[[], None]) -> None:
        self._move = move  # one store update of the version
        self._state = threading.Condition()
        self._asked = 0  # writers that asked for a move, in order of arrival
        self._covered = 0  # the writers the last landed move stands for
        self._moving = False

    def moved(self) -> None:
        """Return once a move of the version that began after this call has landed. A
        move that fails raises in the writer that made it; the writers waiting on it
        then try one of their own."""
        with self._state:
            self._asked += 1
            mine = self._asked
            while self._moving and self._covered < mine:
                self._state.wait()
            if self._covered >= mine:
                return
            self._moving = True
            upto = self._asked
        landed = False
        try:
            self._move()
            landed = True
        finally:
            with self._state:
                self._moving = False
                if landed:
                    self._covered = max(self._covered, upto)
                self._state.notify_all()
