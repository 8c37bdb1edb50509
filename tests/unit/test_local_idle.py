"""GIVEN the local server's background loops WHEN nothing happens THEN the move task pass
runs at its idle period while no task runs, and a request that starts one (the activity the
front door reports, before and after serving it) brings it back within a second."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

from app import app
from chalicelib.push.delivery import WAKE_INTERVAL_S, PushDelivery, PushOptions
from dmqlocal.activity import Activity
from dmqlocal.handlers import (
    AUTOSCALE_SCHEDULE,
    MOVE_TASKS_IDLE_S,
    MOVE_TASKS_SCHEDULE,
    ScheduleBinding,
    local_schedule_bindings,
)
from dmqlocal.pump import StreamPump
from dmqlocal.scheduler import Scheduler
from tests.clocks import FakeClock


def test_the_move_task_pass_gets_an_idle_period_when_told_whether_tasks_run() -> None:
    bindings = {b.name: b for b in local_schedule_bindings(app, 6.0, moves_busy=lambda: False)}
    moves = bindings[MOVE_TASKS_SCHEDULE]
    assert moves.period_s == 1.0 and moves.idle_period_s == MOVE_TASKS_IDLE_S
    assert moves.busy is not None and moves.busy() is False
    # without the question, it keeps its one-second period
    plain = {b.name: b for b in local_schedule_bindings(app, 6.0)}[MOVE_TASKS_SCHEDULE]
    assert plain.idle_period_s is None


def _runs(busy: bool, wake_every_s: float | None, seconds: float) -> int:
    calls: list[float] = []
    binding = ScheduleBinding("moves", lambda event, context: calls.append(time.monotonic()),
                              period_s=0.5, idle_period_s=30.0, busy=lambda: busy)
    scheduler = Scheduler([binding], scale=1.0)
    scheduler.start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(wake_every_s or 0.1)
            if wake_every_s is not None:
                scheduler.wake()
    finally:
        scheduler.stop()
    return len(calls)


def test_an_idle_binding_runs_rarely_until_woken_and_a_busy_one_at_its_period() -> None:
    # idle: the first run (at its period), then nothing for the idle period
    assert _runs(busy=False, wake_every_s=None, seconds=3.2) == 1
    # busy: every period (the scheduler ticks twice a second)
    assert _runs(busy=True, wake_every_s=None, seconds=3.2) >= 4
    # woken by requests that started nothing: still idle (a request costs it no run)
    assert _runs(busy=False, wake_every_s=0.3, seconds=3.2) == 1


def test_a_request_that_makes_an_idle_binding_busy_runs_it_at_the_next_tick() -> None:
    # GIVEN an idle binding (30 s idle period) that has run once
    calls: list[float] = []
    busy = threading.Event()
    binding = ScheduleBinding("moves", lambda event, context: calls.append(time.monotonic()),
                              period_s=0.5, idle_period_s=30.0, busy=busy.is_set)
    scheduler = Scheduler([binding], scale=1.0)
    scheduler.start()
    try:
        deadline = time.monotonic() + 5.0
        while not calls and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(calls) == 1
        # WHEN a request makes it busy (it started a move task) and wakes the scheduler
        busy.set()
        woken_at = time.monotonic()
        scheduler.wake()
        while len(calls) < 2 and time.monotonic() < woken_at + 5.0:
            time.sleep(0.05)
    finally:
        scheduler.stop()
    # THEN it ran within a second, not at its idle period
    assert len(calls) >= 2 and calls[1] - woken_at <= 1.0 + 0.5, calls


def test_a_binding_that_asks_to_run_sooner_runs_then_and_otherwise_at_its_period() -> None:
    asked: list[float | None] = [None]

    def due() -> float | None:
        return asked[-1]

    # GIVEN the autoscaler's binding, told when a merge falls due
    bindings = {b.name: b for b in local_schedule_bindings(app, 6.0, autoscale_s=30.0,
                                                           autoscale_due=due)}
    autoscale = bindings[AUTOSCALE_SCHEDULE]
    assert autoscale.period_s == 30.0 and autoscale.next_due is due
    scheduler = Scheduler([autoscale], scale=1.0)
    # WHEN nothing falls due THEN it runs again at its period
    assert scheduler._next(autoscale, 100.0) == 130.0
    # WHEN a merge falls due in a second THEN it runs again then
    asked.append(time.time() + 1.0)
    assert 100.9 <= scheduler._next(autoscale, 100.0) <= 101.0
    # AND a due time past its period, or already past, changes nothing or runs at once
    asked.append(time.time() + 60.0)
    assert scheduler._next(autoscale, 100.0) == 130.0
    asked.append(time.time() - 5.0)
    assert scheduler._next(autoscale, 100.0) == 100.0


def test_the_gate_touches_the_activity_before_and_after_each_request() -> None:
    activity = Activity()
    seen: list[str] = []
    activity.subscribe(lambda: seen.append("touch"))

    @contextlib.contextmanager
    def inner(method: str, target: str, headers: dict[str, str],
              body: bytes) -> Iterator[Any]:
        seen.append(f"serve {method} {target}")
        yield None

    with activity.gate(inner)("POST", "/", {}, b"") as refused:
        assert refused is None
    assert seen == ["touch", "serve POST /", "touch"]
    assert activity.touches == 2


class _NoSubscriptions:
    """A subscription repository that counts its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def every(self) -> list[Any]:
        self.reads += 1
        return []


