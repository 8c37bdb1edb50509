"""Counts the DynamoDB requests of the local server, for the benchmark (local runs only).

With DMQ_COUNT_DYNAMODB=1, botocore event hooks on the DynamoDB client the runtime
builds for each region (the message stores and the control table share it) count
requests per operation, and `GET /_dmq/dynamodb-calls` answers the cumulative figures
as JSON. Queue metadata goes through PynamoDB's own client, whose reads DMQ caches; it
is not counted, and neither is the stream pump's polling.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from chalicelib.runtime import Runtime

ENV = "DMQ_COUNT_DYNAMODB"
PATH = "/_dmq/dynamodb-calls"
_STARTED = "dmq_count_started"
_OPERATION = "dmq_count_operation"

Response = tuple[int, dict[str, str], bytes]


class CallCounter:
    """Requests, errors and seconds per operation, requests per table and operation (a
    request naming several tables counts for each), and items a Query returned and read.

    A request counts once however many times botocore retries it; its time runs from
    `before-call` to `after-call`, so it includes any wait for the store.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._tables: dict[str, dict[str, int]] = {}
        self._errors: dict[str, int] = {}
        self._seconds: dict[str, float] = {}
        self._returned = 0
        self._scanned = 0
        self._clients: list[Any] = []

    def attach(self, client: Any) -> None:
        """Register the hooks on a botocore DynamoDB client (once per client)."""
        if any(c is client for c in self._clients):
            return
        self._clients.append(client)
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)
        client.meta.events.register("after-call-error.dynamodb", self._after_error)

    def detach(self) -> None:
        """Unregister the hooks from every client they were registered on."""
        for client in self._clients:
            client.meta.events.unregister("before-call.dynamodb", self._before)
            client.meta.events.unregister("after-call.dynamodb", self._after)
            client.meta.events.unregister("after-call-error.dynamodb", self._after_error)
        self._clients.clear()

    def snapshot(self) -> dict[str, Any]:
        """The cumulative figures as plain data."""
        with self._lock:
            return {"calls": dict(self._calls),
                    "tables": {t: dict(ops) for t, ops in self._tables.items()},
                    "errors": dict(self._errors),
                    "seconds": {k: round(v, 6) for k, v in self._seconds.items()},
                    "items_returned": self._returned, "items_scanned": self._scanned}

    def _before(self, model: Any, params: dict[str, Any], context: dict[str, Any],
                **_: Any) -> None:
        context[_STARTED] = time.perf_counter()
        context[_OPERATION] = model.name
        tables = _tables_of(params)
        with self._lock:
            self._calls[model.name] = self._calls.get(model.name, 0) + 1
            for table in tables:
                per_table = self._tables.setdefault(table, {})
                per_table[model.name] = per_table.get(model.name, 0) + 1

    def _after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any],
               **_: Any) -> None:
        failed = "Error" in parsed
        self._finish(model.name, context, failed)
        if model.name == "Query" and not failed:
            with self._lock:
                self._returned += int(parsed.get("Count", 0))
                self._scanned += int(parsed.get("ScannedCount", 0))

    def _after_error(self, context: dict[str, Any], **_: Any) -> None:
        self._finish(str(context.get(_OPERATION, "?")), context, failed=True)

    def _finish(self, name: str, context: dict[str, Any], failed: bool) -> None:
        elapsed = time.perf_counter() - float(context.get(_STARTED, time.perf_counter()))
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + elapsed
            if failed:
                self._errors[name] = self._errors.get(name, 0) + 1


def _tables_of(params: Mapping[str, Any]) -> set[str]:
    """The tables a request names (its serialized JSON body)."""
    try:
        body = json.loads(params.get("body") or b"{}")
    except ValueError:
        return set()
    names = {body.get("TableName"), *body.get("RequestItems", {})}
    names |= {op.get("TableName") for item in body.get("TransactItems", [])
              for op in item.values()}
    return {str(n) for n in names if n}


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether DMQ_COUNT_DYNAMODB asks for counting."""
    return environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def install(runtime: Runtime, regions: tuple[str, ...] | list[str],
            environ: Mapping[str, str]) -> CallCounter | None:
    """Attach a counter to each region's DynamoDB client when counting is on."""
    if not enabled(environ):
        return None
    counter = CallCounter()
    for region in regions:
        for client in runtime.backend(region).clients.dynamodb_clients():
            counter.attach(client)
    return counter


def _not_found() -> Response:
    body = {"__type": "com.amazonaws.sqs#InvalidAddress",
            "message": f"{PATH} answers only when {ENV}=1 is set."}
    headers = {"Content-Type": "application/x-amz-json-1.0",
               "x-amzn-query-error": "InvalidAddress;Sender"}
    return 404, headers, json.dumps(body).encode()


def respond(counter: CallCounter | None) -> Response:
    """The counts as JSON, or a 404 in the SQS error shape when counting is off."""
    if counter is None:
        return _not_found()
    body = json.dumps(counter.snapshot()).encode()
    return 200, {"Content-Type": "application/json"}, body


def routes(counter: CallCounter | None) -> dict[str, Callable[[], Response]]:
    """The local server's GET routes for the counts."""
    return {PATH: lambda: respond(counter)}
