"""The local server's push delivery: a loop per region that keeps the delivery workers of
every subscription running (on AWS the `deliver_push` schedule handler does it)."""

from __future__ import annotations

import logging
import threading

from chalicelib.runtime import Runtime

logger = logging.getLogger("dmq.push")
RUN_S = 60.0  # a run reads the subscriptions again every few seconds; this bounds one run
# With no subscription: how often they are read again (a subscription created or deleted
# through this server is seen at once: `SubscriptionService` wakes the delivery).
IDLE_REFRESH_S = 15.0


class PushLoop:
    """Runs `runtime.push(region).run` back to back in one thread per region."""

    def __init__(self, runtime: Runtime, regions: tuple[str, ...]) -> None:
        self._runtime = runtime
        self._regions = regions
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start delivering."""
        for region in self._regions:
            thread = threading.Thread(target=self._run, args=(region,), daemon=True,
                                      name=f"dmq-push-{region}")
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop: the workers deliver the batch in hand, then give back their slots."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _run(self, region: str) -> None:
        while not self._stop.is_set():
            try:
                if self._runtime.health.up(region):
                    self._runtime.push(region).run(RUN_S, self._stop, IDLE_REFRESH_S)
                else:
                    self._stop.wait(1.0)
            except Exception:
                logger.warning("push delivery in %s failed; retrying", region, exc_info=True)
                self._stop.wait(1.0)
