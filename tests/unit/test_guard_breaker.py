"""GIVEN a cluster's circuit breaker on a fake clock WHEN calls succeed, fail or are slow
THEN it moves by resilience4j's rules: closed until the failure rate or the slow-call rate
reaches its threshold over at least the minimum calls, open (every call refused) for the
wait, then half open with a few probes that close it again or open it anew; and its lock
is never held during a call, so threads are never serialised by it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chalicelib.backend.guard.breaker import CircuitBreaker, Permit
from chalicelib.backend.guard.state_store import (
    BreakerState,
    InProcessStateStore,
    SharedState,
)
from chalicelib.settings_guard import GuardSettings
from tests.clocks import FakeClock

SETTINGS = GuardSettings(window_calls=10, minimum_calls=5, failure_rate_pct=50,
                         slow_call_rate_pct=50, slow_call_ms=100, open_wait_ms=1000,
                         half_open_calls=3, half_open_max_wait_ms=5000, sync_ms=0)
FAST, SLOW = 0.01, 0.2
CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def breaker(clock: FakeClock, settings: GuardSettings = SETTINGS, **kwargs: Any) -> CircuitBreaker:
    return CircuitBreaker("a", settings, kwargs.pop("store", InProcessStateStore()), clock,
                          **kwargs)


def call(b: CircuitBreaker, failed: bool = False, duration: float = FAST) -> bool:
    """One call through the breaker: False when it was refused."""
    permit = b.acquire()
    if permit is None:
        return False
    b.record(permit, failed, duration)
    return True


def open_it(b: CircuitBreaker) -> None:
    for _ in range(SETTINGS.minimum_calls):
        call(b, failed=True)
    assert b.state is OPEN


def test_failures_below_the_minimum_calls_keep_it_closed(clock: FakeClock) -> None:
    b = breaker(clock)
    for _ in range(4):
        assert call(b, failed=True)
    assert b.state is CLOSED
    # WHEN the fifth call fails too THEN the rate counts: 5 of 5 failed
    call(b, failed=True)
    assert b.state is OPEN


def test_it_opens_when_the_failure_rate_reaches_the_threshold(clock: FakeClock) -> None:
    b = breaker(clock)
    for _ in range(5):
        call(b)
    for _ in range(4):
        call(b, failed=True)
    assert b.state is CLOSED  # 4 of 9: 44 %
    call(b, failed=True)
    assert b.state is OPEN  # 5 of 10: 50 %


def test_the_window_forgets_the_oldest_calls(clock: FakeClock) -> None:
    b = breaker(clock)
    for _ in range(5):
        call(b)
    for _ in range(4):
        call(b, failed=True)
    for _ in range(10):  # the four failures slide out of the 10-call window
        call(b)
    for _ in range(4):
        call(b, failed=True)
    assert b.state is CLOSED  # 4 of the last 10 (8 of 23 in all)
    call(b, failed=True)
    assert b.state is OPEN  # 5 of the last 10 (9 of 24 in all would not be)


def test_it_opens_when_the_slow_call_rate_reaches_the_threshold(clock: FakeClock) -> None:
    b = breaker(clock)
    for _ in range(5):
        call(b)
    for _ in range(4):
        call(b, duration=SLOW)  # slow, but successful
    assert b.state is CLOSED
    call(b, duration=SLOW)
    assert b.state is OPEN


def test_the_log_says_which_rule_opened_it(clock: FakeClock,
                                           caplog: pytest.LogCaptureFixture) -> None:
    # GIVEN calls of which half were slow and one failed
    b = breaker(clock)
    caplog.set_level("WARNING", logger="dmq.guard")
    for _ in range(4):
        call(b)
    call(b, failed=True)
    for _ in range(4):
        call(b, duration=SLOW)
    assert b.state is CLOSED
    # WHEN the next slow call opens it
    call(b, duration=SLOW)
    # THEN the warning gives the window's rates: the slow calls, not the failures
    assert b.state is OPEN
    assert [r.getMessage() for r in caplog.records] == [
        "circuit breaker a: OPEN (10% of the last 10 calls failed, 50% took over 100 ms)"]


def test_a_call_at_the_threshold_is_not_slow(clock: FakeClock) -> None:
    b = breaker(clock)
    for _ in range(10):
        call(b, duration=SETTINGS.slow_call_ms / 1000)
    assert b.state is CLOSED


def test_open_refuses_every_call_until_the_wait_has_passed(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    assert not call(b)
    clock.advance(0.999)
    assert b.acquire() is None
    clock.advance(0.001)
    assert b.acquire() is not None
    assert b.state is HALF_OPEN


def test_half_open_lets_only_the_permitted_probes_through(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    clock.advance(1)
    probes = [b.acquire() for _ in range(3)]
    assert all(p is not None for p in probes)
    assert b.acquire() is None
    # a probe that was never made goes back
    b.release(probes[0])  # type: ignore[arg-type]
    assert b.acquire() is not None


def test_probes_that_succeed_close_it_with_a_fresh_window(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    clock.advance(1)
    for _ in range(3):
        assert call(b)
    assert b.state is CLOSED
    assert b.snapshot()["calls"] == 0
    for _ in range(4):  # the failures before it opened are forgotten
        call(b, failed=True)
    assert b.state is CLOSED


def test_probes_that_fail_open_it_again_for_another_wait(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    clock.advance(1)
    call(b)
    call(b, failed=True)
    assert b.state is HALF_OPEN  # every probe must end before it decides
    call(b, failed=True)
    assert b.state is OPEN
    clock.advance(0.999)
    assert b.acquire() is None


def test_slow_probes_open_it_again(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    clock.advance(1)
    for _ in range(3):
        call(b, duration=SLOW)
    assert b.state is OPEN


def test_half_open_for_too_long_opens_it_again(clock: FakeClock) -> None:
    b = breaker(clock)
    open_it(b)
    clock.advance(1)
    held = [b.acquire() for _ in range(3)]  # probes that never end
    clock.advance(5)
    assert b.acquire() is None
    assert b.state is OPEN
    for permit in held:  # their late outcomes belong to no window
        b.record(permit, False, FAST)  # type: ignore[arg-type]
    assert b.state is OPEN


def test_outcomes_of_calls_let_through_in_an_earlier_state_are_dropped(clock: FakeClock) -> None:
    b = breaker(clock)
    early = b.acquire()
    open_it(b)
    clock.advance(1)
    b.acquire()
    assert early is not None
    b.record(early, True, FAST)  # a CLOSED-era call ending during the probes
    assert b.snapshot()["calls"] == 0
    assert b.state is HALF_OPEN


def test_threads_inside_calls_are_not_serialised(clock: FakeClock) -> None:
    # GIVEN 16 threads that each take a permit and then wait inside their "store call"
    # until all 16 are inside at once
    b = breaker(clock, GuardSettings(window_calls=50, minimum_calls=50))
    inside = threading.Barrier(16, timeout=5)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            permit = b.acquire()
            assert permit is not None
            inside.wait()
            b.record(permit, False, FAST)
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # THEN every one got there: the breaker held no lock across a call
    assert errors == []
    assert b.snapshot()["calls"] == 16


class _SlowStore(InProcessStateStore):
    """A state store whose writes wait until released."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.go_on = threading.Event()

    def write(self, name: str, new: SharedState, expected_version: int) -> SharedState | None:
        self.writing.set()
        self.go_on.wait(5)
        return super().write(name, new, expected_version)


