"""Isolation per cluster in the store access layer (docs/isolation.md): a bulkhead (a bound
on concurrent store calls) and a circuit breaker (failures and slow calls, half-open
probes), attached to a boto3 client through botocore's events, so that one stalled
cluster neither holds every server thread nor makes every request wait for the whole
store budget.

The one call to make where a cluster's client is built::

    guard_client(client, cluster, GuardSettings.from_env(os.environ),
                 tables=[messages_table], state_store=store)
"""

from __future__ import annotations

from chalicelib.backend.guard.cluster_guard import ClusterGuard
from chalicelib.backend.guard.exempt import unguarded, watched
from chalicelib.backend.guard.hooks import attach_guard, detach_guard, guard_client, guards_of
from chalicelib.backend.guard.state_store import (
    BreakerState,
    BreakerStateStore,
    ControlTableStateStore,
    InProcessStateStore,
    SharedState,
    state_store_for,
)
from chalicelib.settings_guard import ENV_NAMES, GuardSettings

__all__ = [
    "ENV_NAMES",
    "BreakerState",
    "BreakerStateStore",
    "ClusterGuard",
    "ControlTableStateStore",
    "GuardSettings",
    "InProcessStateStore",
    "SharedState",
    "attach_guard",
    "detach_guard",
    "guard_client",
    "guards_of",
    "state_store_for",
    "unguarded",
    "watched",
]
