"""The last hour of each queue, for the console's plots, held in memory.

Depth: a sample of the queue's counts (visible, in flight, delayed) is kept whenever the
console reads them (every page and live refresh), at most one per `SAMPLE_EVERY_MS` per
queue, and a scheduled handler samples every queue once a minute. Reading the counts costs
what GetQueueAttributes costs, never a scan of the backlog.

Throughput: SendMessage(Batch), ReceiveMessage and DeleteMessage(Batch) requests per minute
per queue, counted as the usage meter records each request in this process.

Samples older than an hour are dropped, and at most `MAX_QUEUES` queues are followed (the
queue sampled longest ago is forgotten first), so the memory is bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from chalicelib.domain.messages import Counts

WINDOW_MS = 3600 * 1000
SAMPLE_EVERY_MS = 5000
MINUTE_MS = 60 * 1000
MAX_QUEUES = 1000
# Usage-meter actions -> the throughput series they count in.
KINDS = {
    "SendMessage": "send", "SendMessageBatch": "send",
    "ReceiveMessage": "receive",
    "DeleteMessage": "delete", "DeleteMessageBatch": "delete",
}
SERIES = ("send", "receive", "delete")
TOTAL = "*"  # the key under which every queue's figures are summed


@dataclass(frozen=True)
class Sample:
    """A queue's counts at one moment."""

    at_ms: int
    visible: int
    in_flight: int
    delayed: int


class History:
    """Depth samples and per-minute request counts of the queues, for the last hour."""

    def __init__(self, max_queues: int = MAX_QUEUES) -> None:
        self._lock = threading.Lock()
        self._max_queues = max_queues
        self._samples: OrderedDict[str, deque[Sample]] = OrderedDict()
        self._minutes: OrderedDict[str, dict[int, dict[str, int]]] = OrderedDict()

    def sample(self, queue_id: str, counts: Counts, now_ms: int) -> None:
        """Keep the counts read now (unless the queue was sampled moments ago)."""
        with self._lock:
            samples = self._samples.get(queue_id)
            if samples is None:
                samples = self._samples[queue_id] = deque()
                self._bound(self._samples)
            elif samples and now_ms - samples[-1].at_ms < SAMPLE_EVERY_MS:
                return
            self._samples.move_to_end(queue_id)
            samples.append(Sample(now_ms, counts.visible, counts.in_flight, counts.delayed))
            while samples and samples[0].at_ms < now_ms - WINDOW_MS:
                samples.popleft()

    def due(self, queue_id: str, now_ms: int) -> bool:
        """True when a sample taken now would be kept."""
        with self._lock:
            samples = self._samples.get(queue_id)
            return not samples or now_ms - samples[-1].at_ms >= SAMPLE_EVERY_MS

    def count(self, queue_id: str, action: str, now_ms: int) -> None:
        """Count one request of an action on a queue (other actions are ignored)."""
        kind = KINDS.get(action)
        if kind is None or not queue_id:
            return
        minute = now_ms - now_ms % MINUTE_MS
        with self._lock:
            for key in (queue_id, TOTAL):
                minutes = self._minutes.get(key)
                if minutes is None:
                    minutes = self._minutes[key] = {}
                    self._bound(self._minutes)
                self._minutes.move_to_end(key)
                row = minutes.setdefault(minute, dict.fromkeys(SERIES, 0))
                row[kind] += 1
                for old in [m for m in minutes if m < minute - WINDOW_MS]:
                    del minutes[old]

    def depth(self, queue_id: str, now_ms: int) -> list[Sample]:
        """The samples of the last hour, oldest first (`TOTAL`: every queue summed, as the
        queue list and the scheduled sampler record it)."""
        with self._lock:
            return [s for s in self._samples.get(queue_id, ()) if s.at_ms >= now_ms - WINDOW_MS]

    def throughput(self, queue_id: str, now_ms: int) -> list[tuple[int, dict[str, int]]]:
        """Requests per minute over the last hour, oldest first, every minute listed."""
        last = now_ms - now_ms % MINUTE_MS
        with self._lock:
            minutes = dict(self._minutes.get(queue_id, {}))
        return [(m, dict(minutes.get(m, dict.fromkeys(SERIES, 0))))
                for m in range(last - WINDOW_MS + MINUTE_MS, last + 1, MINUTE_MS)]

    def _bound(self, table: OrderedDict[str, Any]) -> None:
        # `TOTAL` always stays: it is what the queue list plots
        while len(table) > self._max_queues + 1:
            oldest = next(k for k in table if k != TOTAL)
            del table[oldest]
