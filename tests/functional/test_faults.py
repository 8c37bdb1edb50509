"""GIVEN DynamoDB faults under send, receive and delete WHEN clients retry as SDK users do
THEN no acknowledged message is lost and every failure is a proper SQS error.

Faults are raised from `before-call` handlers on the message store's botocore client
(`runtime.backend().stores.of("default")._db`).
botocore emits `before-call` in `_make_api_call` before
`_make_request`, and its retry loop lives inside `_make_request`, so a fault raised there
reaches DMQ's code as if the store client had used up its own retries (standard mode,
`DMQ_STORE_ATTEMPTS` tries in all, chalicelib/aws.py). A fault injected one
layer lower, at `before-send`, is absorbed by those retries instead (see the first test).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from tests.clocks import FakeClock
from tests.legacy_tables import use_legacy_index

ENDPOINT = "http://dmq.test"
DYNAMODB_URL = "https://dynamodb.us-east-1.amazonaws.com"
MESSAGES_TABLE = "dmq-messages"
CONTROL_TABLE = "dmq-control"
VISIBILITY = 30

# What chalicelib/frontend/errors.py maps the store's errors to: StoreThrottledError is
# RequestThrottled (400, as SQS documents it); StoreUnavailableError and any other
# StoreError are ServiceUnavailable (503, SenderFault false).
THROTTLED = ("RequestThrottled", 400)
UNAVAILABLE = ("ServiceUnavailable", 503)
SQS_ERRORS = dict([THROTTLED, UNAVAILABLE])
EXPECTED = {
    "throttle": THROTTLED,
    "throttling": THROTTLED,
    "request-limit": THROTTLED,
    "internal": UNAVAILABLE,
    "read-timeout": UNAVAILABLE,
    "connect-timeout": UNAVAILABLE,
    "applied-timeout": UNAVAILABLE,
    "cancel-throttle": UNAVAILABLE,
}
REQUEST_FAULTS = [k for k in EXPECTED if k != "cancel-throttle"]

# Injected DynamoDB errors: kind -> (error code, HTTP status).
_CLIENT_ERRORS = {
    "throttle": ("ProvisionedThroughputExceededException", 400),
    "throttling": ("ThrottlingException", 400),
    "request-limit": ("RequestLimitExceeded", 400),
    "internal": ("InternalServerError", 500),
    "condition": ("ConditionalCheckFailedException", 400),
}

Schedule = Callable[[int, dict[str, Any]], str | None]


# -- fault injection --------------------------------------------------------------------
def every(n: int, *kinds: str) -> Schedule:
    """Fail every n-th call of the operation, cycling through `kinds`."""

    def schedule(call: int, request: dict[str, Any]) -> str | None:
        if call % n:
            return None
        return kinds[(call // n - 1) % len(kinds)]

    return schedule


def first(k: int, kind: str) -> Schedule:
    """Fail the first k calls of the operation."""
    return lambda call, request: kind if call <= k else None


def claims_only(schedule: Schedule) -> Schedule:
    """Apply `schedule` to claim transactions only (counting them from 1), not to the
    delete and visibility batches that also go by TransactWriteItems."""
    seen = [0]

    def only_claims(call: int, request: dict[str, Any]) -> str | None:
        ops = request.get("TransactItems", [])
        if not all(op.get("Update", {}).get("ConditionExpression") == "visible_at = :seen"
                   for op in ops):
            return None
        seen[0] += 1
        return schedule(seen[0], request)

    return only_claims


def pattern(*steps: str | None) -> Schedule:
    """The n-th call gets `steps[(n - 1) % len(steps)]` (None: the call goes through)."""
    return lambda call, request: steps[(call - 1) % len(steps)]


def by_deletes(single: Schedule, batched: Schedule) -> Schedule:
    """For TransactWriteItems: transactions deleting one message follow `single`, the
    others `batched`, each counting its own calls (a delete's transaction also holds
    its count updates)."""
    calls: Counter[bool] = Counter()

    def schedule(call: int, request: dict[str, Any]) -> str | None:
        alone = sum("Delete" in op for op in request.get("TransactItems", [])) == 1
        calls[alone] += 1
        return (single if alone else batched)(calls[alone], request)

    return schedule


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


def _message_ids(value: Any) -> set[str]:
    """Every message id (`sk`) named anywhere in a DynamoDB request."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "sk" and isinstance(inner, dict) and "S" in inner:
                found.add(str(inner["S"]))
            else:
                found |= _message_ids(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _message_ids(inner)
    return found


class Faults:
    """Deterministic faults per DynamoDB operation on one botocore client.

    Kinds: throttle / throttling / request-limit / internal / condition (a ClientError),
    read-timeout / connect-timeout (nothing written), applied-timeout (the call is made,
    then its answer is lost: an ambiguous write), cancel-throttle (TransactWriteItems
    cancelled with ThrottlingError reasons), cancel-condition (TransactWriteItems
    cancelled, the entries `lose` picks by position failing their condition as if another
    receiver had won them, the others innocent) and unprocessed (BatchWriteItem writes
    what `hold` lets through and hands the rest back as UnprocessedItems).
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: Counter[str] = Counter()
        self.injected: Counter[tuple[str, str]] = Counter()
        self.ambiguous: set[str] = set()
        self.hold: Callable[[dict[str, Any]], bool] = lambda request: True
        self.lose: Callable[[int], bool] = lambda position: True
        self._schedules: dict[str, Schedule] = {}
        self._passthrough = False

    def add(self, operation: str, schedule: Schedule) -> None:
        """Inject faults into `operation` (counting its calls from 1) on `schedule`."""
        self.calls[operation] = 0
        if operation not in self._schedules:
            self.client.meta.events.register_first(
                f"before-call.dynamodb.{operation}", self._handler(operation),
                unique_id=_uid(operation),
            )
        self._schedules[operation] = schedule

    def clear(self) -> None:
        """Remove every fault."""
        for operation in self._schedules:
            self.client.meta.events.unregister(
                f"before-call.dynamodb.{operation}", unique_id=_uid(operation)
            )
        self._schedules.clear()

    def count(self, operation: str | None = None) -> int:
        """How many faults were injected (into one operation, or in all)."""
        return sum(n for (op, _), n in self.injected.items() if operation in (None, op))

    def _handler(self, operation: str) -> Callable[..., Any]:
        def before_call(params: dict[str, Any], **kwargs: Any) -> Any:
            if self._passthrough:
                return None
            request = json.loads(params.get("body") or b"{}")
            if request.get("TableName") == CONTROL_TABLE:
                return None  # control items, not the message store's
            self.calls[operation] += 1
            kind = self._schedules[operation](self.calls[operation], request)
            if kind is None:
                return None
            self.injected[(operation, kind)] += 1
            return self._inject(operation, kind, request)

        return before_call

    def _inject(self, operation: str, kind: str, request: dict[str, Any]) -> Any:
        if kind in _CLIENT_ERRORS:
            raise self._error(operation, *_CLIENT_ERRORS[kind])
        if kind == "cancel-throttle":
            reasons = [{"Code": "ThrottlingError", "Message": "Throughput exceeds the limit"}
                       for _ in request["TransactItems"]]
            raise self._error(operation, "TransactionCanceledException", 400,
                              CancellationReasons=reasons)
        if kind == "cancel-condition":
            lost = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
            reasons = [lost if self.lose(position) else {"Code": "None"}
                       for position in range(len(request["TransactItems"]))]
            raise self._error(operation, "TransactionCanceledException", 400,
                              CancellationReasons=reasons)
        if kind == "read-timeout":
            raise ReadTimeoutError(endpoint_url=DYNAMODB_URL)
        if kind == "connect-timeout":
            raise ConnectTimeoutError(endpoint_url=DYNAMODB_URL)
        if kind == "applied-timeout":
            self.real(operation, request)
            self.ambiguous |= _message_ids(request)
            raise ReadTimeoutError(endpoint_url=DYNAMODB_URL)
        if kind == "unprocessed":
            return self._unprocessed(request)
        raise AssertionError(f"unknown fault {kind}")

    def real(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        """Make the call for real, past the fault handlers."""
        self._passthrough = True
        try:
            return dict(getattr(self.client, xform_name(operation))(**request))
        finally:
            self._passthrough = False

    def _unprocessed(self, request: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        ((table, writes),) = request["RequestItems"].items()
        held = [w for w in writes if self.hold(w)]
        through = [w for w in writes if w not in held]
        if through:
            result = self.real("BatchWriteItem", {"RequestItems": {table: through}})
            held += result.get("UnprocessedItems", {}).get(table, [])
        parsed = {"UnprocessedItems": {table: held} if held else {},
                  "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}}}
        return AWSResponse(DYNAMODB_URL, 200, {}, _Raw(b"{}")), parsed

    def _error(self, operation: str, code: str, status: int, **extra: Any) -> ClientError:
        response: Any = {
            "Error": {"Code": code, "Message": f"injected {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}},
            **extra,
        }
        error: ClientError = self.client.exceptions.from_code(code)(response, operation)
        return error


def _uid(operation: str) -> str:
    return f"dmq-test-fault-{operation}"


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Shard picks and contention shuffles draw from `random`: make runs repeatable."""
    random.seed(20240601)


def _client(dmq: Client, invocation_ids: bool) -> Any:
    sqs = boto3.client("sqs", endpoint_url=ENDPOINT, region_name="us-east-1",
                       config=Config(retries={"mode": "standard", "total_max_attempts": 1}))

    def serve(request: Any, **kwargs: Any) -> AWSResponse:
        path = request.url[len(ENDPOINT):] or "/"
        headers = {k: v.decode() if isinstance(v, bytes) else v
                   for k, v in request.headers.items()
                   if invocation_ids or k.lower() != "amz-sdk-invocation-id"}
        headers["Host"] = "dmq.test"
        result = dmq.http.request(request.method, path, headers=headers,
                                  body=request.body or b"")
        return AWSResponse(request.url, result.status_code, result.headers, _Raw(result.body))

    sqs.meta.events.register_first("before-send.sqs", serve)
    return sqs


@pytest.fixture
def client(dmq: Client) -> Any:
    """An SQS client with retries off: the test retries, as an SDK user would.

    (botocore's `max_attempts` counts retries after the first try; `total_max_attempts`
    counts every try, so 1 means no retry at all.) Its sends carry the SDK's invocation
    id, so they are deduplicated: one conditional PutItem, or a TransactWriteItems of
    conditional Puts for a batch (docs/request-dedup.md).
    """
    return _client(dmq, invocation_ids=True)


@pytest.fixture
def plain_client(dmq: Client) -> Any:
    """The same client without the invocation id header: its sends are not deduplicated
    (PutItem, or BatchWriteItem for a batch)."""
    return _client(dmq, invocation_ids=False)


# The send paths: the store operation a batch of each client goes by.
SEND_PATHS = [("client", "TransactWriteItems"), ("plain_client", "BatchWriteItem")]


@pytest.fixture
def faults(dmq: Client) -> Iterator[Faults]:
    """The fault injector on the message store's DynamoDB client, removed after the test."""
    injector = Faults(runtime.backend().stores.of("default")._db)
    yield injector
    injector.clear()


@pytest.fixture
def url(client: Any) -> str:
    return str(client.create_queue(QueueName="faulty")["QueueUrl"])


# -- client-side helpers ----------------------------------------------------------------
def sqs_error(exc: ClientError) -> str:
    """Check that a failed call is a proper SQS error (never a bare 500); return its code."""
    error, meta = exc.response["Error"], exc.response["ResponseMetadata"]
    code, status = error.get("Code", ""), meta["HTTPStatusCode"]
    assert status != 500, exc.response
    assert SQS_ERRORS.get(code) == status, exc.response
    assert meta["HTTPHeaders"].get("x-amzn-query-error", "").startswith(f"{code};"), meta
    assert "Traceback" not in str(error.get("Message", "")), error
    return str(code)


def failed_entries(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch response's Failed entries, each checked to be a server-side fault."""
    failed = list(response.get("Failed", []))
    for entry in failed:
        assert entry["Code"] == "ServiceUnavailable", entry
        assert entry["SenderFault"] is False, entry
    return failed


@dataclass
class Ledger:
    """What a client saw: acknowledged ids and the errors on the way."""

    acknowledged: dict[str, str] = field(default_factory=dict)  # MessageId -> body
    errors: Counter[str] = field(default_factory=Counter)
    failed_entries: int = 0
    calls: int = 0


def send_one(sqs: Any, url: str, body: str, ledger: Ledger, tries: int = 20) -> None:
    """SendMessage, sent again only after an error."""
    for _ in range(tries):
        ledger.calls += 1
        try:
            response = sqs.send_message(QueueUrl=url, MessageBody=body)
        except ClientError as exc:
            ledger.errors[sqs_error(exc)] += 1
            continue
        ledger.acknowledged[response["MessageId"]] = body
        return
    pytest.fail(f"{body} was never acknowledged")


def send_batch(sqs: Any, url: str, bodies: list[str], ledger: Ledger, tries: int = 20) -> None:
    """SendMessageBatch; after an error all entries go again, otherwise the Failed ones."""
    pending = {f"m{i}": body for i, body in enumerate(bodies)}
    for _ in range(tries):
        if not pending:
            return
        ledger.calls += 1
        entries = [{"Id": i, "MessageBody": b} for i, b in pending.items()]
        try:
            response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except ClientError as exc:
            ledger.errors[sqs_error(exc)] += 1
            continue
        failed = failed_entries(response)
        ok = response.get("Successful", [])
        assert sorted([e["Id"] for e in ok] + [e["Id"] for e in failed]) == sorted(pending)
        ledger.failed_entries += len(failed)
        for entry in ok:
            ledger.acknowledged[entry["MessageId"]] = pending.pop(entry["Id"])
    assert not pending, f"never acknowledged: {pending}"


def receive(sqs: Any, url: str, limit: int = 10) -> list[dict[str, Any]]:
    response = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=limit, VisibilityTimeout=VISIBILITY,
        MessageSystemAttributeNames=["All"],
    )
    return list(response.get("Messages", []))


def delete_all(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    """DeleteMessageBatch with no faults in force: every entry must succeed."""
    for start in range(0, len(messages), 10):
        chunk = messages[start:start + 10]
        entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]}
                   for i, m in enumerate(chunk)]
        response = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        assert not response.get("Failed"), response
        assert len(response["Successful"]) == len(chunk)


