"""Chalice's per-request attributes, kept per thread for the local server.

Chalice stores the request being served on the app object (`app.current_request`,
`app.lambda_context`). On Lambda a container serves one request at a time, so that is
right; the local server serves many at once from threads, and a view reading
`app.current_request` could get another thread's request, answer it, and leave its own
unserved (a SendMessageBatch acknowledged for messages never written, while another
batch was written twice). `serve_from_threads(app)` makes those attributes of one app
per thread, without changing what the app code reads.
"""

from __future__ import annotations

import threading
from typing import Any

from chalice import Chalice

ATTRIBUTES = ("current_request", "lambda_context")


class _PerThread:
    """A data descriptor whose value is kept per thread (and per instance)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def _values(self) -> dict[int, Any]:
        values: dict[int, Any] | None = getattr(self._local, "values", None)
        if values is None:
            values = self._local.values = {}
        return values

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return self._values().get(id(instance))

    def __set__(self, instance: Any, value: Any) -> None:
        self._values()[id(instance)] = value


class _ServedFromThreads:
    """Mixed into the app's class: Chalice's per-request attributes, per thread."""

    current_request = _PerThread()
    lambda_context = _PerThread()


def serve_from_threads(app: Chalice) -> Chalice:
    """Give `app` per-thread request attributes (once); return it."""
    if not isinstance(app, _ServedFromThreads):
        for name in ATTRIBUTES:
            app.__dict__.pop(name, None)
        app.__class__ = type(f"ThreadServed{type(app).__name__}",
                             (_ServedFromThreads, type(app)), {})
    return app
