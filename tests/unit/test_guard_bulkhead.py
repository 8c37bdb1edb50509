"""GIVEN a cluster's bulkhead WHEN every slot is taken THEN a call fails at once (or after
its short bounded wait) with the cluster's retryable error, and every slot comes back when
its call ends, however it ends."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from chalicelib.backend.guard.bulkhead import Bulkhead
from chalicelib.backend.guard.cluster_guard import BUSY, OPEN, ClusterGuard
from chalicelib.backend.guard.state_store import BreakerState
from chalicelib.domain.exceptions import ClusterUnavailableError, StoreUnavailableError
from chalicelib.settings_guard import GuardSettings
from tests.clocks import FakeClock


def test_a_full_bulkhead_refuses_at_once() -> None:
    bulkhead = Bulkhead(2)
    assert bulkhead.try_acquire() and bulkhead.try_acquire()
    started = time.perf_counter()
    assert not bulkhead.try_acquire()
    assert time.perf_counter() - started < 0.05
    bulkhead.release()
    assert bulkhead.try_acquire()
    assert bulkhead.in_use == 2


def test_a_bounded_wait_ends_with_a_refusal_or_a_freed_slot() -> None:
    bulkhead = Bulkhead(1, max_wait_s=0.05)
    assert bulkhead.try_acquire()
    started = time.perf_counter()
    assert not bulkhead.try_acquire()
    assert 0.04 < time.perf_counter() - started < 0.5
    # a slot freed during the wait goes to the waiting call
    bulkhead_wait = Bulkhead(1, max_wait_s=2.0)
    assert bulkhead_wait.try_acquire()
    threading.Timer(0.05, bulkhead_wait.release).start()
    started = time.perf_counter()
    assert bulkhead_wait.try_acquire()
    assert time.perf_counter() - started < 1.0


def test_a_limit_of_zero_admits_every_call() -> None:
    bulkhead = Bulkhead(0)
    assert all(bulkhead.try_acquire() for _ in range(1000))
    assert bulkhead.in_use == 0


def guard(**settings: int) -> ClusterGuard:
    return ClusterGuard("b", GuardSettings(**settings), clock=FakeClock())


def test_the_guard_refuses_with_the_clusters_retryable_error() -> None:
    g = guard(bulkhead_max_calls=2)
    leases = [g.admit(), g.admit()]
    with pytest.raises(ClusterUnavailableError) as refused:
        g.admit()
    assert isinstance(refused.value, StoreUnavailableError)
    assert (refused.value.cluster, refused.value.reason) == ("b", BUSY)
    assert g.snapshot()["rejected"] == {"open": 0, "busy": 1}
    # WHEN a call ends, failed or not THEN its slot is free again
    leases[0].finish(True)
    leases[1].finish(None)
    assert g.in_use == 0
    g.admit()


def test_a_lease_finishes_once() -> None:
    g = guard(bulkhead_max_calls=2)
    lease, other = g.admit(), g.admit()
    lease.finish(False)
    lease.finish(False)
    assert g.in_use == 1
    other.finish(False)
    assert g.in_use == 0


def test_a_lease_dropped_without_an_end_gives_its_slot_back() -> None:
    # GIVEN a call whose end no hook saw (another hook raised first)
    g = guard(bulkhead_max_calls=1)
    lease = g.admit()
    del lease
    gc.collect()
    # THEN the slot is free for the next call
    assert g.in_use == 0
    g.admit()


def test_a_refusal_by_the_bulkhead_gives_the_probe_back() -> None:
    clock = FakeClock()
    g = ClusterGuard("b", GuardSettings(bulkhead_max_calls=1, minimum_calls=1,
                                        half_open_calls=1, open_wait_ms=1000), clock=clock)
    g.admit().finish(True)
    assert g.state is BreakerState.OPEN
    with pytest.raises(ClusterUnavailableError) as refused:
        g.admit()
    assert refused.value.reason == OPEN
    clock.advance(1)
    held = g.bulkhead.try_acquire()  # another call holds the one slot
    assert held
    with pytest.raises(ClusterUnavailableError):
        g.admit()  # refused by the bulkhead: the probe it had goes back
    g.bulkhead.release()
    g.admit().finish(False)  # so the next call can probe, and close it
    assert g.state is BreakerState.CLOSED


def test_a_guard_without_breaker_only_bounds_concurrency() -> None:
    g = ClusterGuard("b", GuardSettings(breaker_enabled=False, bulkhead_max_calls=1))
    for _ in range(100):
        g.admit().finish(True)
    assert g.state is BreakerState.CLOSED
    assert g.snapshot()["state"] == "OFF"