def drain(sqs: Any, url: str) -> Counter[str]:
    """Receive and delete until the queue answers empty; deliveries per MessageId."""
    delivered: Counter[str] = Counter()
    while messages := receive(sqs, url):
        delivered.update(m["MessageId"] for m in messages)
        delete_all(sqs, url, messages)
    return delivered


def stored_ids(aws: Clients) -> set[str]:
    """The message ids in the table, read with the test's own (fault-free) client."""
    return {str(i["sk"]["S"]) for i in aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]}


def report(scenario: str, **counts: object) -> None:
    print(f"[faults] {scenario}: " + " ".join(f"{k}={v}" for k, v in counts.items()))


def assert_nothing_lost(ledger: Ledger, delivered: Counter[str], faults: Faults,
                        bodies: list[str]) -> None:
    lost = set(ledger.acknowledged) - set(delivered)
    assert not lost, f"{len(lost)} acknowledged messages lost"
    assert max(delivered.values()) == 1, "a drained message came back after its delete"
    # Every message id delivered but never acknowledged comes from an ambiguous write.
    assert set(delivered) - set(ledger.acknowledged) <= faults.ambiguous
    assert set(ledger.acknowledged.values()) == set(bodies)


# -- the layering: why faults are raised from before-call ------------------------------
def test_a_throttle_below_before_call_is_retried_by_the_store_client(
    client: Any, url: str, faults: Faults
) -> None:
    # GIVEN one throttled PutItem answered at the HTTP layer (before-send), where the
    # store client's own retries (standard mode, DMQ_STORE_ATTEMPTS tries) apply
    db = faults.client
    sends: Counter[str] = Counter()
    body = json.dumps({
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "injected",
    }).encode()

    def throttle_once(request: Any, **kwargs: Any) -> AWSResponse | None:
        if json.loads(request.body or b"{}").get("TableName") == CONTROL_TABLE:
            return None  # a control item, not the message
        sends["PutItem"] += 1
        if sends["PutItem"] > 1:
            return None
        return AWSResponse(request.url, 400, {"x-amzn-RequestId": "r"}, _Raw(body))

    db.meta.events.register_first("before-send.dynamodb.PutItem", throttle_once,
                                  unique_id="dmq-test-send-throttle")
    try:
        # WHEN a message is sent THEN botocore retried under DMQ and the send succeeds
        assert client.send_message(QueueUrl=url, MessageBody="m")["MessageId"]
        assert sends["PutItem"] == 2
    finally:
        db.meta.events.unregister("before-send.dynamodb.PutItem",
                                  unique_id="dmq-test-send-throttle")
    # AND a throttle raised from before-call is not retried: DMQ itself sees it
    faults.add("PutItem", first(1, "throttle"))
    with pytest.raises(ClientError) as caught:
        client.send_message(QueueUrl=url, MessageBody="m")
    assert sqs_error(caught.value) == "RequestThrottled"
    assert sends["PutItem"] == 2  # no HTTP attempt at all for the faulted call


