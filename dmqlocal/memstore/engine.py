"""The store's entry point: a call by name for an access key and region, answered under
one lock (each call is atomic, as each DynamoDB call is on its item or transaction)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from dmqlocal.memstore import item_calls, read_calls, stream_calls, table_calls
from dmqlocal.memstore.database import Database
from dmqlocal.memstore.errors import StoreError
from dmqlocal.memstore.transactions import Tokens, transact_get_items, transact_write_items

Call = Callable[[Database, dict[str, Any]], dict[str, Any]]
CALLS: dict[str, Call] = {**table_calls.CALLS, **stream_calls.CALLS, **item_calls.CALLS,
                          **read_calls.CALLS, "TransactGetItems": transact_get_items}
SWEEP_EVERY_S = 1.0


class Engine:
    """Every database of the store, by access key and region."""

    def __init__(self) -> None:
        self._databases: dict[tuple[str, str], tuple[Database, Tokens]] = {}
        self._lock = threading.Lock()

    def _database(self, access_key: str, region: str) -> tuple[Database, Tokens]:
        found = self._databases.get((access_key, region))
        if found is None:
            found = self._databases[(access_key, region)] = (Database(region), Tokens())
        return found

    def call(self, access_key: str, region: str, operation: str,
             request: dict[str, Any]) -> dict[str, Any]:
        """Answer one call, or raise StoreError."""
        handler = CALLS.get(operation)
        if handler is None and operation != "TransactWriteItems":
            raise StoreError("UnknownOperationException",
                             f"The in-memory store does not answer {operation}")
        if not isinstance(request, dict):
            raise StoreError("SerializationException", "The request body is not a JSON object")
        with self._lock:
            database, tokens = self._database(access_key, region)
            if handler is None:
                return transact_write_items(database, tokens, request)
            return handler(database, request)

    def sweep(self, now: float | None = None) -> int:
        """Delete expired items (TTL) and forget old closed streams; how many deleted."""
        now = time.time() if now is None else now
        deleted = 0
        with self._lock:
            for database, _ in self._databases.values():
                deleted += database.expire(now)
                database.forget_streams(now)
        return deleted

    def sweep_until(self, stop: threading.Event) -> None:
        """Sweep about every second until `stop` is set."""
        while not stop.wait(SWEEP_EVERY_S):
            self.sweep()