def test_requests_that_wake_push_delivery_read_the_subscriptions_at_most_once_a_second(
) -> None:
    # GIVEN push delivery with no subscription, idle-refreshing every 30 s
    repo = _NoSubscriptions()
    delivery = PushDelivery(repo, None, None, FakeClock(), "us-east-1",  # type: ignore[arg-type]
                            PushOptions())
    stop = threading.Event()
    runner = threading.Thread(target=delivery.run, args=(30.0, stop, 30.0))
    runner.start()
    try:
        # WHEN requests wake it 100 times a second for 2.5 s
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            delivery.wake()
            time.sleep(0.01)
    finally:
        stop.set()
        runner.join(timeout=5)
    # THEN the subscriptions were read on start and at most once a second after it
    assert not runner.is_alive()
    assert 2 <= repo.reads <= 1 + math.ceil(2.5 / WAKE_INTERVAL_S), repo.reads


class _QuietStreams(StreamPump):
    """A pump whose passes find nothing, counted."""

    passes = 0

    def poll_once(self, flush: bool = True) -> int:
        self.passes += 1
        return 0


def test_requests_that_wake_the_pump_never_speed_it_past_its_interval() -> None:
    # GIVEN a pump over quiet streams, polling every 0.2 s when active
    pump = _QuietStreams(None, None, [], "us-east-1", interval_s=0.2)  # type: ignore[arg-type]
    pump.start()
    try:
        # WHEN requests wake it 100 times a second for 2 s
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            pump.wake()
            time.sleep(0.01)
    finally:
        pump.stop()
    # THEN it made a pass at most every 0.2 s (not one per wake), and kept the fast pace
    assert 5 <= pump.passes <= 2.0 / 0.2 + 2, pump.passes


class _BusyStreams(StreamPump):
    """A pump whose every pass hands over `moved` records, counted."""

    passes = 0
    moved = 0

    def poll_once(self, flush: bool = True) -> int:
        self.passes += 1
        return self.moved


def _passes_in(seconds: float, moved: int) -> int:
    pump = _BusyStreams(None, None, [], "us-east-1", interval_s=0.2)  # type: ignore[arg-type]
    pump.moved = moved
    pump.start()
    try:
        time.sleep(seconds)
    finally:
        pump.stop()
    return pump.passes


def test_records_coming_in_small_numbers_are_read_at_the_interval_a_backlog_at_once() -> None:
    # GIVEN streams that keep bringing a few records a pass WHEN the pump runs for 1 s
    # THEN it reads at its interval (about 5 passes), as Lambda polls a shard
    assert 4 <= _passes_in(1.0, moved=10) <= 1.0 / 0.2 + 2
    # AND a backlog (a full page a pass) is read back to back
    assert _passes_in(1.0, moved=StreamPump.BACKLOG_RECORDS) > 50