# -- 1. sends -------------------------------------------------------------------------
@pytest.mark.parametrize(("sender", "batch_operation"), SEND_PATHS)
def test_throttled_and_timed_out_sends_lose_no_acknowledged_message(
    request: pytest.FixtureRequest, url: str, faults: Faults, sender: str,
    batch_operation: str,
) -> None:
    # GIVEN every 3rd PutItem and every 3rd batch write fails (throttles, timeouts,
    # server errors, and writes that land but whose answer is lost)
    client = request.getfixturevalue(sender)
    kinds = ("throttle", "read-timeout", "applied-timeout", "internal", "connect-timeout",
             "throttling", "request-limit")
    faults.add("PutItem", every(3, *kinds))
    faults.add(batch_operation, every(3, *reversed(kinds)))
    bodies = [f"message-{i:02d}" for i in range(60)]
    ledger = Ledger()
    # WHEN 30 go by SendMessage and 30 by SendMessageBatch, each retried only on error
    for body in bodies[:30]:
        send_one(client, url, body, ledger)
    for start in range(30, 60, 10):
        send_batch(client, url, bodies[start:start + 10], ledger)
    faults.clear()
    # THEN after the faults stop every acknowledged message is received
    delivered = drain(client, url)
    report("sends", calls=ledger.calls, faults=faults.count(), errors=dict(ledger.errors),
           acknowledged=len(ledger.acknowledged), delivered=len(delivered),
           duplicates_from_ambiguous_writes=len(set(delivered) - set(ledger.acknowledged)),
           lost=len(set(ledger.acknowledged) - set(delivered)))
    assert faults.count("PutItem") >= 10 and faults.count(batch_operation) >= 1
    assert set(ledger.errors) == {"RequestThrottled", "ServiceUnavailable"}
    assert_nothing_lost(ledger, delivered, faults, bodies)
    assert len(ledger.acknowledged) == 60


