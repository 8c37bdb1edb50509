"""The background loop of the local server's timers (dmqlocal/loops.py)."""

from __future__ import annotations

import threading
import time

from dmqlocal.loops import PeriodicLoop


def _wait_for(condition: threading.Event, timeout_s: float = 5.0) -> bool:
    return condition.wait(timeout_s)


def test_it_runs_the_action_every_period_in_a_named_daemon_thread() -> None:
    # GIVEN a loop that runs every 0.02 s
    runs: list[threading.Thread] = []
    third = threading.Event()

    def action() -> None:
        runs.append(threading.current_thread())
        if len(runs) == 3:
            third.set()

    loop = PeriodicLoop("dmq-test-loop", action, 0.02, join_timeout_s=5)
    # WHEN it starts
    loop.start()
    try:
        # THEN it runs again and again, in its own daemon thread
        assert _wait_for(third)
    finally:
        loop.stop()
    assert all(t.name == "dmq-test-loop" and t.daemon for t in runs)
    assert threading.current_thread() not in runs


def test_a_stop_ends_a_long_wait_at_once_and_the_action_never_runs() -> None:
    # GIVEN a loop with a long period, waiting for its first run
    runs: list[float] = []
    loop = PeriodicLoop("dmq-test-stop", lambda: runs.append(time.monotonic()), 30.0,
                        join_timeout_s=5)
    loop.start()
    # WHEN it is stopped
    started = time.monotonic()
    loop.stop()
    # THEN the stop returns at once, the thread is gone, and nothing ran
    assert time.monotonic() - started < 1.0
    assert loop.stopping and not runs
    assert not any(t.name == "dmq-test-stop" for t in threading.enumerate())


def test_the_first_wait_and_the_period_are_asked_in_the_loop_thread_before_each_wait() -> None:
    # GIVEN a loop whose first wait and period are functions
    asked: list[tuple[str, str]] = []
    second = threading.Event()

    def first() -> float:
        asked.append(("first", threading.current_thread().name))
        return 0.0

    def period() -> float:
        asked.append(("period", threading.current_thread().name))
        if len(asked) == 3:
            second.set()
            return 30.0
        return 0.01

    loop = PeriodicLoop("dmq-test-loop", lambda: None, period, join_timeout_s=5,
                        first_wait_s=first)
    # WHEN it runs twice
    loop.start()
    try:
        assert _wait_for(second)
    finally:
        loop.stop()
    # THEN the first wait came from its own function, then the period before each wait
    assert asked == [("first", "dmq-test-loop"), ("period", "dmq-test-loop"),
                     ("period", "dmq-test-loop")]


def test_an_action_under_way_ends_before_the_thread_and_a_stop_waits_at_most_the_timeout() \
        -> None:
    # GIVEN a loop whose action is under way and slow
    running, release, finished = threading.Event(), threading.Event(), threading.Event()

    def action() -> None:
        running.set()
        release.wait(5.0)
        finished.set()

    loop = PeriodicLoop("dmq-test-loop", action, 0.0, join_timeout_s=0.1)
    loop.start()
    assert _wait_for(running)
    # WHEN it is told to stop without waiting, then waited for
    loop.stop(wait=False)
    started = time.monotonic()
    loop.join()
    # THEN the wait gave up after the timeout, with the action still running
    assert 0.05 <= time.monotonic() - started < 1.0
    assert not finished.is_set()
    # AND once the action ends, no other run starts
    release.set()
    assert _wait_for(finished)
    running.clear()
    loop.join()
    assert not running.wait(0.1)


def test_stopping_a_loop_that_never_started_does_nothing() -> None:
    loop = PeriodicLoop("dmq-test-loop", lambda: None, 1.0, join_timeout_s=5)
    loop.stop()
    assert loop.stopping
