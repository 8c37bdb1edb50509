"""Latency records and percentiles for the benchmark's SQS calls."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def percentile(samples: list[float], pct: float) -> float:
    """The nearest-rank percentile of `samples` (0.0 when there are none)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Latency:
    """How long one kind of call took, in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples_s: list[float]) -> Latency:
        """Summarise samples given in seconds."""
        ms = [s * 1000 for s in samples_s]
        return cls(len(ms), round(percentile(ms, 50), 2), round(percentile(ms, 99), 2),
                   round(max(ms, default=0.0), 2))


class Recorder:
    """Thread-safe latency samples, grouped by operation name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, list[float]] = {}

    @contextmanager
    def timed(self, operation: str) -> Iterator[None]:
        """Record how long the body of the `with` block takes."""
        started = time.perf_counter()
        yield
        self.add(operation, time.perf_counter() - started)

    def add(self, operation: str, seconds: float) -> None:
        """Record one sample."""
        with self._lock:
            self._samples.setdefault(operation, []).append(seconds)

    def summary(self, operation: str) -> Latency:
        """p50/p99/max of one operation."""
        with self._lock:
            return Latency.of(list(self._samples.get(operation, [])))


def call_timed(recorder: Recorder, operation: str, call: Callable[..., Any],
               **kwargs: Any) -> Any:
    """Run `call(**kwargs)` and record its latency under `operation`."""
    with recorder.timed(operation):
        return call(**kwargs)
