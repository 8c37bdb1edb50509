"""One cluster's guard: its bulkhead and its circuit breaker. A call is admitted (a breaker
permit and a bulkhead slot, or `ClusterUnavailableError` at once) and gets a lease, which
its end gives back with the outcome and how long the call took. `hooks.py` does this for
every call of a botocore client."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from chalicelib.backend.guard.breaker import CircuitBreaker, Permit
from chalicelib.backend.guard.bulkhead import Bulkhead
from chalicelib.backend.guard.state_store import (
    BreakerState,
    BreakerStateStore,
    InProcessStateStore,
)
from chalicelib.clock import Clock, SystemClock
from chalicelib.domain.exceptions import ClusterUnavailableError
from chalicelib.settings_guard import GuardSettings

OPEN, BUSY = "circuit open", "too many concurrent calls"


class Lease:
    """One admitted call's slot and permit, given back exactly once: by `finish`, or, when
    nothing saw the call end (a hook raised before the guard's own), when the lease is
    dropped. That second way may run in any thread at any moment (it is a finaliser), so
    it takes no lock: it only queues the permit for the guard to settle on its next call."""

    __slots__ = ("_guard", "_open", "permit", "started")

    def __init__(self, guard: ClusterGuard, permit: Permit | None, started: float) -> None:
        self._guard = guard
        self._open = True
        self.permit = permit
        self.started = started

    def finish(self, failed: bool | None) -> None:
        """The call ended: failed True or False, or None when its end says nothing of the
        store (the permit goes back unrecorded)."""
        if self._open:
            self._open = False
            self._guard._settle(self.permit, failed, self.started)

    def __del__(self) -> None:
        if self._open:
            self._open = False
            self._guard._orphans.append(self.permit)


class ClusterGuard:
    """A cluster's bulkhead and circuit breaker (the breaker named `name`, the cluster's
    name unless given)."""

    def __init__(self, cluster: str, settings: GuardSettings | None = None,
                 state_store: BreakerStateStore | None = None, clock: Clock | None = None,
                 timer: Callable[[], float] = time.monotonic, name: str | None = None) -> None:
        self.cluster = cluster
        self.settings = settings or GuardSettings()
        self.bulkhead = Bulkhead(self.settings.bulkhead_max_calls or 0,
                                 self.settings.bulkhead_max_wait_ms / 1000.0)
        self.breaker = CircuitBreaker(
            name or cluster, self.settings, state_store or InProcessStateStore(),
            clock or SystemClock()) if self.settings.breaker_enabled else None
        self._timer = timer
        self._orphans: deque[Permit | None] = deque()
        self._lock = threading.Lock()
        self._rejected = {OPEN: 0, BUSY: 0}

    def admit(self) -> Lease:
        """Leave for one call (finish the lease when it ends), or ClusterUnavailableError:
        the breaker is open, or every slot is taken."""
        self._settle_orphans()
        permit = self.breaker.acquire() if self.breaker is not None else None
        if self.breaker is not None and permit is None:
            self._refuse(OPEN)
        if not self.bulkhead.try_acquire():
            if permit is not None and self.breaker is not None:
                self.breaker.release(permit)
            self._refuse(BUSY)
        return Lease(self, permit, self._timer())

    def _refuse(self, reason: str) -> None:
        with self._lock:
            self._rejected[reason] += 1
        raise ClusterUnavailableError(self.cluster, reason)

    def _settle(self, permit: Permit | None, failed: bool | None, started: float) -> None:
        self.bulkhead.release()
        if permit is None or self.breaker is None:
            return
        if failed is None:
            self.breaker.release(permit)
        else:
            self.breaker.record(permit, failed, self._timer() - started)

    def _settle_orphans(self) -> None:
        while self._orphans:
            try:
                permit = self._orphans.popleft()
            except IndexError:
                return
            self._settle(permit, None, 0.0)

    @property
    def state(self) -> BreakerState:
        """The breaker's state (CLOSED when the breaker is turned off)."""
        return self.breaker.state if self.breaker is not None else BreakerState.CLOSED

    @property
    def in_use(self) -> int:
        """The bulkhead slots taken now."""
        self._settle_orphans()
        return self.bulkhead.in_use

    def snapshot(self) -> dict[str, Any]:
        """The guard's figures, as plain data (for an admin view or a metric)."""
        with self._lock:
            rejected = {"open": self._rejected[OPEN], "busy": self._rejected[BUSY]}
        breaker = self.breaker.snapshot() if self.breaker is not None else {"state": "OFF"}
        return {"cluster": self.cluster, "in_use": self.in_use,
                "limit": self.bulkhead.limit, "rejected": rejected, **breaker}