def test_batch_entries_left_unprocessed_fail_alone_and_are_not_lost(
    plain_client: Any, url: str, faults: Faults
) -> None:
    # GIVEN sends without an invocation id (batches go by BatchWriteItem), which leaves
    # every 4th message unprocessed on its first 5 tries
    client = plain_client
    bodies = [f"message-{i:02d}" for i in range(60)]
    sticky = set(bodies[1::4])
    # Items hold encrypted bodies: an entry is known by the MD5 of its plaintext body.
    sticky_digests = {hashlib.md5(b.encode()).hexdigest() for b in sticky}
    tries: Counter[str] = Counter()

    def hold(write: dict[str, Any]) -> bool:
        digest = str(write["PutRequest"]["Item"]["body_md5"]["S"])
        tries[digest] += 1
        return digest in sticky_digests and tries[digest] <= 5

    faults.hold = hold
    faults.add("BatchWriteItem", lambda call, request: "unprocessed")
    faults.add("PutItem", every(3, "throttle", "read-timeout"))
    ledger = Ledger()
    # WHEN the messages go in batches of 10 (Failed entries sent again) and singly
    for start in range(0, 40, 10):
        send_batch(client, url, bodies[start:start + 10], ledger)
    for body in bodies[40:]:
        send_one(client, url, body, ledger)
    faults.clear()
    # THEN the held entries came back as Failed (ServiceUnavailable, SenderFault false)
    # and nothing acknowledged is lost
    delivered = drain(client, url)
    report("batch-unprocessed", calls=ledger.calls, failed_entries=ledger.failed_entries,
           errors=dict(ledger.errors), acknowledged=len(ledger.acknowledged),
           delivered=len(delivered), lost=len(set(ledger.acknowledged) - set(delivered)))
    assert ledger.failed_entries == len(sticky & set(bodies[:40]))
    assert_nothing_lost(ledger, delivered, faults, bodies)
    assert len(ledger.acknowledged) == len(delivered) == 60


