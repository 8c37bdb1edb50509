"""Usage records: requests, bytes and billing units per account, queue, action, outcome and
minute. The account is the caller's (from its credential), whatever queue it named: a
refused call on another account's queue is the caller's usage, with the outcome `denied`
(`ok` when it succeeded, else the error code).

Counts are aggregated in memory and flushed as one archive object per flush (gzip JSON
lines under `usage/<yyyy>/<mm>/<dd>/<hh>/`), never one write per request. A flush happens
when the oldest unflushed count is `flush_interval_s` old or when `max_keys` minutes of
counts are held, at the first request after that; the local server and a scheduled
handler also flush on a timer, and the local server at shutdown. The same minute may
appear in several flushes: readers add them up.

Billing follows SQS: each 64 KB chunk of a request's payload is one billed request,
and every request is at least one.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from chalicelib.backend.archive import Sink, hour_path, json_lines_gz
from chalicelib.clock import Clock

BILLING_CHUNK_BYTES = 64 * 1024

logger = logging.getLogger("dmq.usage")


def billing_units(payload_bytes: int) -> int:
    """Billed requests for one request: one per started 64 KB chunk, at least one."""
    return max(1, -(-payload_bytes // BILLING_CHUNK_BYTES))


@dataclass
class _Counts:
    requests: int = 0
    bytes: int = 0
    billing_units: int = 0


UsageKey = tuple[str, str, str, str, str]  # account, queue, action, minute (UTC, ISO), outcome
# Called with (account, queue, action, payload bytes) for every request recorded that was
# not refused: the web console counts its throughput plot this way (a refused call did
# nothing to the queue it named).
Listener = Callable[[str, str, str, int], None]
OK = "ok"
DENIED = "denied"


class UsageMeter:
    """Thread-safe in-memory counters with batched flushes to a sink."""

    def __init__(self, sink: Sink, clock: Clock, flush_interval_s: float = 60.0,
                 max_keys: int = 10_000, listeners: Sequence[Listener] = ()) -> None:
        self._sink = sink
        self._listeners = listeners  # the caller's list: listeners added later count too
        self._clock = clock
        self._interval_ms = int(flush_interval_s * 1000)
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._counts: dict[UsageKey, _Counts] = {}
        self._oldest_ms: int | None = None
        self._retry_at_ms = 0  # after a failed flush, requests do not retry before this
        self.flushes = 0
        self._minute: tuple[int, str] = (-1, "")  # the last minute formatted: (number, text)

    def record(self, account: str, queue: str, action: str, payload_bytes: int,
               outcome: str = OK) -> None:
        """Count one request; flush if the held counts are due (never raises for a flush)."""
        now_ms = self._clock.now_ms()
        minute = self._minute_of(now_ms)
        with self._lock:
            counts = self._counts.setdefault((account, queue, action, minute, outcome),
                                             _Counts())
            counts.requests += 1
            counts.bytes += payload_bytes
            counts.billing_units += billing_units(payload_bytes)
            if self._oldest_ms is None:
                self._oldest_ms = now_ms
            due = now_ms >= self._retry_at_ms and (
                len(self._counts) >= self._max_keys
                or now_ms - self._oldest_ms >= self._interval_ms)
        for hook in self._listeners if outcome != DENIED else ():
            hook(account, queue, action, payload_bytes)
        if due:
            self._flush_quietly(now_ms)

    def _minute_of(self, now_ms: int) -> str:
        """The minute of `now_ms` (UTC, ISO), formatted once per minute."""
        kept = self._minute
        if kept[0] == now_ms // 60_000:
            return kept[1]
        minute = datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M")
        self._minute = (now_ms // 60_000, minute)
        return minute

    def _flush_quietly(self, now_ms: int) -> None:
        """A flush on a request's path: a failing sink must not fail the request. The
        counts stay held, and requests try again after another interval."""
        try:
            self.flush()
        except Exception:  # metering never fails a request
            logger.exception("usage flush failed; the counts are kept for the next one")
            with self._lock:
                self._retry_at_ms = now_ms + self._interval_ms

    def pending(self) -> int:
        """How many (account, queue, action, minute, outcome) counts wait for a flush."""
        with self._lock:
            return len(self._counts)

    def flush(self) -> str | None:
        """Write the held counts as one object; return its key (None when there were none)."""
        with self._lock:
            counts, self._counts, self._oldest_ms = self._counts, {}, None
        if not counts:
            return None
        now = datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)
        key = f"usage/{hour_path(now)}/{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex}.json.gz"
        rows = [
            {"account": account, "queue": queue, "action": action, "minute": minute,
             "outcome": outcome, "requests": c.requests, "bytes": c.bytes,
             "billing_units": c.billing_units}
            for (account, queue, action, minute, outcome), c in sorted(counts.items())
        ]
        try:
            self._sink.put(key, json_lines_gz(rows))
        except Exception:
            self._restore(counts)
            raise
        self.flushes += 1
        return key

    def _restore(self, counts: dict[UsageKey, _Counts]) -> None:
        """Put back counts whose flush failed, so the next flush carries them."""
        with self._lock:
            for key, c in counts.items():
                held = self._counts.setdefault(key, _Counts())
                held.requests += c.requests
                held.bytes += c.bytes
                held.billing_units += c.billing_units
            if self._oldest_ms is None:
                self._oldest_ms = self._clock.now_ms()
