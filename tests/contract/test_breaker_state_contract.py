"""The circuit breakers' shared state in the control table
(chalicelib/backend/guard/state_store.py) behaves the same on moto, on DynamoDB Local and
on the in-memory store: a change is one conditional PutItem on the version it started
from, the first of two instances wins and the other is handed the winner's state (no
extra read), and two instances of one cluster's breaker agree: one opens it and the other
refuses calls too, only one of them probes, and when its probes close it the other closes
as well."""

from __future__ import annotations

import pytest

from chalicelib.backend.guard import (
    BreakerState,
    ControlTableStateStore,
    GuardSettings,
    SharedState,
    detach_guard,
    guard_client,
)
from chalicelib.backend.guard.breaker import CircuitBreaker
from tests.clocks import FakeClock
from tests.contract.conftest import Store

OPEN, CLOSED, HALF_OPEN = BreakerState.OPEN, BreakerState.CLOSED, BreakerState.HALF_OPEN
SETTINGS = GuardSettings(window_calls=4, minimum_calls=4, open_wait_ms=1000,
                         half_open_calls=2, sync_ms=800)
NOW = 1_700_000_000_000


def _control(store: Store) -> str:
    return store.messages.replace("messages", "control")


def _states(store: Store) -> ControlTableStateStore:
    return ControlTableStateStore(store.dynamodb, _control(store))


def _calls(store: Store) -> list[str]:
    calls: list[str] = []
    store.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name))
    return calls


def test_the_first_writer_wins_and_the_other_is_told_what_stands(store: Store) -> None:
    one, other = _states(store), _states(store)
    assert one.read("blue") is None
    calls = _calls(store)
    opened = SharedState(OPEN, NOW, 1, "one")
    assert one.write("blue", opened, 0) is None
    # the other instance, still believing nothing was written, loses and learns
    assert other.write("blue", SharedState(OPEN, NOW + 5, 1, "other"), 0) == opened
    assert other.write("blue", SharedState(HALF_OPEN, NOW + 9, 3, "other"), 2) == opened
    assert calls == ["PutItem", "PutItem", "PutItem"]
    assert other.read("blue", consistent=True) == opened
    # a write on the version that stands goes through
    closed = SharedState(CLOSED, NOW + 10, 2, "other")
    assert other.write("blue", closed, 1) is None
    assert one.read("blue", consistent=True) == closed
    assert one.read("green") is None  # one item per breaker


def test_the_item_is_a_control_table_item_of_its_own(store: Store) -> None:
    _states(store).write("blue", SharedState(HALF_OPEN, NOW, 4, "one"), 0)
    item = store.dynamodb.get_item(TableName=_control(store),
                                   Key={"key": {"S": "breaker#blue"}})["Item"]
    assert item == {"key": {"S": "breaker#blue"}, "state": {"S": "HALF_OPEN"},
                    "since": {"N": str(NOW)}, "ver": {"N": "4"}, "by": {"S": "one"}}


def _breaker(store: Store, clock: FakeClock, instance: str) -> CircuitBreaker:
    return CircuitBreaker("blue", SETTINGS, _states(store), clock, instance=instance)


def _fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        permit = breaker.acquire()
        assert permit is not None
        breaker.record(permit, True, 0.01)


def test_two_instances_agree_on_one_clusters_breaker(store: Store) -> None:
    clock = FakeClock(NOW)
    a, b = _breaker(store, clock, "a"), _breaker(store, clock, "b")
    assert b.acquire() is not None  # b has read the (absent) state once
    # WHEN a sees its calls fail and opens the breaker
    _fail(a, 4)
    assert a.state is OPEN
    # THEN b goes on closed until its next read of the shared state, then refuses too
    clock.advance(0.5)
    assert b.acquire() is not None
    clock.advance(0.3)
    assert b.acquire() is None and b.state is OPEN
    # WHEN the wait is over and both try to probe THEN only the first turns it half open:
    # b's write, on the version it knew, loses, and b takes on a's state, with no probe
    clock.advance(0.2)
    probe_a = a.acquire()
    assert probe_a is not None and a.state is HALF_OPEN
    calls = _calls(store)
    assert b.acquire() is None and b.state is HALF_OPEN
    assert calls == ["PutItem"]  # the failed condition returned a's state: no read
    # WHEN a's probes succeed THEN it closes, and b learns it at its next read
    a.record(probe_a, False, 0.01)
    permit = a.acquire()
    assert permit is not None
    a.record(permit, False, 0.01)
    assert a.state is CLOSED
    assert b.acquire() is None  # not read yet
    clock.advance(0.8)
    assert b.acquire() is not None and b.state is CLOSED
    assert _states(store).read("blue", consistent=True) == SharedState(
        CLOSED, clock.now_ms() - 800, 3, "a")


def test_a_frozen_prober_does_not_keep_it_half_open(store: Store) -> None:
    clock = FakeClock(NOW)
    a, b = _breaker(store, clock, "a"), _breaker(store, clock, "b")
    _fail(a, 4)
    clock.advance(1)
    assert a.acquire() is not None  # a probes, then is frozen for good
    clock.advance(SETTINGS.half_open_max_wait_ms / 1000)
    assert b.acquire() is None and b.state is OPEN  # b reopens it ...
    clock.advance(1)
    assert b.acquire() is not None and b.state is HALF_OPEN  # ... and probes in its turn
    assert _states(store).read("blue", consistent=True) == SharedState(
        HALF_OPEN, clock.now_ms(), 4, "b")


def test_the_state_store_never_goes_through_a_guard(store: Store) -> None:
    # a client whose control-table calls a guard would see is refused ...
    for tables in (None, [_control(store)]):
        guard = guard_client(store.dynamodb, "blue", SETTINGS, tables=tables)
        try:
            with pytest.raises(ValueError):
                _states(store)
        finally:
            detach_guard(store.dynamodb, guard)
    # ... one that guards only a cluster's table is not
    guard = guard_client(store.dynamodb, "blue", SETTINGS, tables=[store.messages])
    _states(store)
    detach_guard(store.dynamodb, guard)
    # and a client guarded whole after the store was made: its calls still pass an open
    # breaker, and take no slot
    states = _states(store)
    guard = guard_client(store.dynamodb, "blue",
                         GuardSettings(window_calls=1, minimum_calls=1, sync_ms=60_000))
    try:
        guard.admit().finish(True)
        assert guard.state is OPEN
        assert states.write("red", SharedState(OPEN, NOW, 1, "a"), 0) is None
        assert states.read("red") is not None
        assert guard.in_use == 0
        assert guard.snapshot()["rejected"] == {"open": 0, "busy": 0}
    finally:
        detach_guard(store.dynamodb, guard)
