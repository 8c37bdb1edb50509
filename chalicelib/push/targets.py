"""Push targets: the functions of this deployment that take a queue's messages, and the
call that hands a batch (a Lambda SQS event) to a function or an HTTP(S) endpoint.

A function registers with `on_queue_message`, as a Chalice app registers an SQS handler
with `app.on_sqs_message`, and receives the same `SQSEvent`:

    from chalicelib.push import targets

    @targets.on_queue_message("orders-worker")
    def handle(event):
        for record in event:
            ...
        return {"batchItemFailures": []}

A subscription naming `orders-worker` then calls it in the delivering process (the
schedule handler's Lambda on AWS, the local server's delivery loop locally).
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from chalice.app import SQSEvent

from chalicelib.push import endpoint as push_http
from chalicelib.push.destinations import DestinationPolicy
from chalicelib.push.subscription import Invocation

logger = logging.getLogger(__name__)
QueueHandler = Callable[[SQSEvent], Any]
H = TypeVar("H", bound=QueueHandler)

_lock = threading.Lock()
_functions: dict[str, QueueHandler] = {}


def on_queue_message(name: str | None = None) -> Callable[[H], H]:
    """Register a function as a push target under `name` (default: its own name)."""

    def register(handler: H) -> H:
        with _lock:
            _functions[name or handler.__name__] = handler
        return handler

    return register


def registered(name: str) -> bool:
    """True when a function of that name takes pushed messages in this deployment."""
    with _lock:
        return name in _functions


def unregister(name: str) -> None:
    """Forget a registered function (tests and reloads)."""
    with _lock:
        _functions.pop(name, None)


def call_function(name: str, event: dict[str, Any]) -> Invocation:
    """Call a registered function in this process. An exception fails the batch."""
    with _lock:
        handler = _functions.get(name)
    if handler is None:
        return Invocation(False, error=f"Function not found: {name}")
    try:
        return Invocation(True, handler(SQSEvent(event, None)))
    except Exception as exc:  # noqa: BLE001 - a raising handler fails its batch, as on Lambda
        logger.warning("push function %s raised: %r", name, exc)
        return Invocation(False, error=f"{type(exc).__name__}: {exc}")


def call_endpoint(url: str, event: dict[str, Any], timeout_s: float,
                  policy: DestinationPolicy | None = None) -> Invocation:
    """POST the event as JSON to an address the policy allows (push_http.py). A 2xx answer
    succeeds, with its JSON body (none: None; not JSON: a string, which a partial-batch
    reading takes as a failure); an HTTP error, a redirect (never followed), a timeout, a
    refused connection or a refused destination fails the batch."""
    data = json.dumps(event).encode()
    try:
        answer = push_http.post(url, data, timeout_s, policy or DestinationPolicy())
    except push_http.DestinationRefusedError as exc:
        logger.warning("push endpoint refused: %s", exc)
        return Invocation(False, error=f"destination refused: {exc}")
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return Invocation(False, error=str(exc) or type(exc).__name__)
    if 300 <= answer.status < 400:
        return Invocation(False, error=f"HTTP {answer.status} (redirects are not followed)")
    if not 200 <= answer.status < 300:
        return Invocation(False, error=f"HTTP {answer.status}")
    body = answer.body
    if not body.strip():
        return Invocation(True, None)
    try:
        return Invocation(True, json.loads(body))
    except ValueError:
        return Invocation(True, body.decode("utf-8", "replace"))