def test_a_slow_state_write_holds_up_no_other_call(clock: FakeClock) -> None:
    store = _SlowStore()
    b = breaker(clock, store=store)
    for _ in range(4):
        call(b, failed=True)
    # WHEN the call that opens the breaker is writing the new state, slowly
    writer = threading.Thread(target=call, args=(b, True))
    writer.start()
    assert store.writing.wait(5)
    # THEN other threads are answered meanwhile: refused at once, the breaker being open
    done = threading.Event()
    threading.Thread(target=lambda: (b.acquire(), done.set())).start()
    assert done.wait(1)
    store.go_on.set()
    writer.join(5)
    assert store.read("a") == SharedState(OPEN, clock.now_ms(), 1, b.instance)


def test_two_instances_agree_through_their_shared_store(clock: FakeClock) -> None:
    store = InProcessStateStore()
    a = breaker(clock, store=store, instance="a")
    b = breaker(clock, store=store, instance="b")
    open_it(a)
    # b learns it at its next call (sync_ms 0: it reads the store on every call)
    assert b.acquire() is None and b.state is OPEN
    clock.advance(1)
    # both see the wait over; a turns it half open first, so only a holds the probes
    probe = a.acquire()
    assert probe is not None
    assert b.acquire() is None and b.state is HALF_OPEN
    a.record(probe, False, FAST)
    for _ in range(2):
        call(a)
    assert a.state is CLOSED
    assert call(b) and b.state is CLOSED


def test_a_stale_permit_cannot_give_back_a_probe(clock: FakeClock) -> None:
    b = breaker(clock)
    early = b.acquire()
    open_it(b)
    clock.advance(1)
    probes = [b.acquire() for _ in range(3)]
    assert None not in probes
    b.release(early if early is not None else Permit(-1))
    assert b.acquire() is None
