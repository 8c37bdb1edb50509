"""When this server last wrote to each region's store, so that a count read waits for the
stream pump only when the pump may not have handed this server's writes over yet.

A botocore hook on every DynamoDB client of a region's backend notes the time each write
answered (or failed: a write that timed out may still have been applied). A region
whose backend holds a client the hook is not on yet (its backend was built again, after
its store came back empty) has its hook put on that client, and counts as written just
now: what that client wrote before is not known.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                    "TransactWriteItems"})


class WriteMarks:
    """The last write of each region, on `time.monotonic()`'s clock."""

    def __init__(self, clients_of: Callable[[str], Sequence[Any]]) -> None:
        """`clients_of(region)`: the region's DynamoDB clients now."""
        self._clients_of = clients_of
        self._lock = threading.Lock()
        self._watched: dict[str, list[Any]] = {}
        self._written: dict[str, float] = {}

    def last_write(self, region: str) -> float:
        """When the region's last write answered (-inf: none since its clients were
        watched); now, when a client of the region was not watched until this call; inf
        when its clients cannot be listed."""
        try:
            clients = list(self._clients_of(region))
        except Exception:  # noqa: BLE001 - not known: the pump is waited for, as before
            return float("inf")
        with self._lock:
            watched = self._watched.setdefault(region, [])
            new = [c for c in clients if all(c is not w for w in watched)]
            watched.extend(new)
        for client in new:
            hook = _Hook(self, region)
            client.meta.events.register("after-call.dynamodb", hook.answered)
            client.meta.events.register("after-call-error.dynamodb", hook.failed)
        if new:
            self.note(region)
        with self._lock:
            return self._written.get(region, float("-inf"))

    def note(self, region: str) -> None:
        """A write of the region answered now."""
        now = time.monotonic()
        with self._lock:
            self._written[region] = max(self._written.get(region, now), now)


class _Hook:
    """The hooks of one client of a region."""

    def __init__(self, marks: WriteMarks, region: str) -> None:
        self._marks = marks
        self._region = region

    def answered(self, model: Any = None, **_: Any) -> None:
        if model is not None and model.name in WRITES:
            self._marks.note(self._region)

    def failed(self, **_: Any) -> None:
        self._marks.note(self._region)  # a write or a read: either way, wait once more
