"""Counts in process: the stream handlers that keep the shard counts, run on demand.

The app keeps message counts from the messages streams. The local server's pump reads
them in the background; tests served in process have no pump, so a count read runs
one here first, synchronously, as `runtime.count_catch_up`.
"""

from __future__ import annotations

import threading

from chalice.app import DynamoDBEventConfig

from app import app
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from dmqlocal.handlers import StreamBinding, stream_bindings
from dmqlocal.pump import StreamPump

COUNTING = "archive_messages_"  # the consumer that counts (and archives)
MAX_PASSES = 20


class CountPumps:
    """One pump per region over the counting handlers only, run until it is idle."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pumps: dict[str, StreamPump] = {}
        self._lock = threading.Lock()

    def __call__(self, region: str) -> None:
        with self._lock:
            pump = self._pumps.get(region)
            if pump is None:
                clients = Clients(self._settings, region)
                pump = StreamPump(clients.dynamodb, clients.streams, counting_bindings(),
                                  region)
                self._pumps[region] = pump
            for _ in range(MAX_PASSES):
                if not pump.poll_once():
                    return


def counting_bindings() -> list[StreamBinding]:
    """The app's stream handlers that keep the counts."""
    names = [s.handler_string for s in app.event_sources if isinstance(s, DynamoDBEventConfig)]
    return [b for b, name in zip(stream_bindings(app), names, strict=True)
            if name.rpartition(".")[2].startswith(COUNTING)]