# -- 2. receives ------------------------------------------------------------------------
@pytest.mark.parametrize("index", ["current", "legacy"])
def test_receive_faults_on_query_and_claim_lose_no_message(
    client: Any, url: str, faults: Faults, clock: FakeClock, aws: Clients, index: str
) -> None:
    # GIVEN 90 acknowledged messages (in a table whose index projects whole messages, or
    # in one of an earlier version, whose claims are read back with BatchGetItem)
    if index == "legacy":
        use_legacy_index(aws.dynamodb)
    ledger = Ledger()
    bodies = [f"message-{i:02d}" for i in range(90)]
    for start in range(0, 90, 10):
        send_batch(client, url, bodies[start:start + 10], ledger)
    # AND every 3rd Query, every 3rd claim transaction (TransactWriteItems), every 2nd
    # read-back of claimed items (BatchGetItem) and every 2nd single claim (UpdateItem)
    # fails, some claims landing
    faults.add("Query", every(3, "throttle", "read-timeout", "connect-timeout",
                              "request-limit", "internal"))
    faults.add("TransactWriteItems", claims_only(every(
        3, "throttle", "applied-timeout", "cancel-throttle", "read-timeout", "internal",
        "applied-timeout")))
    faults.add("BatchGetItem", every(2, "throttling", "read-timeout", "internal"))
    faults.add("UpdateItem", every(2, "throttle", "applied-timeout", "read-timeout"))
    # WHEN a consumer receives and deletes, waiting out the visibility timeout whenever
    # the queue looks empty (messages claimed by a failed receive are hidden until then)
    delivered: Counter[str] = Counter()
    receive_counts: dict[str, int] = {}
    errors: Counter[str] = Counter()
    waits = 0
    for _ in range(200):
        if len(delivered) == 90:
            break
        try:
            messages = receive(client, url)
        except ClientError as exc:
            errors[sqs_error(exc)] += 1
            continue
        if not messages:
            clock.advance(VISIBILITY + 1)
            waits += 1
            continue
        for m in messages:
            delivered[m["MessageId"]] += 1
            receive_counts[m["MessageId"]] = int(m["Attributes"]["ApproximateReceiveCount"])
        delete_all(client, url, messages)
    faults.clear()
    clock.advance(VISIBILITY + 1)
    leftover = receive(client, url)
    # THEN every message was delivered once, no 500 on the way, nothing left behind
    stranded = sum(1 for n in receive_counts.values() if n > 1)
    report("receive", faults=dict(faults.injected), errors=dict(errors), waits=waits,
           acknowledged=len(ledger.acknowledged), delivered=len(delivered),
           stranded_then_redelivered=stranded,
           lost=len(set(ledger.acknowledged) - set(delivered)))
    assert set(delivered) == set(ledger.acknowledged)
    assert max(delivered.values()) == 1
    assert leftover == []
    assert faults.count("Query") >= 1 and faults.count("TransactWriteItems") >= 1
    assert (faults.count("BatchGetItem") >= 1) == (index == "legacy")
    assert set(errors) == {"RequestThrottled", "ServiceUnavailable"}
    # (claims that landed before a failure in the same receive, or whose read-back
    # failed, hide their messages until the visibility timeout: delayed, never lost)
    assert stranded >= 1


