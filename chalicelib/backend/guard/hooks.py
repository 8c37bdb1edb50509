"""The botocore event hooks that put the calls of a client through cluster guards, with no
change where the calls are made.

A client gets one set of hooks, whatever the number of its guards. A guard watches either
every call of the client, or only the calls that name its tables (a client shared by
several clusters, and by the control table, as the main endpoint's client is):
`before-parameter-build` notes the tables a call names; `before-call` admits the call
through each guard that applies, or raises `ClusterUnavailableError` (nothing is sent);
`after-call` and `after-call-error`, which botocore emits once per API call (after its own
retries), give the slots back and record the outcome and how long the call took. Should
a hook raise before those run, the slots come back once botocore drops the call (see
`cluster_guard.Lease`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.backend.guard.cluster_guard import ClusterGuard, Lease
from chalicelib.backend.guard.exempt import exempt, set_watcher, watcher_of
from chalicelib.backend.guard.state_store import BreakerStateStore
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import ClusterUnavailableError
from chalicelib.dynamo_errors import is_fault_answer, is_store_fault
from chalicelib.settings_guard import GuardSettings

_LEASES = "dmq_guard_leases"
_TABLES = "dmq_guard_tables"
_create_lock = threading.Lock()


@dataclass(frozen=True)
class _Route:
    guard: ClusterGuard
    tables: frozenset[str] | None  # None: every call of the client


class ClientHooks:
    """The guards of one client and the hooks, registered once, that apply them."""

    def __init__(self, client: Any) -> None:
        self._routes: tuple[_Route, ...] = ()  # replaced whole: the hooks read it unlocked
        self._lock = threading.Lock()
        service = client.meta.service_model.service_id.hyphenize()
        events = client.meta.events
        events.register(f"before-parameter-build.{service}", self._params)
        # Admit last, so a hook that refuses the call first takes no slot; settle first,
        # so a hook that raises after the answer keeps no slot.
        events.register_last(f"before-call.{service}", self._before)
        events.register_first(f"after-call.{service}", self._after)
        events.register_first(f"after-call-error.{service}", self._after_error)

    def add(self, guard: ClusterGuard, tables: frozenset[str] | None) -> None:
        """Guard every call (`tables` None) or the calls naming one of `tables`;
        ValueError if that would put a call through two guards."""
        with self._lock:
            for route in self._routes:
                if route.guard is guard or route.tables is None or tables is None:
                    raise ValueError("this client's calls are already guarded")
                if not route.tables.isdisjoint(tables):
                    raise ValueError(f"tables {sorted(route.tables & tables)} are already "
                                     f"guarded as cluster {route.guard.cluster}")
            self._routes = (*self._routes, _Route(guard, tables))

    def remove(self, guard: ClusterGuard) -> None:
        """Stop guarding calls with `guard`."""
        with self._lock:
            self._routes = tuple(r for r in self._routes if r.guard is not guard)

    def guards(self) -> list[ClusterGuard]:
        """The guards, in the order they were added."""
        return [r.guard for r in self._routes]

    def watches(self, table: str) -> bool:
        """True when a call naming `table` goes through a guard."""
        return any(r.tables is None or table in r.tables for r in self._routes)

    # -- the hooks -----------------------------------------------------------------------
    def _params(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        if any(r.tables is not None for r in self._routes):
            context[_TABLES] = tables_of(params)

    def _before(self, context: dict[str, Any], **_: Any) -> None:
        if exempt():
            return
        named: frozenset[str] = context.get(_TABLES, frozenset())
        guards = [r.guard for r in self._routes
                  if r.tables is None or not r.tables.isdisjoint(named)]
        leases: list[Lease] = []
        try:
            for guard in guards:
                leases.append(guard.admit())
        except ClusterUnavailableError:
            for lease in leases:
                lease.finish(None)
            raise
        if leases:
            context[_LEASES] = leases

    def _after(self, http_response: Any, parsed: Mapping[str, Any],
               context: dict[str, Any], **_: Any) -> None:
        leases: list[Lease] = context.pop(_LEASES, [])
        if leases:
            status = int(getattr(http_response, "status_code", 200) or 200)
            failed = is_fault_answer(status, parsed)
            for lease in leases:
                lease.finish(failed)

    def _after_error(self, exception: BaseException, context: dict[str, Any],
                     **_: Any) -> None:
        leases: list[Lease] = context.pop(_LEASES, [])
        failed = True if is_store_fault(exception) else None
        for lease in leases:
            lease.finish(failed)


def tables_of(params: Mapping[str, Any]) -> frozenset[str]:
    """The tables a DynamoDB (or Streams) request names, by name (an ARN counts as the
    name in it): TableName, a stream's ARN, the keys of RequestItems, each TransactItem."""
    found = [params.get("TableName"), params.get("StreamArn"), *params.get("RequestItems", {})]
    for item in params.get("TransactItems", []):
        found.extend(op.get("TableName") for op in item.values() if isinstance(op, dict))
    return frozenset(_table_name(str(value)) for value in found if value)


def _table_name(value: str) -> str:
    if value.startswith("arn:") and ":table/" in value:
        return value.split(":table/", 1)[1].split("/", 1)[0]
    return value


def _hooks_of(client: Any) -> ClientHooks:
    with _create_lock:
        existing = watcher_of(client)
        if isinstance(existing, ClientHooks):
            return existing
        hooks = ClientHooks(client)
        set_watcher(client, hooks)
        return hooks


def attach_guard(client: Any, guard: ClusterGuard, tables: Iterable[str] | None = None) -> None:
    """Put the calls of a botocore client through `guard`: every call, or (`tables`) only
    those naming one of those tables. ValueError if a call would meet two guards."""
    _hooks_of(client).add(guard, frozenset(tables) if tables is not None else None)


def detach_guard(client: Any, guard: ClusterGuard) -> None:
    """Stop putting the calls of a client through `guard`."""
    existing = watcher_of(client)
    if isinstance(existing, ClientHooks):
        existing.remove(guard)


def guards_of(client: Any) -> list[ClusterGuard]:
    """The guards a client's calls go through."""
    existing = watcher_of(client)
    return existing.guards() if isinstance(existing, ClientHooks) else []


def guard_client(client: Any, cluster: str, settings: GuardSettings | None = None, *,
                 tables: Iterable[str] | None = None,
                 state_store: BreakerStateStore | None = None, clock: Clock | None = None,
                 timer: Callable[[], float] = time.monotonic) -> ClusterGuard:
    """Guard a boto3 DynamoDB (or DynamoDB Streams) client with a bulkhead and a circuit
    breaker of `cluster`'s own, and return the guard.

    Every call of the client is guarded, or, given `tables` (a client shared with other
    clusters or with the control table), only the calls that name one of them. The
    breaker's state is named after the cluster (`<cluster>#<service>` for a client of
    another service than DynamoDB, such as Streams) and kept in `state_store` (this
    process when none is given). ValueError if a call would meet two guards.
    """
    service = client.meta.service_model.service_name
    name = cluster if service == "dynamodb" else f"{cluster}#{service}"
    guard = ClusterGuard(cluster, settings, state_store, clock, timer, name=name)
    attach_guard(client, guard, tables)
    return guard
