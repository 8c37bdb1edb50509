"""Structured logs and CloudWatch metrics, through aws-lambda-powertools.

On Lambda (or with DMQ_LOG_FORMAT=json) the `dmq` loggers write one JSON object per
line, with the request's id, account, queue and action appended while a request is
served. Metrics are Embedded Metric Format documents in the `DMQ` namespace, printed
to stdout (where Lambda's log agent turns them into metrics): each handler's metrics are
flushed when its invocation ends, and the replication lag of each target region is one
document with a `TargetRegion` dimension. Locally, logs stay human-readable and no
metric is printed unless asked (DMQ_METRICS=emf).

Per-queue counts (messages sent, received and deleted, empty receives, errors, throttles
and dead-letter moves) are also kept in memory since the process started, whatever the
settings: the local server's `GET /metrics` exposes them, with the replication lag of
each target region. With EMF on, each invocation's per-queue counts are printed at its
end as one document per queue, with the dimensions Account and Queue.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from chalicelib.domain.queue_urls import queue_of_request

SERVICE = "dmq"
NAMESPACE = "DMQ"
TARGET_PREFIX = "AmazonSQS."
requests_log = logging.getLogger("dmq.requests")

Handler = TypeVar("Handler", bound=Callable[..., Any])


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg, unused-ignore]
    """Writes to the current sys.stdout (Lambda's log stream; a test's capture), and
    only while structured logs are on."""

    enabled = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.enabled:
            self.stream = sys.stdout
            super().emit(record)


@dataclass
class _State:
    structured: Logger | None = None
    metrics: Metrics | None = None


_state = _State()
_handler = _StdoutHandler()
_flush_lock = threading.Lock()

# The per-queue counts: EMF metric name -> what it counts.
QUEUE_METRICS = {
    "NumberOfMessagesSent": "messages accepted by SendMessage and SendMessageBatch",
    "NumberOfMessagesReceived": "messages returned by ReceiveMessage",
    "NumberOfMessagesDeleted": "messages deleted by DeleteMessage and DeleteMessageBatch",
    "NumberOfEmptyReceives": "ReceiveMessage calls that returned no message",
    "Errors": "requests and batch entries answered with an error",
    "Throttles": "requests refused by the queue's or the account's rate limit",
    "DeadLetterMoves": "messages moved to the dead-letter queue after maxReceiveCount",
}
# At most this many (metric, account, queue) series are kept: names taken from bad
# requests (queues that do not exist) must not grow memory without bound.
MAX_SERIES = 10_000
OTHER_QUEUE = "(other)"
MAX_NAME_CHARS = 80  # SQS's longest queue name

QueueKey = tuple[str, str, str]  # metric, account, queue name


class _QueueCounts:
    """Thread-safe totals since the process started, and the invocation's share of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[QueueKey, float] = {}
        self.pending: dict[tuple[str, str], dict[str, float]] = {}
        self.lags_ms: dict[str, int] = {}
        self.queue_lags_ms: dict[tuple[str, str, str], int] = {}

    def add(self, metric: str, account: str, queue: str, value: float) -> None:
        key = (metric, _label(account), _label(queue))
        with self._lock:
            if key not in self.totals and len(self.totals) >= MAX_SERIES:
                key = (metric, OTHER_QUEUE, OTHER_QUEUE)
            self.totals[key] = self.totals.get(key, 0) + value
            if _state.metrics is not None:
                counts = self.pending.setdefault(key[1:], {})
                counts[metric] = counts.get(metric, 0) + value

    def take_pending(self) -> dict[tuple[str, str], dict[str, float]]:
        with self._lock:
            pending, self.pending = self.pending, {}
            return pending


_queue_counts = _QueueCounts()


def _label(name: str) -> str:
    """A name as a metric label: at most MAX_NAME_CHARS, and valid UTF-8 (a name taken
    from a bad request may hold lone surrogates, which no exposition can encode)."""
    return name[:MAX_NAME_CHARS].encode("utf-8", "replace").decode("utf-8")


def log_level(level: str) -> int:
    """A level's number from its name (DMQ_LOG_LEVEL, any case); INFO for a name that is
    not a level."""
    found = logging.getLevelName(level.strip().upper())
    return found if isinstance(found, int) else logging.INFO


