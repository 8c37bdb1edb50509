"""Structured logs and CloudWatch metrics, through aws-lambda-powertools.

On Lambda (or with DMQ_LOG_FORMAT=json) the `dmq` loggers write one JSON object per
line, with the request's id, account, queue and action appended while a request is
served. Metrics are Embedded Metric Format documents in the `DMQ` namespace, printed
to stdout (where Lambda's log agent turns them into metrics): each handler's metrics are
flushed when its invocation ends, and the replication lag of each target region is one
document with a `TargetRegion` dimension. Locally, logs stay human-readable and no
metric is printed unless asked (DMQ_METRICS=emf).
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
from aws_lambda_powertools.metrics import MetricUnit

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


def configure(json_logs: bool, emit_metrics: bool, level: str = "INFO") -> None:
    """Turn structured logs and EMF metrics on or off (once per container; tests switch)."""
    if json_logs and _state.structured is None:
        # Chalice's own plain handler on its app logger (also named dmq) would print
        # every line a second time.
        base = logging.getLogger(SERVICE)
        for handler in list(base.handlers):
            base.removeHandler(handler)
        _state.structured = Logger(service=SERVICE, level=level, logger_handler=_handler)
        # Loggers named after their module (chalicelib.*) get the same JSON output.
        copy_config_to_registered_loggers(source_logger=_state.structured,
                                          include={"chalicelib"})
    _handler.enabled = json_logs
    _state.metrics = Metrics(namespace=NAMESPACE, service=SERVICE) if emit_metrics else None


def request_keys(headers: Mapping[str, str], body: bytes | None,
                 default_account: str) -> dict[str, str]:
    """Action, account and queue of an SQS request, read leniently (bad input is the
    protocol's to reject; here it only leaves a key empty). Only structured logs use
    them: with those off, nothing is parsed."""
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
        url = data.get("QueueUrl")
        if isinstance(url, str) and url.count("/") >= 2:
            account, queue = url.rstrip("/").rsplit("/", 2)[-2:]
        elif isinstance(data.get("QueueName"), str):
            queue = data["QueueName"]
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


def replication_lag(target_region: str, lag_ms: int) -> None:
    """The largest lag of a batch applied to a region: one EMF document, dimension
    TargetRegion (its own document, since each region is a different dimension value)."""
    if _state.metrics is None:
        return
    with single_metric(name="ReplicationLagMs", unit=MetricUnit.Milliseconds, value=lag_ms,
                       namespace=NAMESPACE,
                       default_dimensions={"service": SERVICE}) as metric:
        metric.add_dimension(name="TargetRegion", value=target_region)


def flush() -> None:
    """Print the metrics gathered so far as one EMF document (nothing when none)."""
    metrics = _state.metrics
    if metrics is None:
        return
    with _flush_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an invocation without metrics is normal
        metrics.flush_metrics()


def flushed(handler: Handler) -> Handler:
    """Flush the invocation's metrics when the handler returns or raises (log_metrics)."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]
