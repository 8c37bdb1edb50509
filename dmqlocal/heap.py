"""The local server's garbage collector, set for a long-running server.

CPython collects its youngest generation after every 700 net allocations of container
objects. A request's objects (its parsed store answers, its event, its response) live for
the request, milliseconds to seconds under load, so at that threshold many of them
outlive two young collections, reach the oldest generation, and soon bring on a full
collection that walks every object the server holds. In the mixed soak (10,000 queues,
500 waiting consumers, 200 messages a second) that was a full collection every 3 s, each
holding the interpreter for 0.1 to 0.3 s and finding nothing to free: 29 s spent in the
collector in a 200-s run, against 1.7 s with these settings (timed in the collector's
callbacks, on a busy machine, so an upper bound).

`settle_heap`, called once the server is serving: collects, freezes what start-up built
(modules, botocore's models, the app: never garbage, never walked again) and raises the
youngest generation's threshold, so that a request's objects die young.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000  # net container allocations between young collections


def settle_heap() -> None:
    """Collect once, freeze what is left, and let young objects die before a collection."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
