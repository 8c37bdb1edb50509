"""Injected DynamoDB faults for chaos runs of the local server (local runs only).

With DMQ_CHAOS=0.05, botocore event hooks on the DynamoDB client the runtime builds for
each region (the message stores and the control table share it) fail 5% of the data
calls, each with one of three faults a real DynamoDB can produce:

- `throttle`: ProvisionedThroughputExceededException, as if the client's own retries ran
  out (raised at `before-call`, outside botocore's retry loop);
- `timeout-after-write`: the call is made and lands, then its answer is lost
  (ReadTimeoutError at `after-call`); for reads, a plain read timeout (`timeout`);
- `condition`: a claim loses its condition, as when another receiver wins the message
  (ConditionalCheckFailedException, or a TransactWriteItems cancelled with one claim's
  ConditionalCheckFailed); calls other than claims get a throttle instead, since a
  write's condition holds or fails by the item's state alone.

DMQ_CHAOS_SEED makes the choice of calls repeatable. `GET /_dmq/chaos` answers the
faults injected per operation and kind, and the message ids each fault touched, so that
a run can tie every duplicate it sees to the fault that made it.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ReadTimeoutError

from chalicelib.runtime import Runtime

ENV = "DMQ_CHAOS"
SEED_ENV = "DMQ_CHAOS_SEED"
PATH = "/_dmq/chaos"
KINDS = ("throttle", "timeout-after-write", "condition")
OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                        "TransactWriteItems", "Query", "GetItem", "BatchGetItem"})
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                    "TransactWriteItems"})
CLAIM_CONDITION = "visible_at = :seen"
_LOST_ANSWER = "dmq_chaos_lost_answer"

Response = tuple[int, dict[str, str], bytes]


def rate(environ: Mapping[str, str]) -> float:
    """The fraction of calls DMQ_CHAOS asks to fail (0 when unset); ValueError if bad."""
    text = environ.get(ENV, "").strip()
    if not text:
        return 0.0
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{ENV}={text}: a fraction from 0 to 1, e.g. 0.05")
    return value


def message_ids(value: Any) -> set[str]:
    """The message ids (`sk` keys) anywhere in a DynamoDB request."""
    found: set[str] = set()
    if isinstance(value, dict):
        sk = value.get("sk")
        if isinstance(sk, dict) and isinstance(sk.get("S"), str):
            found.add(sk["S"])
        for inner in value.values():
            found |= message_ids(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= message_ids(inner)
    return found


def _is_claim(operation: str, request: dict[str, Any]) -> bool:
    if operation == "UpdateItem":
        return request.get("ConditionExpression") == CLAIM_CONDITION
    if operation == "TransactWriteItems":
        ops = request.get("TransactItems") or []
        return bool(ops) and all(
            op.get("Update", {}).get("ConditionExpression") == CLAIM_CONDITION for op in ops)
    return False


class FaultInjector:
    """Fails a fraction of one or more DynamoDB clients' data calls, and keeps count."""

    def __init__(self, fraction: float, seed: int | None = None) -> None:
        self.fraction = fraction
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.injected: Counter[tuple[str, str]] = Counter()
        self.calls = 0
        self._touched: dict[str, list[str]] = {}
        self._clients: list[Any] = []

    def attach(self, client: Any) -> None:
        """Register the hooks on a botocore DynamoDB client (once per client)."""
        if any(c is client for c in self._clients):
            return
        self._clients.append(client)
        client.meta.events.register_first("before-call.dynamodb", self._before)
        client.meta.events.register_first("after-call.dynamodb", self._after)

    def snapshot(self) -> dict[str, Any]:
        """The faults injected so far, as plain data."""
        with self._lock:
            return {
                "rate": self.fraction, "calls": self.calls,
                "injected": {f"{op} {kind}": n for (op, kind), n in sorted(self.injected.items())},
                "messages": {k: list(v) for k, v in self._touched.items()},
            }

    def _pick(self, operation: str) -> str | None:
        with self._lock:
            self.calls += 1
            if self._random.random() >= self.fraction:
                return None
            return self._random.choice(KINDS)

    def _record(self, operation: str, kind: str, request: dict[str, Any]) -> None:
        label = f"{operation} {kind}"
        with self._lock:
            self.injected[(operation, kind)] += 1
            for message_id in message_ids(request):
                self._touched.setdefault(message_id, []).append(label)

    def _before(self, model: Any, params: dict[str, Any], context: dict[str, Any],
                **_: Any) -> Any:
        operation = model.name
        if operation not in OPERATIONS:
            return None
        kind = self._pick(operation)
        if kind is None:
            return None
        request = json.loads(params.get("body") or b"{}")
        if kind == "condition" and not _is_claim(operation, request):
            kind = "throttle"
        if kind == "timeout-after-write" and operation in WRITES:
            context[_LOST_ANSWER] = request  # raised once the write has landed
            return None
        if kind == "timeout-after-write":
            self._record(operation, "timeout", request)  # a read: nothing landed
            raise ReadTimeoutError(endpoint_url="chaos")
        self._record(operation, kind, request)
        raise self._error(model, kind, request)

    def _after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any],
               **_: Any) -> None:
        request = context.pop(_LOST_ANSWER, None)
        if request is None or "Error" in parsed:
            return  # no lost answer planned, or the call failed on its own
        self._record(model.name, "timeout-after-write", request)
        raise ReadTimeoutError(endpoint_url="chaos")

    def _error(self, model: Any, kind: str, request: dict[str, Any]) -> Exception:
        client = self._clients[0]
        meta = {"HTTPStatusCode": 400, "HTTPHeaders": {}}
        if kind == "throttle":
            code = "ProvisionedThroughputExceededException"
            response: Any = {"Error": {"Code": code, "Message": "injected throttle"},
                             "ResponseMetadata": meta}
        elif model.name == "TransactWriteItems":
            code = "TransactionCanceledException"
            lost = self._random.randrange(len(request["TransactItems"]))
            reasons = [{"Code": "ConditionalCheckFailed" if i == lost else "None"}
                       for i in range(len(request["TransactItems"]))]
            response = {"Error": {"Code": code, "Message": "injected condition"},
                        "CancellationReasons": reasons, "ResponseMetadata": meta}
        else:
            code = "ConditionalCheckFailedException"
            response = {"Error": {"Code": code, "Message": "injected condition"},
                        "ResponseMetadata": meta}
        error: Exception = client.exceptions.from_code(code)(response, model.name)
        return error


def install(runtime: Runtime, regions: tuple[str, ...] | list[str],
            environ: Mapping[str, str]) -> FaultInjector | None:
    """Attach an injector to each region's DynamoDB client when DMQ_CHAOS asks for one."""
    fraction = rate(environ)
    if not fraction:
        return None
    seed_text = environ.get(SEED_ENV, "").strip()
    injector = FaultInjector(fraction, int(seed_text) if seed_text else None)
    for region in regions:
        for client in runtime.backend(region).clients.dynamodb_clients():
            injector.attach(client)
    return injector


def routes(injector: FaultInjector | None) -> dict[str, Callable[[], Response]]:
    """The local server's GET route for the injected faults (only on a chaos run)."""
    if injector is None:
        return {}
    return {PATH: lambda: (200, {"Content-Type": "application/json"},
                           json.dumps(injector.snapshot()).encode())}