def configure(json_logs: bool, emit_metrics: bool, level: str = "INFO") -> None:
    """Turn structured logs and EMF metrics on or off (once per container; tests switch).

    The `dmq` logger (and every `dmq.*` one under it) logs at `level`: Chalice sets the
    app's logger, which it names after the app, to ERROR unless the app is in debug mode,
    which would drop every warning of DMQ's own loggers."""
    base = logging.getLogger(SERVICE)
    base.setLevel(log_level(level))
    if json_logs and _state.structured is None:
        # Chalice's own plain handler on its app logger (also named dmq) would print
        # every line a second time.
        for handler in list(base.handlers):
            base.removeHandler(handler)
        _state.structured = Logger(service=SERVICE, level=log_level(level), logger_handler=_handler)
        # Loggers named after their module (chalicelib.*) get the same JSON output.
        copy_config_to_registered_loggers(source_logger=_state.structured,
                                          include={"chalicelib"})
    _handler.enabled = json_logs
    _state.metrics = Metrics(namespace=NAMESPACE, service=SERVICE) if emit_metrics else None
    _queue_counts.take_pending()  # counts from before a switch are not printed after it


def name_request(action: str, account: str, named: str | None) -> None:
    """Give the request's log lines its action, account and queue, as the protocol adapter
    parsed them (`named`: `<account>/<queue>`, a bare queue name, or nothing). Only
    structured logs use them."""
    structured = _state.structured
    if structured is None or not _handler.enabled:
        return
    owner, _, queue = (named or "").rpartition("/")
    keys = {"action": action, "queue": queue}
    if owner or account:
        keys["account"] = owner or account
    structured.thread_safe_append_keys(**keys)


def request_keys(headers: Mapping[str, str], body: bytes | None,
                 default_account: str) -> dict[str, str]:
    """Action, account and queue of an SQS request that the front door refused before
    any protocol adapter parsed it, read leniently (here bad input only leaves a key
    empty). Only structured logs use them: with those off, nothing is parsed."""
    if _state.structured is None:
        return {}
    lowered = {k.lower(): v for k, v in headers.items()}
    target = lowered.get("x-amz-target", "")
    action = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
    account, queue = default_account, ""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        named = queue_of_request(data.get("QueueUrl"), data.get("QueueName"), default_account)
        owner, _, queue = named.rpartition("/")
        account = owner or account
    return {"action": action, "account": account, "queue": queue}


@contextmanager
def request_scope(keys: Mapping[str, str]) -> Iterator[None]:
    """Append the request's keys to every log line written while it is served."""
    structured = _state.structured
    if structured is None or not _handler.enabled:
        yield
        return
    structured.thread_safe_append_keys(**keys)
    try:
        yield
    finally:
        structured.thread_safe_clear_keys()


def request_served(status: int, request_id: str) -> None:
    """The request's one log line (structured logs only) and its count metrics."""
    if _handler.enabled:
        requests_log.info("request served", extra={"status": status, "sqs_request_id": request_id})
    add_count("Requests")
    if status >= 500:
        add_count("ServerErrors")


def add_count(name: str, value: float = 1) -> None:
    """Count something in this invocation's metrics (flushed when it ends)."""
    metrics = _state.metrics
    if metrics is not None:
        with _flush_lock:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def count_queue(metric: str, account: str, queue: str, value: float = 1) -> None:
    """Count something of one queue (a name of QUEUE_METRICS): kept for `GET /metrics`,
    and in this invocation's per-queue EMF document when metrics are on."""
    if value:
        _queue_counts.add(metric, account, queue, value)


def record_throttle(account: str, queue: str) -> None:
    """A request to a queue refused by a rate limit (the throttling feature calls this)."""
    count_queue("Throttles", account, queue)


def record_dead_letter_move(account: str, queue: str, moved: int = 1) -> None:
    """Messages of a queue moved to its dead-letter queue after maxReceiveCount."""
    count_queue("DeadLetterMoves", account, queue, moved)