# -- 3. a lost conditional claim ---------------------------------------------------------
def test_a_failed_conditional_claim_only_shortens_the_receive(
    client: Any, url: str, faults: Faults
) -> None:
    # GIVEN 5 messages and a claim transaction whose first 3 claims fail their condition
    # (another receiver won them)
    ledger = Ledger()
    send_batch(client, url, [f"message-{i}" for i in range(5)], ledger)
    faults.lose = lambda position: position < 3
    faults.add("TransactWriteItems", first(1, "cancel-condition"))
    # WHEN a consumer receives up to 10
    got = receive(client, url)
    # THEN the receive succeeds with fewer messages, the other 2 claimed in a second
    # transaction
    assert len(got) == 2
    assert faults.calls["TransactWriteItems"] == 2
    # AND the others are still visible: the next receive returns them, first receives all
    rest = receive(client, url)
    assert len(rest) == 3
    assert {m["MessageId"] for m in got + rest} == set(ledger.acknowledged)
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in got + rest)
    assert runtime.services_for().messages.stats.lost_claims == 3
    # AND a lone message whose claims fail gives an empty receive, then is received (the
    # shard was drained here, so the message sent here is handed to the receive to claim
    # without a read; that claim lost, the receive reads the shard, and loses again)
    delete_all(client, url, got + rest)
    send_one(client, url, "lone", ledger)
    faults.add("UpdateItem", first(2, "condition"))
    assert receive(client, url, limit=1) == []
    assert faults.calls["UpdateItem"] == 2
    (lone,) = receive(client, url, limit=1)
    assert lone["Body"] == "lone"
    report("conditional-claim", acknowledged=len(ledger.acknowledged),
           delivered=len(got) + len(rest) + 1, claims_failed=faults.count(), lost=0)


def test_a_store_error_after_some_claims_returns_what_was_claimed(
    client: Any, url: str, faults: Faults
) -> None:
    # GIVEN 12 messages; the first claim transaction loses 2 of its 10 claims, so the
    # other 8 are claimed in a second one, and the transaction claiming 2 more (read
    # further along the index) is throttled
    ledger = Ledger()
    send_batch(client, url, [f"message-{i}" for i in range(10)], ledger)
    send_batch(client, url, ["message-10", "message-11"], ledger)
    faults.lose = lambda position: position < 2
    faults.add("TransactWriteItems", pattern("cancel-condition", None, "throttle", None))
    # WHEN a consumer receives up to 10
    got = receive(client, url)
    # THEN it gets the 8 messages claimed before the error, not an error
    assert len(got) == 8
    assert faults.calls["TransactWriteItems"] == 3
    faults.clear()
    # AND the other four are still visible, never received
    rest = receive(client, url)
    assert len(rest) == 4
    assert {m["MessageId"] for m in got + rest} == set(ledger.acknowledged)
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in got + rest)
    # AND an error before any claim is still the client's error to retry, for a lone
    # message (UpdateItem) as for several (TransactWriteItems); the fault comes after
    # the send, whose counter update is an UpdateItem too
    delete_all(client, url, got + rest)
    send_one(client, url, "alone", ledger)
    faults.add("UpdateItem", first(1, "throttle"))
    with pytest.raises(ClientError) as throttled:
        receive(client, url)
    assert sqs_error(throttled.value) == "RequestThrottled"
    faults.add("TransactWriteItems", first(1, "throttle"))
    send_one(client, url, "another", ledger)
    with pytest.raises(ClientError) as throttled:
        receive(client, url)
    assert sqs_error(throttled.value) == "RequestThrottled"


