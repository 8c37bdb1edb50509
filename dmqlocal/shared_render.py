"""One rendered answer shared by every caller, made by one thread at a time and not often.

`GET /metrics` reads every queue's gauges from the store: with many queues that is long
work, and each scraper asking for it again would multiply it. Here a caller gets the last
rendering while it is fresh: younger than `fresh_s`, and than `duty` times what it took to
make (so rendering takes at most about a `duty`-th of the time, whatever the number of
queues), but never past `max_age_s` less that time, so that its figures are at most about
`max_age_s` old. When it is stale, one caller renders anew: in its own thread when the last
rendering was quick (under `wait_budget_s`: the caller gets fresh figures), else in the
background while every caller keeps getting the last one. Callers that come while a
rendering is under way get the last one, or, before there is any, wait for that one
rendering to finish: concurrent callers never render twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

DUTY = 10.0
WAIT_BUDGET_S = 0.5
MAX_AGE_S = 15.0  # a rendering is kept no longer than this less what it took to make
logger = logging.getLogger("dmq.metrics")


class SharedRender:
    """Renders on demand, at most once per freshness interval (`fresh_s` <= 0: always)."""

    def __init__(self, render: Callable[[], bytes], fresh_s: float, duty: float = DUTY,
                 wait_budget_s: float = WAIT_BUDGET_S, max_age_s: float = MAX_AGE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._render = render
        self._fresh_s = fresh_s
        self._duty = duty
        self._wait_budget_s = wait_budget_s
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._latest: tuple[float, bytes] | None = None  # (made at, body)
        self._took_s = 0.0
        self._rendering = False
        self.renders = 0

    def _fresh(self, made_at: float) -> bool:
        if self._fresh_s <= 0:
            return False
        kept = min(max(self._fresh_s, self._duty * self._took_s),
                   max(self._fresh_s, self._max_age_s - self._took_s))
        return self._clock() - made_at < kept

    def get(self) -> bytes:
        """The latest rendering, or a new one when it is stale (see the module)."""
        while True:
            with self._lock:
                latest = self._latest
                if latest is not None and self._fresh(latest[0]):
                    return latest[1]
                if self._rendering:
                    if latest is not None:
                        return latest[1]
                    self._done.wait()
                    continue
                self._rendering = True
                background = latest is not None and self._took_s > self._wait_budget_s
            if latest is not None and background:
                threading.Thread(target=self._render_quietly, name="dmq-metrics-render",
                                 daemon=True).start()
                return latest[1]
            return self._make()

    def _make(self) -> bytes:
        start = self._clock()
        try:
            body = self._render()
        except BaseException:
            with self._lock:
                self._rendering = False
                self._done.notify_all()
            raise
        end = self._clock()
        with self._lock:
            self._latest, self._took_s = (end, body), end - start
            self._rendering = False
            self.renders += 1
            self._done.notify_all()
        return body

    def _render_quietly(self) -> None:
        try:
            self._make()
        except Exception:  # the last rendering stays; the next stale call tries again
            logger.exception("rendering the metrics failed")
