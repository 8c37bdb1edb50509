"""Long-poll wake-ups: a send wakes receivers waiting in the same container at once.

Receivers in other containers (other Lambdas) find the message at their next poll.
"""

from __future__ import annotations

import threading

from chalicelib.domain import fair_share


class Wakeups:
    """One condition per queue; `notify` after a send, `wait` inside a long poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._condition = threading.Condition(self._lock)

    def generation(self, queue_id: str) -> int:
        """A counter that moves on every send to the queue."""
        with self._lock:
            return self._generations.get(queue_id, 0)

    def notify(self, queue_id: str) -> None:
        """Wake every receiver waiting on this queue."""
        with self._condition:
            self._generations[queue_id] = self._generations.get(queue_id, 0) + 1
            self._condition.notify_all()

    def wait(self, queue_id: str, seen: int, timeout_s: float) -> None:
        """Block until a send after generation `seen`, or the timeout. The waiting request
        gives its place in its account's concurrency share back meanwhile."""
        with fair_share.idle(), self._condition:
            self._condition.wait_for(
                lambda: self._generations.get(queue_id, 0) != seen, timeout=max(timeout_s, 0)
            )
