"""Long-poll wake-ups: a change to a queue wakes the receivers waiting on it at once.

Each queue being waited on has a condition of its own, so a send wakes only that queue's
long polls, not every waiting request of the process (a thousand waits on a thousand
queues cost nothing while nothing arrives). Receivers in other processes (other Lambdas)
learn of a change from their own stream reader, where they have one (the local server),
or find it at their next poll.

A receiver waits in its thread (`wait`), or without one (`watch`: a long poll the local
server parks, `chalicelib/service/parking.py`): its callback is called once, at the change
or, from the one timer thread, at its timeout. A change wakes as many waiting receivers
of either kind as it can serve, the longest waiting first.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from chalicelib.domain import fair_share

logger = logging.getLogger("dmq.wakeups")


@dataclass(eq=False)
class _Watch:
    """A receiver waiting without a thread: called back once."""

    queue_id: str
    callback: Callable[[], None]
    done: bool = False


@dataclass
class _Waiting:
    """The receivers waiting on one queue: in threads (`count`), and watches."""

    condition: threading.Condition
    count: int = 0
    watches: deque[_Watch] = field(default_factory=deque)


class Wakeups:
    """A generation counter per queue; `notify` after a change, `wait` inside a long poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._total = 0  # receivers waiting now, on every queue
        self._due: list[tuple[float, int, _Watch]] = []  # the watches' timeouts, a heap
        self._order = itertools.count()
        self._timer: threading.Thread | None = None
        self._timer_wake = threading.Condition(self._lock)

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
            called = self._take_watches(queue_id, waiting, messages)
        _call(called)

    def _take_watches(self, queue_id: str, waiting: _Waiting,
                      messages: int | None) -> list[_Watch]:
        """Up to `messages` of the queue's watches (all of them for None), done now."""
        taken: list[_Watch] = []
        while waiting.watches and (messages is None or len(taken) < messages):
            watch = waiting.watches.popleft()
            watch.done = True
            taken.append(watch)
        self._total -= len(taken)
        if not waiting.count and not waiting.watches:
            del self._waiting[queue_id]
        return taken

    def watch(self, queue_id: str, seen: int, timeout_s: float,
              callback: Callable[[], None]) -> None:
        """Call `callback` once: after a change after generation `seen` (at once when one
        came already), or when `timeout_s` has passed. It is called from the thread that
        notifies, or the timer's, and must not block."""
        watch = _Watch(queue_id, callback)
        with self._lock:
            if self._generations.get(queue_id, 0) != seen:
                watch.done = True
            else:
                waiting = self._waiting.get(queue_id)
                if waiting is None:
                    waiting = self._waiting[queue_id] = _Waiting(threading.Condition(self._lock))
                waiting.watches.append(watch)
                self._total += 1
                heapq.heappush(self._due, (time.monotonic() + max(timeout_s, 0),
                                           next(self._order), watch))
                self._start_timer()
                self._timer_wake.notify()
        if watch.done:
            _call([watch])

    def _start_timer(self) -> None:
        if self._timer is None:
            self._timer = threading.Thread(target=self._time_out, name="dmq-wakeups",
                                           daemon=True)
            self._timer.start()

    def _time_out(self) -> None:
        """The timer thread: calls back each watch whose timeout has come."""
        while True:
            with self._lock:
                now = time.monotonic()
                expired: list[_Watch] = []
                while self._due and (self._due[0][0] <= now or self._due[0][2].done):
                    _, _, watch = heapq.heappop(self._due)
                    if not watch.done:
                        self._drop_watch(watch)
                        expired.append(watch)
                if not expired:
                    self._timer_wake.wait(self._due[0][0] - now if self._due else None)
            _call(expired)

    def _drop_watch(self, watch: _Watch) -> None:
        """A watch whose timeout came: out of its queue's receivers."""
        watch.done = True
        self._total -= 1
        waiting = self._waiting.get(watch.queue_id)
        if waiting is None:
            return
        waiting.watches.remove(watch)
        if not waiting.count and not waiting.watches:
            del self._waiting[watch.queue_id]

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
                if not waiting.count and not waiting.watches:
                    del self._waiting[queue_id]


def _call(watches: list[_Watch]) -> None:
    """Call the watches back (outside the lock); a failing callback is logged."""
    for watch in watches:
        try:
            watch.callback()
        except Exception:
            logger.exception("a long-poll wake-up failed")
