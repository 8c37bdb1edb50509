"""A circuit breaker for one cluster's store, by resilience4j's rules.

CLOSED: every call goes through and its outcome (failed or not, slow or not) goes into a
count-based window of the last `window_calls` calls. Once the window holds
`minimum_calls`, the breaker opens when the failure rate or the slow-call rate reaches its
threshold. OPEN: every call is refused until `open_wait_ms` has passed, then the next call
turns it HALF_OPEN. HALF_OPEN: `half_open_calls` probes go through and the rest are
refused; once all have ended, the breaker closes if both rates over the probes are under
their thresholds, else opens again. Half open for longer than `half_open_max_wait_ms`, it
opens again.

The breaker's lock is held only while its state or window changes, never during a store
call, so any number of threads can be inside guarded calls at once. A change of state is
written to the state store (conditionally, after the lock is let go); the state others
wrote is read every `sync_ms`, so every instance of one cluster's breaker agrees.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from chalicelib.backend.guard.state_store import (
    INITIAL,
    BreakerState,
    BreakerStateStore,
    SharedState,
)
from chalicelib.backend.guard.window import OutcomeWindow
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import StoreError
from chalicelib.settings_guard import GuardSettings

logger = logging.getLogger("dmq.guard")


@dataclass(frozen=True)
class Permit:
    """Leave for one call, given in one breaker state: an outcome recorded after the state
    changed belongs to no window and is dropped."""

    generation: int


@dataclass(frozen=True)
class _Change:
    expected_version: int
    new: SharedState


class CircuitBreaker:
    """One cluster's breaker in this instance, kept in step with the others through
    `store`."""

    def __init__(self, name: str, settings: GuardSettings, store: BreakerStateStore,
                 clock: Clock, instance: str | None = None) -> None:
        self.name = name
        self.instance = instance or uuid.uuid4().hex[:12]
        self._settings = settings
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._shared = INITIAL
        self._generation = 0
        self._window = OutcomeWindow(settings.window_calls)
        self._probes = OutcomeWindow(settings.half_open_calls)
        self._probes_left = 0
        self._pending: deque[_Change] = deque()
        self._synced_ms: int | None = None
        self._syncing = False

    @property
    def state(self) -> BreakerState:
        """The state this instance acts on now."""
        with self._lock:
            return self._shared.state

    def snapshot(self) -> dict[str, Any]:
        """The state and the current window, as plain data."""
        with self._lock:
            return {"state": self._shared.state.value, "since_ms": self._shared.since_ms,
                    "version": self._shared.version, "calls": self._window.calls,
                    "failure_rate_pct": round(self._window.failure_rate_pct, 1),
                    "slow_call_rate_pct": round(self._window.slow_call_rate_pct, 1)}

    # -- calls ---------------------------------------------------------------------------
    def acquire(self) -> Permit | None:
        """Leave to make a call now, or None: the breaker is open, or half open with every
        probe out (or held by another instance)."""
        now = self._clock.now_ms()
        self._sync(now)
        with self._lock:
            self._advance(now)
        # A change time made is written before any permit: an instance whose turn to
        # half-open lost to another's gives no probe.
        self._persist()
        with self._lock:
            return self._permit()

    def release(self, permit: Permit) -> None:
        """Give back a permit whose call has no outcome to record: it was never made, or it
        ended in a way that says nothing about the store."""
        with self._lock:
            if (permit.generation == self._generation
                    and self._shared.state is BreakerState.HALF_OPEN):
                self._probes_left += 1

    def record(self, permit: Permit, failed: bool, duration_s: float) -> None:
        """The outcome of a permitted call: it failed or not, and took `duration_s`."""
        slow = duration_s * 1000.0 > self._settings.slow_call_ms
        now = self._clock.now_ms()
        with self._lock:
            if permit.generation != self._generation:
                return
            if self._shared.state is BreakerState.CLOSED:
                self._window.add(failed, slow)
                if self._tripped(self._window, self._settings.effective_minimum_calls):
                    self._move(BreakerState.OPEN, now, self._why(self._window))
            elif self._shared.state is BreakerState.HALF_OPEN:
                self._probes.add(failed, slow)
                if self._probes.calls >= self._settings.half_open_calls:
                    tripped = self._tripped(self._probes, self._settings.half_open_calls)
                    self._move(BreakerState.OPEN if tripped else BreakerState.CLOSED, now,
                               self._why(self._probes))
        self._persist()

    # -- under the lock --------------------------------------------------------------------
    def _tripped(self, window: OutcomeWindow, minimum: int) -> bool:
        if window.calls < minimum:
            return False
        return (window.failure_rate_pct >= self._settings.failure_rate_pct
                or window.slow_call_rate_pct >= self._settings.slow_call_rate_pct)

    def _advance(self, now: int) -> None:
        """The changes time makes: OPEN long enough turns HALF_OPEN; HALF_OPEN too long
        opens again."""
        shared = self._shared
        if (shared.state is BreakerState.OPEN
                and now >= shared.since_ms + self._settings.open_wait_ms):
            self._move(BreakerState.HALF_OPEN, now)
        elif (shared.state is BreakerState.HALF_OPEN
              and now >= shared.since_ms + self._settings.half_open_max_wait_ms):
            self._move(BreakerState.OPEN, now)

    def _permit(self) -> Permit | None:
        state = self._shared.state
        if state is BreakerState.CLOSED:
            return Permit(self._generation)
        if state is BreakerState.HALF_OPEN and self._probes_left > 0:
            self._probes_left -= 1
            return Permit(self._generation)
        return None

    def _why(self, window: OutcomeWindow) -> str:
        """What the window held when it decided: the log says which rule opened it."""
        return (f" ({window.failure_rate_pct:.0f}% of the last {window.calls} calls failed, "
                f"{window.slow_call_rate_pct:.0f}% took over {self._settings.slow_call_ms} ms)")

    def _move(self, state: BreakerState, now: int, why: str = "") -> None:
        """Change state here at once; the write to the store follows the lock. `why`:
        the window's rates, for the log."""
        expected = self._shared.version
        self._enter(SharedState(state, now, expected + 1, self.instance))
        self._pending.append(_Change(expected, self._shared))
        log = logger.warning if state is BreakerState.OPEN else logger.info
        log("circuit breaker %s: %s%s", self.name, state.value, why)

    def _enter(self, shared: SharedState) -> None:
        """Take on a state: a new generation, empty windows, this instance's probes."""
        self._shared = shared
        self._generation += 1
        self._window.clear()
        self._probes.clear()
        holds_probes = shared.state is BreakerState.HALF_OPEN and shared.holder == self.instance
        self._probes_left = self._settings.half_open_calls if holds_probes else 0

    def _adopt(self, shared: SharedState, newer_only: bool) -> None:
        """Take on a state another instance wrote."""
        if newer_only and (self._pending or shared.version <= self._shared.version):
            return
        if shared == self._shared:
            return
        self._enter(shared)
        logger.info("circuit breaker %s: %s (from instance %s)", self.name,
                    shared.state.value, shared.holder or "-")

    # -- the state store, outside the lock -------------------------------------------------
    def _sync(self, now: int) -> None:
        """Read the shared state when `sync_ms` has passed since the last read (one thread
        reads; the others go on with the state they have)."""
        with self._lock:
            if self._syncing or self._pending or (
                    self._synced_ms is not None and now - self._synced_ms < self._settings.sync_ms):
                return
            self._syncing = True
        shared: SharedState | None = None
        try:
            shared = self._store.read(self.name)
        except StoreError as exc:
            logger.warning("circuit breaker %s: shared state not read: %s", self.name, exc)
        finally:
            with self._lock:
                self._syncing = False
                self._synced_ms = now
                if shared is not None:
                    self._adopt(shared, newer_only=True)

    def _persist(self) -> None:
        """Write the changes of state made here, in order. One thread writes at a time and
        the others go on: the writer takes what they queued too (it looks again after
        letting go of the write lock, so nothing queued meanwhile is left behind)."""
        while self._pending:
            if not self._persist_lock.acquire(blocking=False):
                return
            try:
                self._drain()
            finally:
                self._persist_lock.release()

    def _drain(self) -> None:
        """Write what is queued; on a conflict, adopt the state that stands and drop the
        rest (it was built on a state that lost)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                change = self._pending[0]
            standing = self._write(change)
            with self._lock:
                if self._pending and self._pending[0] is change:
                    self._pending.popleft()
                if standing is not None:
                    self._pending.clear()
                    self._adopt(standing, newer_only=False)

    def _write(self, change: _Change) -> SharedState | None:
        try:
            return self._store.write(self.name, change.new, change.expected_version)
        except StoreError as exc:
            # This instance goes on by its own state; the next read or write catches up.
            logger.warning("circuit breaker %s: shared state not written: %s", self.name, exc)
            return None
