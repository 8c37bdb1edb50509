"""GIVEN the local server's background loops WHEN nothing happens THEN the move task pass
runs at its idle period while no task runs, and a request (the activity the front door
reports, before and after serving it) brings it back within a second."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from app import app
from dmqlocal.activity import Activity
from dmqlocal.handlers import (
    MOVE_TASKS_IDLE_S,
    MOVE_TASKS_SCHEDULE,
    ScheduleBinding,
    local_schedule_bindings,
)
from dmqlocal.scheduler import Scheduler


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
    # idle but woken by requests: back at its period
    assert _runs(busy=False, wake_every_s=0.3, seconds=3.2) >= 3


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