# -- 4. deletes -------------------------------------------------------------------------
@pytest.mark.parametrize("recovery", ["same-handle", "visibility-timeout"])
def test_delete_faults_keep_the_message_until_a_delete_is_acknowledged(
    client: Any, url: str, faults: Faults, clock: FakeClock, aws: Clients, recovery: str
) -> None:
    # GIVEN 20 messages in flight
    ledger = Ledger()
    for start in range(0, 20, 10):
        send_batch(client, url, [f"message-{i:02d}" for i in range(start, start + 10)], ledger)
    messages = receive(client, url) + receive(client, url)
    assert len(messages) == 20
    # AND single deletes and batched deletes fault (both are transactions, with the
    # count update), each on its own schedule
    faults.add("TransactWriteItems", by_deletes(
        every(2, "throttle", "read-timeout", "applied-timeout", "internal", "throttling"),
        pattern("cancel-throttle", "throttle", None, "cancel-throttle", None,
                "applied-timeout", "connect-timeout", None)))
    # WHEN 10 are deleted one by one and 10 in batches of 2, once each
    acked, failed, errors = _delete_once(client, url, messages)
    # THEN acknowledged deletes are gone, failed ones are still stored (unless the
    # delete landed and only its answer was lost)
    stored = stored_ids(aws)
    assert failed and acked
    assert not acked & stored
    assert stored == failed - faults.ambiguous
    faults.clear()
    if recovery == "same-handle":
        # WHEN the failed deletes are retried with the same handles THEN they succeed
        _delete_again(client, url, [m for m in messages if m["MessageId"] in failed])
        redelivered: Counter[str] = Counter()
    else:
        # WHEN the visibility timeout passes THEN exactly the undeleted messages return
        clock.advance(VISIBILITY + 1)
        redelivered = drain(client, url)
        assert set(redelivered) == failed - faults.ambiguous
    assert stored_ids(aws) == set()
    # AND no message whose delete was acknowledged is ever received again
    clock.advance(VISIBILITY + 1)
    assert receive(client, url) == []
    report(f"delete/{recovery}", faults=dict(faults.injected), errors=dict(errors),
           deletes_acknowledged=len(acked), deletes_failed=len(failed),
           failed_but_applied=len(failed & faults.ambiguous),
           redelivered=len(redelivered), acknowledged_sends=len(ledger.acknowledged),
           lost=len((failed - faults.ambiguous) - stored),
           acknowledged_delete_came_back=len(acked & (stored | set(redelivered))))
    assert set(errors) == {"RequestThrottled", "ServiceUnavailable"}
    assert faults.injected[("TransactWriteItems", "cancel-throttle")] == 2


def _delete_once(
    sqs: Any, url: str, messages: list[dict[str, Any]]
) -> tuple[set[str], set[str], Counter[str]]:
    acked: set[str] = set()
    failed: set[str] = set()
    errors: Counter[str] = Counter()
    for m in messages[:10]:
        try:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        except ClientError as exc:
            errors[sqs_error(exc)] += 1
            failed.add(m["MessageId"])
        else:
            acked.add(m["MessageId"])
    for start in range(10, 20, 2):
        pair = messages[start:start + 2]
        entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]}
                   for i, m in enumerate(pair)]
        try:
            response = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        except ClientError as exc:
            errors[sqs_error(exc)] += 1
            failed |= {m["MessageId"] for m in pair}
            continue
        by_entry = {f"d{i}": m["MessageId"] for i, m in enumerate(pair)}
        acked |= {by_entry[e["Id"]] for e in response.get("Successful", [])}
        failed |= {by_entry[e["Id"]] for e in failed_entries(response)}
    assert len(acked) + len(failed) == len(messages)
    return acked, failed, errors


def _delete_again(sqs: Any, url: str, messages: list[dict[str, Any]]) -> None:
    singles, batched = messages[: len(messages) // 2], messages[len(messages) // 2:]
    for m in singles:
        assert sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    if batched:
        delete_all(sqs, url, batched)


# -- 5. each fault, each action: the error the client sees -------------------------------
def _expect_error(kind: str, call: Callable[[], Any]) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    code = sqs_error(caught.value)
    status = caught.value.response["ResponseMetadata"]["HTTPStatusCode"]
    assert (code, status) == EXPECTED[kind], (kind, caught.value.response)


def _fault(kind: str) -> Schedule:
    # A cancelled transaction is run again by DMQ itself: keep cancelling past its rounds.
    return first(10 if kind == "cancel-throttle" else 1, kind)


def _check_send(sqs: Any, url: str, faults: Faults, kind: str, operation: str) -> None:
    ledger = Ledger()
    batched = operation != "PutItem"
    faults.add(operation, _fault(kind))
    entries = [{"Id": f"e{i}", "MessageBody": f"{kind}-{i}"} for i in range(3)]
    if batched:
        _expect_error(kind, lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries))
    else:
        _expect_error(kind, lambda: sqs.send_message(QueueUrl=url, MessageBody=kind))
    faults.clear()
    if batched:
        send_batch(sqs, url, [e["MessageBody"] for e in entries], ledger, tries=1)
    else:
        send_one(sqs, url, kind, ledger, tries=1)
    delivered = drain(sqs, url)
    assert set(ledger.acknowledged) <= set(delivered)
    assert set(delivered) - set(ledger.acknowledged) <= faults.ambiguous


