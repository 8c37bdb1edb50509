"""Push subscriptions: create, list and delete, checked as Lambda checks an SQS event
source mapping (CreateEventSourceMapping's limits and defaults)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, urlsplit

from chalicelib.clock import Clock
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo import service as fifo_rules
from chalicelib.push import endpoint as push_http
from chalicelib.push import targets
from chalicelib.push.destinations import DestinationPolicy
from chalicelib.push.registry import SubscriptionRepository
from chalicelib.push.subscription import REPORT_BATCH_ITEM_FAILURES, Subscription
from chalicelib.service.exceptions import InvalidParameterValueError, SqsError

DEFAULT_BATCH_SIZE = 10
MAX_BATCH_SIZE = 10_000
MAX_FIFO_BATCH_SIZE = 10
MAX_WINDOW_S = 300
MIN_CONCURRENCY = 2
MAX_CONCURRENCY = 1000
# A DMQ limit (Lambda has none per queue): the queue's set of ids stays one small item.
MAX_PER_QUEUE = 10
FIELDS = frozenset({"Endpoint", "FunctionName", "BatchSize", "MaximumBatchingWindowInSeconds",
                   "FunctionResponseTypes", "ScalingConfig", "Enabled"})


class SubscriptionNotFoundError(SqsError):
    """No subscription of the queue has that id (Lambda's ResourceNotFoundException)."""

    code = "ResourceNotFoundException"
    status = 404


class SubscriptionLimitError(SqsError):
    """The queue has as many subscriptions as DMQ allows."""

    code = "ResourceConflictException"
    status = 409


def _constraint(value: object, name: str, text: str) -> InvalidParameterValueError:
    return InvalidParameterValueError(
        f"1 validation error detected: Value '{value}' at '{name}' failed to satisfy "
        f"constraint: {text}")


def _integer(body: dict[str, Any], field: str, name: str, default: int | None,
             low: int, high: int) -> int | None:
    value = body.get(field, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterValueError(f"{field} must be an integer.")
    if value < low:
        raise _constraint(value, name, f"Member must have value greater than or equal to {low}")
    if value > high:
        raise _constraint(value, name, f"Member must have value less than or equal to {high}")
    return value


def _target(body: dict[str, Any]) -> tuple[str | None, str | None]:
    endpoint, function = body.get("Endpoint"), body.get("FunctionName")
    if (endpoint is None) == (function is None):
        raise InvalidParameterValueError(
            "Give exactly one target: Endpoint (an http or https URL) or FunctionName.")
    if endpoint is not None:
        parts = urlsplit(endpoint) if isinstance(endpoint, str) else None
        if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
                or not _port_ok(parts)):
            raise InvalidParameterValueError(
                f"Endpoint must be an http or https URL with a host: {endpoint!r}.")
        return endpoint, None
    if not isinstance(function, str) or not function:
        raise InvalidParameterValueError("FunctionName must be a non-empty string.")
    if not targets.registered(function):
        raise SubscriptionNotFoundError(f"Function not found: {function}")
    return None, function


def _port_ok(parts: SplitResult) -> bool:
    try:
        parts.port  # noqa: B018 - reading it checks it (ValueError when out of range)
    except ValueError:
        return False
    return True


def check_destination(endpoint: str, policy: DestinationPolicy) -> None:
    """Refuse an endpoint whose host is, or resolves to, an address push delivery may not
    reach (InvalidParameterValue). A name that does not resolve now is accepted: each
    delivery resolves and checks it again."""
    parts = urlsplit(endpoint)
    port = parts.port or push_http.DEFAULT_PORTS.get(parts.scheme, 80)
    try:
        push_http.checked_addresses(parts.hostname or "", port, policy)
    except push_http.DestinationRefusedError as exc:
        raise InvalidParameterValueError(f"Endpoint {endpoint!r} is not allowed: {exc}.") \
            from None
    except (OSError, UnicodeError):
        return  # does not resolve now: each delivery resolves and checks it again


def _report(body: dict[str, Any]) -> bool:
    types = body.get("FunctionResponseTypes", [])
    if not isinstance(types, list) or len(types) > 1:
        raise _constraint(types, "functionResponseTypes",
                          "Member must have length less than or equal to 1")
    if types and types[0] != REPORT_BATCH_ITEM_FAILURES:
        raise _constraint(types, "functionResponseTypes",
                          "Member must satisfy enum value set: [ReportBatchItemFailures]")
    return bool(types)


def _concurrency(body: dict[str, Any]) -> int | None:
    scaling = body.get("ScalingConfig")
    if scaling is None or scaling == {}:
        return None
    if not isinstance(scaling, dict) or set(scaling) - {"MaximumConcurrency"}:
        raise InvalidParameterValueError("ScalingConfig takes MaximumConcurrency only.")
    return _integer(scaling, "MaximumConcurrency", "scalingConfig.maximumConcurrency", None,
                    MIN_CONCURRENCY, MAX_CONCURRENCY)


def build(queue: QueueRecord, body: dict[str, Any] | None, now_ms: int) -> Subscription:
    """A new subscription from the admin API's request body, checked field by field."""
    if body is None:
        raise InvalidParameterValueError("The request body must be a JSON object.")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise InvalidParameterValueError(f"Unknown field(s): {', '.join(unknown)}.")
    endpoint, function = _target(body)
    size = _integer(body, "BatchSize", "batchSize", DEFAULT_BATCH_SIZE, 1, MAX_BATCH_SIZE)
    window = _integer(body, "MaximumBatchingWindowInSeconds", "maximumBatchingWindowInSeconds",
                      0, 0, MAX_WINDOW_S)
    assert size is not None and window is not None
    if fifo_rules.is_fifo(queue) and size > MAX_FIFO_BATCH_SIZE:
        raise InvalidParameterValueError(
            f"Batch size must be between 1 and {MAX_FIFO_BATCH_SIZE} for FIFO queues.")
    if size > 10 and window < 1:
        raise InvalidParameterValueError(
            "Maximum batch window in seconds must be greater than 0 if maximum batch size "
            "is greater than 10")
    enabled = body.get("Enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidParameterValueError("Enabled must be true or false.")
    return Subscription(
        sub_id=str(uuid.uuid4()), queue_id=queue.queue_id, queue_arn=queue.arn,
        endpoint=endpoint, function_name=function, batch_size=size, window_s=window,
        report_failures=_report(body), max_concurrency=_concurrency(body), enabled=enabled,
        modified_ms=now_ms)


class SubscriptionService:
    """The admin operations on a queue's push subscriptions."""

    def __init__(self, repo: SubscriptionRepository, clock: Clock,
                 destinations: DestinationPolicy | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self._repo = repo
        self._clock = clock
        self._destinations = destinations or DestinationPolicy()
        # Told when a subscription is created or deleted: the delivery of this process
        # reads the subscriptions again at once (others at their refresh).
        self._on_change = on_change or (lambda: None)

    def create(self, queue: QueueRecord, body: dict[str, Any] | None) -> Subscription:
        """Subscribe a target to the queue (an endpoint only at an allowed address)."""
        sub = build(queue, body, self._clock.now_ms())
        if sub.endpoint is not None:
            check_destination(sub.endpoint, self._destinations)
        if not self._repo.create(sub, MAX_PER_QUEUE):
            raise SubscriptionLimitError(
                f"The queue {queue.name} already has {MAX_PER_QUEUE} subscriptions, the most "
                "DMQ allows.")
        self._on_change()
        return sub

    def list(self, queue: QueueRecord) -> list[Subscription]:
        """The queue's subscriptions."""
        return self._repo.for_queue(queue.queue_id)

    def delete(self, queue: QueueRecord, sub_id: str) -> Subscription:
        """Unsubscribe; ResourceNotFoundException when the queue has no such subscription."""
        sub = self._repo.get(sub_id)
        if sub is None or sub.queue_id != queue.queue_id:
            raise SubscriptionNotFoundError(
                f"The resource you requested does not exist. (Subscription {sub_id})")
        self._repo.delete(sub)
        self._on_change()
        return sub
