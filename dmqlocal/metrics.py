"""`GET /metrics`: the local server's metrics in the Prometheus text format.

Counters come from `chalicelib.observability` (kept in memory since the process
started: messages sent, received and deleted, empty receives, errors, throttles and
dead-letter moves per queue). Gauges are read when a scrape comes, per queue of every
live region: visible, in-flight and delayed messages (what GetQueueAttributes answers:
the shard counts kept from the stream, less the hidden part of the visibility index, so
the cost never grows with the visible backlog; a scrape does not wait for the stream, so
they trail the writes by about a second) and the age of the oldest message (the oldest of
a bounded sample of each shard): see `chalicelib.frontend.queue_metrics`.

A scrape costs the same whatever the number of queues: it is answered with the last
rendering of the whole exposition (`shared_render.py`), made anew at most once per
`cache_s` and never more often than ten times its own duration, by one thread while
concurrent scrapers share it. Who may scrape is `metrics_access.py`'s business.
"""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from chalicelib import observability
from chalicelib.clock import SystemClock
from chalicelib.frontend import queue_metrics
from chalicelib.frontend.queue_metrics import QueueGauges
from chalicelib.runtime import Runtime
from dmqlocal.shared_render import SharedRender

PATH = "/metrics"
CACHE_S = 1.0
logger = logging.getLogger("dmq.metrics")

Response = tuple[int, dict[str, str], bytes]

# Counter name in Prometheus -> the observability metric it exposes.
COUNTERS = {
    "dmq_messages_sent": "NumberOfMessagesSent",
    "dmq_messages_received": "NumberOfMessagesReceived",
    "dmq_messages_deleted": "NumberOfMessagesDeleted",
    "dmq_empty_receives": "NumberOfEmptyReceives",
    "dmq_errors": "Errors",
    "dmq_throttles": "Throttles",
    "dmq_dead_letter_moves": "DeadLetterMoves",
}
GAUGES = {
    "dmq_messages_visible": "messages available for retrieval (ApproximateNumberOfMessages)",
    "dmq_messages_in_flight": "messages received and not yet deleted or visible again "
                              "(ApproximateNumberOfMessagesNotVisible)",
    "dmq_messages_delayed": "messages waiting out a delay (ApproximateNumberOfMessagesDelayed)",
    "dmq_oldest_message_age_seconds": "age of the oldest message in the queue "
                                      "(ApproximateAgeOfOldestMessage; 0 when empty)",
    "dmq_queue_shards": "shards taking the queue's new messages (set by the autoscaler or "
                        "an admin; draining ones are not counted)",
}


def read_gauges(runtime: Runtime, now_ms: Callable[[], int]) -> list[QueueGauges]:
    """Every queue's gauges, region by region; a region that is down or failing is left
    out of this scrape (its queues reappear when it answers)."""
    found: list[QueueGauges] = []
    for region in runtime.settings.all_regions:
        try:
            found += queue_metrics.read(runtime.services_for(region), region, now_ms(),
                                        stores=runtime.backend(region).stores)
        except Exception:  # a scrape shows what answers, never a 500
            logger.warning("metrics of region %s left out of this scrape", region,
                           exc_info=True)
    return found


class DmqCollector(Collector):
    """The Prometheus families of one scrape but the per-queue gauges (`render_gauges`)."""

    def collect(self) -> Iterator[Metric]:
        totals = observability.queue_totals()
        for name, metric in COUNTERS.items():
            family = CounterMetricFamily(name, observability.QUEUE_METRICS[metric],
                                         labels=["account", "queue"])
            for (counted, account, queue), value in sorted(totals.items()):
                if counted == metric:
                    family.add_metric([account, queue], value)
            yield family
        lag = GaugeMetricFamily("dmq_replication_lag_seconds",
                                "largest replication lag of the last batch applied to a "
                                "target region", labels=["target_region"])
        for region, lag_ms in sorted(observability.replication_lags().items()):
            lag.add_metric([region], lag_ms / 1000)
        yield lag
        queue_lag = GaugeMetricFamily("dmq_queue_replication_lag_seconds",
                                      "largest replication lag of a queue's changes in the "
                                      "last batch applied to a target region",
                                      labels=["account", "queue", "target_region"])
        for (account, queue, region), lag_ms in sorted(
                observability.queue_replication_lags().items()):
            queue_lag.add_metric([account, queue, region], lag_ms / 1000)
        yield queue_lag


def _gauge_values(g: QueueGauges) -> tuple[float, ...]:
    """A queue's gauges, in the order of GAUGES."""
    return (g.visible, g.in_flight, g.delayed, g.oldest_age_s, g.shards)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_gauges(gauges: Iterable[QueueGauges]) -> bytes:
    """The per-queue gauge families in the text format, as prometheus_client writes
    them (labels in name order; the same bytes: tests/unit/test_metrics_exposition.py).
    Written here rather than through metric families: with 10,000 queues, building and
    writing 50,000 samples through prometheus_client took about 0.6 s of the scrape's
    CPU, this about a tenth of it."""
    rows = [(f'{{account="{_label(g.account)}",queue="{_label(g.queue)}",'
             f'region="{_label(g.region)}"}} ', _gauge_values(g)) for g in gauges]
    out: list[str] = []
    for index, (name, text) in enumerate(GAUGES.items()):
        help_text = text.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        out.extend(f"{name}{labels}{floatToGoString(values[index])}\n"
                   for labels, values in rows)
    return "".join(out).encode("utf-8")


class MetricsEndpoint:
    """Renders the exposition, at most once per `cache_s` (0: at every scrape), shared by
    concurrent scrapes."""

    def __init__(self, runtime: Runtime, cache_s: float = CACHE_S,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._runtime = runtime
        self._now_ms = now_ms or SystemClock().now_ms
        self.reads = 0  # gauge reads of the store, for tests
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(DmqCollector())
        self._shared = SharedRender(self._render, cache_s)
        self._gzip_lock = threading.Lock()
        self._gzipped: tuple[bytes, bytes] | None = None  # (rendering, compressed)

    def _read_gauges(self) -> list[QueueGauges]:
        self.reads += 1
        return read_gauges(self._runtime, self._now_ms)

    def _render(self) -> bytes:
        """The whole exposition: the counters and lags, then every queue's gauges."""
        return generate_latest(self.registry) + render_gauges(self._read_gauges())

    @property
    def renders(self) -> int:
        """How many times the exposition was rendered."""
        return self._shared.renders

    def respond(self, gzipped: bool = False) -> Response:
        """The text exposition format, version 0.0.4; gzipped (as Prometheus asks for it)
        once per rendering, not per scrape."""
        body = self._shared.get()
        headers = {"Content-Type": CONTENT_TYPE_PLAIN_0_0_4}
        if not gzipped:
            return 200, headers, body
        with self._gzip_lock:
            if self._gzipped is None or self._gzipped[0] is not body:
                self._gzipped = (body, gzip.compress(body, compresslevel=5))
            return 200, {**headers, "Content-Encoding": "gzip"}, self._gzipped[1]