def record_request(account: str, queue: str, action: str, result: Any,
                   failed: bool) -> None:
    """The per-queue counts of one served SQS request (`queue` is `<account>/<name>` or
    a bare name or ''), from its action and its result: messages sent, received and
    deleted, empty receives, and errors (the request's, or its failed batch entries)."""
    if "/" in queue:
        account, queue = queue.split("/", 1)
    if failed:
        count_queue("Errors", account, queue)
        return
    data = result if isinstance(result, Mapping) else {}
    if action == "SendMessage":
        count_queue("NumberOfMessagesSent", account, queue)
    elif action == "DeleteMessage":
        count_queue("NumberOfMessagesDeleted", account, queue)
    elif action == "ReceiveMessage":
        received = len(data.get("Messages") or ())
        count_queue("NumberOfMessagesReceived" if received else "NumberOfEmptyReceives",
                    account, queue, received or 1)
    elif action in ("SendMessageBatch", "DeleteMessageBatch"):
        name = "NumberOfMessagesSent" if action == "SendMessageBatch" else (
            "NumberOfMessagesDeleted")
        count_queue(name, account, queue, len(data.get("Successful") or ()))
        count_queue("Errors", account, queue, len(data.get("Failed") or ()))


def emitting() -> bool:
    """True when EMF metrics are on (on Lambda, or DMQ_METRICS=emf)."""
    return _state.metrics is not None


def queue_gauges(account: str, queue: str, gauges: Mapping[str, float],
                 age_s: float) -> None:
    """One queue's gauges (message counts, and the oldest message's age in seconds) as
    one EMF document with the dimensions Account and Queue, printed now."""
    if _state.metrics is None:
        return
    with _flush_lock:
        document = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
        document.add_dimension(name="Account", value=account or "-")
        document.add_dimension(name="Queue", value=queue or "-")
        for name, value in gauges.items():
            document.add_metric(name=name, unit=MetricUnit.Count, value=value)
        document.add_metric(name="ApproximateAgeOfOldestMessage", unit=MetricUnit.Seconds,
                            value=age_s)
        document.flush_metrics()


def queue_totals() -> dict[QueueKey, float]:
    """Every per-queue count since the process started, by (metric, account, queue)."""
    with _queue_counts._lock:
        return dict(_queue_counts.totals)


def replication_lags() -> dict[str, int]:
    """The largest lag of the last batch applied to each target region, in ms."""
    with _queue_counts._lock:
        return dict(_queue_counts.lags_ms)


def queue_replication_lag(account: str, queue: str, target_region: str, lag_ms: int) -> None:
    """The largest lag of a queue's changes in a batch applied to a region: kept for
    `GET /metrics`, and one EMF document (Account, Queue, TargetRegion) when metrics are on."""
    key = (_label(account), _label(queue), target_region)
    with _queue_counts._lock:
        lags = _queue_counts.queue_lags_ms
        if key in lags or len(lags) < MAX_SERIES:
            lags[key] = lag_ms
    if _state.metrics is None:
        return
    with _flush_lock:
        document = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
        document.add_dimension(name="Account", value=account or "-")
        document.add_dimension(name="Queue", value=queue or "-")
        document.add_dimension(name="TargetRegion", value=target_region)
        document.add_metric(name="QueueReplicationLagMs", unit=MetricUnit.Milliseconds,
                            value=lag_ms)
        document.flush_metrics()


def queue_replication_lags() -> dict[tuple[str, str, str], int]:
    """The last replication lag of each (account, queue, target region), in ms."""
    with _queue_counts._lock:
        return dict(_queue_counts.queue_lags_ms)


def replication_lag(target_region: str, lag_ms: int) -> None:
    """The largest lag of a batch applied to a region: one EMF document, dimension
    TargetRegion (its own document, since each region is a different dimension value)."""
    with _queue_counts._lock:
        _queue_counts.lags_ms[target_region] = lag_ms
    if _state.metrics is None:
        return
    with single_metric(name="ReplicationLagMs", unit=MetricUnit.Milliseconds, value=lag_ms,
                       namespace=NAMESPACE,
                       default_dimensions={"service": SERVICE}) as metric:
        metric.add_dimension(name="TargetRegion", value=target_region)


def flush() -> None:
    """Print the metrics gathered so far as one EMF document (nothing when none), then
    one document per queue counted since the last flush."""
    metrics = _state.metrics
    if metrics is None:
        return
    with _flush_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an invocation without metrics is normal
        metrics.flush_metrics()
        for (account, queue), counts in _queue_counts.take_pending().items():
            document = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
            document.add_dimension(name="Account", value=account or "-")
            document.add_dimension(name="Queue", value=queue or "-")
            for name, value in counts.items():
                document.add_metric(name=name, unit=MetricUnit.Count, value=value)
            document.flush_metrics()


def flushed(handler: Handler) -> Handler:
    """Flush the invocation's metrics when the handler returns or raises (log_metrics)."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]
