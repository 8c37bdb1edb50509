"""Long-poll wake-ups: a change to a queue wakes the receivers waiting on it at once.

Each queue being waited on has a condition of its own, so a send wakes only that queue's
long polls, not every waiting request of the process (a thousand waits on a thousand
queues cost nothing while nothing arrives). Receivers in other processes (other Lambdas)
learn of a change from their own stream reader, where they have one (the local server),
or find it at their next poll.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from chalicelib.domain import fair_share


@dataclass
class _Waiting:
    """The receivers waiting on one queue."""

    condition: threading.Condition
    count: int = 0


class Wakeups:
    """A generation counter per queue; `notify` after a change, `wait` inside a long poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._total = 0  # receivers waiting now, on every queue

    def generation(self, queue_id: str) -> int:
        """A counter that moves on every change `notify` is told of."""
        with self._lock:
            return self._generations.get(queue_id, 0)

    def notify(self, queue_id: str, messages: int | None = None) -> None:
        """Wake the receivers waiting on this queue (and no other): as many as `messages`
        new messages can serve, the longest waiting first (a receive that finds nothing
        left sleeps on), or all of them."""
        with self._lock:
            self._generations[queue_id] = self._generations.get(queue_id, 0) + 1
            waiting = self._waiting.get(queue_id)
            if waiting is None:
                return
            if messages is None:
                waiting.condition.notify_all()
            else:
                waiting.condition.notify(messages)

    def waiting(self) -> int:
        """How many receivers wait now, on every queue."""
        with self._lock:
            return self._total

    def wait(self, queue_id: str, seen: int, timeout_s: float) -> None:
        """Block until a change after generation `seen`, or the timeout. The waiting request
        gives its place in its account's concurrency share back meanwhile."""
        with fair_share.idle(), self._lock:
            waiting = self._waiting.get(queue_id)
            if waiting is None:
                waiting = self._waiting[queue_id] = _Waiting(threading.Condition(self._lock))
            waiting.count += 1
            self._total += 1
            try:
                waiting.condition.wait_for(
                    lambda: self._generations.get(queue_id, 0) != seen,
                    timeout=max(timeout_s, 0),
                )
            finally:
                waiting.count -= 1
                self._total -= 1
                if not waiting.count:
                    del self._waiting[queue_id]