def _check_receive(sqs: Any, url: str, faults: Faults, kind: str, operation: str,
                   clock: FakeClock) -> None:
    # A lone message is claimed with UpdateItem; several with TransactWriteItems (read
    # back with BatchGetItem from a table of an earlier version).
    ledger = Ledger()
    count = 1 if operation in ("Query", "UpdateItem") else 3
    send_batch(sqs, url, [f"{kind}-{i}" for i in range(count)], ledger, tries=1)
    if operation == "Query":
        # The last receive drained the shard, so a receive would claim what was sent
        # here without a read until that receive's claims time out
        clock.advance(VISIBILITY + 1)
    faults.add(operation, _fault(kind))
    _expect_error(kind, lambda: receive(sqs, url))
    faults.clear()
    clock.advance(VISIBILITY + 1)  # a claim that landed hides the message until then
    messages = receive(sqs, url)
    assert {m["MessageId"] for m in messages} == set(ledger.acknowledged)
    delete_all(sqs, url, messages)


def _check_delete(sqs: Any, url: str, faults: Faults, kind: str, batched: bool,
                  aws: Clients) -> None:
    ledger = Ledger()
    send_batch(sqs, url, [f"{kind}-a", f"{kind}-b"], ledger, tries=1)
    messages = receive(sqs, url)
    assert len(messages) == 2
    faults.ambiguous.clear()
    if batched:
        faults.add("TransactWriteItems", _fault(kind))
        entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]}
                   for i, m in enumerate(messages)]
        _expect_error(kind, lambda: sqs.delete_message_batch(QueueUrl=url, Entries=entries))
        targets = messages
    else:
        faults.add("DeleteItem", _fault(kind))  # one message: one conditional DeleteItem
        handle = messages[0]["ReceiptHandle"]
        _expect_error(kind, lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=handle))
        targets = messages[:1]
    faults.clear()
    # The failed delete left the message in place, unless it landed (ambiguous).
    expected = {m["MessageId"] for m in messages} - faults.ambiguous
    assert stored_ids(aws) == expected, kind
    _delete_again(sqs, url, targets)
    delete_all(sqs, url, [m for m in messages if m not in targets])
    assert stored_ids(aws) == set()


# SendMessageBatch/BatchWriteItem is the batch of a send without an invocation id.
ACTIONS = ["SendMessage/PutItem", "SendMessageBatch/TransactWriteItems",
           "SendMessageBatch/BatchWriteItem",
           "ReceiveMessage/Query", "ReceiveMessage/UpdateItem",
           "ReceiveMessage/TransactWriteItems", "ReceiveMessage/BatchGetItem",
           "DeleteMessage/DeleteItem", "DeleteMessageBatch/TransactWriteItems"]


@pytest.mark.parametrize("action", ACTIONS)
def test_each_fault_reaches_the_client_as_a_documented_sqs_error(
    client: Any, plain_client: Any, url: str, faults: Faults, clock: FakeClock,
    aws: Clients, action: str,
) -> None:
    # GIVEN each kind of DynamoDB fault in turn under one action
    kinds = REQUEST_FAULTS + (["cancel-throttle"] if "Transact" in action else [])
    if action == "ReceiveMessage/BatchGetItem":
        use_legacy_index(aws.dynamodb)  # only a table of an earlier version reads claims back
    for kind in kinds:
        # WHEN the action runs once under the fault THEN the client gets the mapped SQS
        # error (never a 500), and after the fault the action succeeds with nothing lost
        if action == "SendMessageBatch/BatchWriteItem":
            _check_send(plain_client, url, faults, kind, "BatchWriteItem")
        elif action.startswith("Send"):
            _check_send(client, url, faults, kind, action.split("/")[1])
        elif action.startswith("Receive"):
            _check_receive(client, url, faults, kind, action.split("/")[1], clock)
        else:
            _check_delete(client, url, faults, kind, "Batch" in action, aws)
    report(f"matrix/{action}", faults=faults.count(), kinds=len(kinds))
