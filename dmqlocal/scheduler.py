"""The local scheduler: invokes the app's `schedule` handlers at their rate."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, datetime

from dmqlocal.handlers import ScheduleBinding
from dmqlocal.loops import PeriodicLoop

logger = logging.getLogger("dmq.scheduler")
TICK_S = 0.5  # how often the due bindings are looked for


def scheduled_event(name: str) -> dict[str, object]:
    """A CloudWatch scheduled event as Lambda receives it."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east-1",
        "resources": [f"arn:aws:events:us-east-1:000000000000:rule/{name}"], "detail": {},
    }


class Scheduler:
    """Runs each binding every `period_s * scale` seconds in one background thread; a
    binding with an idle period runs that rarely while it is not busy. `wake()` (a request
    was served) brings a binding that has become busy back to its period at once."""

    def __init__(self, bindings: list[ScheduleBinding], scale: float = 1.0) -> None:
        self._bindings = bindings
        self._scale = scale
        self._woken = threading.Event()
        self._loop = PeriodicLoop("dmq-scheduler", self._tick, TICK_S, join_timeout_s=10)
        self._due: dict[str, float] = {}
        self.runs = 0

    def wake(self) -> None:
        """A request reached the server: run the bindings it made busy at the next tick
        (an event set already is left alone, as the pump's is: no lock per request)."""
        if not self._woken.is_set():
            self._woken.set()

    def _period(self, binding: ScheduleBinding) -> float:
        idle = binding.idle_period_s is not None and binding.busy is not None \
            and not binding.busy()
        period = binding.idle_period_s if idle and binding.idle_period_s else binding.period_s
        return period * self._scale

    def start(self) -> None:
        """Start the timer thread: each binding runs first one period from now."""
        self._due = {b.name: time.monotonic() + b.period_s * self._scale for b in self._bindings}
        self._loop.start()

    def stop(self) -> None:
        """Stop the timer thread."""
        self._loop.stop()

    def run_all(self) -> None:
        """Invoke every handler once now."""
        for binding in self._bindings:
            self._invoke(binding)

    def _invoke(self, binding: ScheduleBinding) -> None:
        try:
            binding.handler(scheduled_event(binding.name), None)
            self.runs += 1
        except Exception:
            logger.exception("scheduled handler %s failed", binding.name)

    def _tick(self) -> None:
        """Run the bindings that are due; after a wake, a binding that is busy again runs
        within one period, not its idle one."""
        due = self._due
        now = time.monotonic()
        woken = self._woken.is_set()
        self._woken.clear()
        for binding in self._bindings:
            if woken and binding.idle_period_s is not None and (
                    binding.busy is None or binding.busy()):
                due[binding.name] = min(due[binding.name],
                                        now + binding.period_s * self._scale)
            if now >= due[binding.name]:
                self._invoke(binding)
                due[binding.name] = self._next(binding, now)

    def _next(self, binding: ScheduleBinding, now: float) -> float:
        """When a binding that just ran runs again: at its period, or sooner when it
        asks to (`next_due`, epoch seconds)."""
        due = now + self._period(binding)
        asked = binding.next_due() if binding.next_due is not None else None
        if asked is not None:
            due = min(due, now + max(0.0, asked - time.time()))
        return due
