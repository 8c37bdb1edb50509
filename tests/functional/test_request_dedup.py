"""GIVEN sends to a standard queue that carry the SDK's amz-sdk-invocation-id WHEN the
response of a send is lost after the write (a read timeout) and botocore retries with the
same invocation id THEN the retry gets the first response and nothing is enqueued twice;
other invocation ids, other parameters, a retry after 5 minutes, FIFO queues and
DMQ_REQUEST_DEDUP=off each send as usual; a retry meeting a first attempt still under way
is told to retry, and a first attempt that failed or crashed does not block its retries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from chalice.test import Client

from app import app, runtime
from chalicelib.aws import Clients
from chalicelib.backend.request_records import (
    DONE,
    PENDING,
    TTL_SLACK_S,
    RequestKey,
    RequestRecords,
)
from chalicelib.clock import FakeClock
from chalicelib.domain.exceptions import StoreUnavailableError
from chalicelib.domain.queues import QueueRecord
from chalicelib.service.exceptions import ServiceUnavailableError
from chalicelib.service.request_dedup import LEASE_MS, WINDOW_MS, RequestDedup, fingerprint
from chalicelib.settings import Settings
from dmqlocal.ttl_sweep import sweep_expired_records
from tests.conftest import ENDPOINT, _Raw

ACCOUNT = "000000000000"
MESSAGES_TABLE = "dmq-messages"
CONTROL_TABLE = "dmq-control"
RETRYING = Config(retries={"mode": "standard", "max_attempts": 3})


class Wire:
    """Serves a boto3 client's requests in process; can lose the next responses after the
    app has served them (the client sees a read timeout) and pin the invocation id."""

    def __init__(self, dmq: Client) -> None:
        self.dmq = dmq
        self.lose = 0
        self.invocation_id: str | None = None
        self.attempts: list[tuple[str, str]] = []  # (invocation id, amz-sdk-request)

    def serve(self, request: Any, **kwargs: Any) -> AWSResponse:
        headers = {k: v.decode() if isinstance(v, bytes) else v
                   for k, v in request.headers.items()}
        headers["Host"] = "dmq.test"
        if self.invocation_id is not None:
            headers["amz-sdk-invocation-id"] = self.invocation_id
        self.attempts.append((headers.get("amz-sdk-invocation-id", ""),
                              headers.get("amz-sdk-request", "")))
        result = self.dmq.http.request(request.method, request.url[len(ENDPOINT):] or "/",
                                       headers=headers, body=request.body or b"")
        if self.lose > 0:
            self.lose -= 1
            raise ReadTimeoutError(endpoint_url=request.url)
        return AWSResponse(request.url, result.status_code, result.headers, _Raw(result.body))


# The tests read the stored items to count what was enqueued: queues without encryption
# at rest, so bodies are readable there (docs/encryption.md).
PLAIN = {"SqsManagedSseEnabled": "false"}


@pytest.fixture
def wire(dmq: Client) -> Wire:
    return Wire(dmq)


@pytest.fixture
def client(wire: Wire) -> Any:
    """boto3's SQS client in standard retry mode (3 attempts), over the wire above."""
    sqs = boto3.client("sqs", endpoint_url=ENDPOINT, region_name="us-east-1", config=RETRYING)
    sqs.meta.events.register_first("before-send.sqs", wire.serve)
    return sqs


def stored(aws: Clients, name: str) -> list[dict[str, Any]]:
    """The queue's messages as the table holds them, read with the test's own client."""
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    return [i for i in items if str(i["pk"]["S"]).startswith(f"{ACCOUNT}/{name}#")
            and "body" in i]


def records(aws: Clients) -> list[dict[str, Any]]:
    items = aws.dynamodb.scan(TableName=CONTROL_TABLE)["Items"]
    return [i for i in items if str(i["key"]["S"]).startswith("request#")]


def test_a_send_retried_after_a_timeout_after_the_write_is_enqueued_once(
        client: Any, wire: Wire, aws: Clients, clock: FakeClock) -> None:
    url = client.create_queue(QueueName="once", Attributes=PLAIN)["QueueUrl"]
    wire.attempts.clear()
    # WHEN the first response is lost after DMQ stored the message
    wire.lose = 1
    sent = client.send_message(QueueUrl=url, MessageBody="pay 10 EUR")
    # THEN botocore retried with the same invocation id, and the retry got the first answer
    assert [a[1].split(";")[0] for a in wire.attempts] == ["attempt=1", "attempt=2"]
    assert wire.attempts[0][0] == wire.attempts[1][0] != ""
    assert sent["ResponseMetadata"]["RetryAttempts"] == 1
    (message,) = stored(aws, "once")
    assert message["sk"]["S"] == sent["MessageId"]
    assert message["body"]["S"] == "pay 10 EUR"
    # AND the record holds the first response until 5 minutes after the request, with a TTL
    (record,) = records(aws)
    assert record["state"]["S"] == DONE
    assert record["key"]["S"] == (f"request#{ACCOUNT}#{ACCOUNT}/once#SendMessage#"
                                  f"{wire.attempts[0][0]}")
    assert int(record["expires_ms"]["N"]) == clock.now_ms() + WINDOW_MS
    assert int(record["expires_at"]["N"]) * 1000 >= clock.now_ms() + WINDOW_MS
    received = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["MessageId"] for m in received] == [sent["MessageId"]]


def test_a_batch_retried_after_a_timeout_after_the_write_is_enqueued_once(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="batch-once", Attributes=PLAIN)["QueueUrl"]
    entries = [{"Id": f"e{i}", "MessageBody": f"body {i}"} for i in range(10)]
    wire.lose = 2  # two lost answers: the third attempt gets the first answer
    sent = client.send_message_batch(QueueUrl=url, Entries=entries)
    assert sent["ResponseMetadata"]["RetryAttempts"] == 2
    assert len({a[0] for a in wire.attempts[-3:]}) == 1
    assert sorted(s["Id"] for s in sent["Successful"]) == sorted(e["Id"] for e in entries)
    assert sent.get("Failed", []) == []
    held = stored(aws, "batch-once")
    assert len(held) == 10
    assert {i["sk"]["S"] for i in held} == {s["MessageId"] for s in sent["Successful"]}


def test_different_invocation_ids_enqueue_twice(client: Any, aws: Clients) -> None:
    url = client.create_queue(QueueName="twice", Attributes=PLAIN)["QueueUrl"]
    first = client.send_message(QueueUrl=url, MessageBody="same body")
    second = client.send_message(QueueUrl=url, MessageBody="same body")
    assert first["MessageId"] != second["MessageId"]
    assert len(stored(aws, "twice")) == 2
    assert len(records(aws)) == 2


def test_the_same_id_enqueues_again_after_five_minutes(
        client: Any, wire: Wire, aws: Clients, clock: FakeClock) -> None:
    url = client.create_queue(QueueName="window", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = "6f1c2a9e-0000-4000-8000-000000000001"
    first = client.send_message(QueueUrl=url, MessageBody="tick")
    clock.advance(WINDOW_MS / 1000 - 1)  # 4 min 59 s later: still the first answer
    assert client.send_message(QueueUrl=url, MessageBody="tick")["MessageId"] == (
        first["MessageId"])
    assert len(stored(aws, "window")) == 1
    clock.advance(1)  # 5 minutes after the first: a new send
    again = client.send_message(QueueUrl=url, MessageBody="tick")
    assert again["MessageId"] != first["MessageId"]
    assert len(stored(aws, "window")) == 2
    # AND that send opened a new window of its own
    clock.advance(WINDOW_MS / 1000 - 1)
    assert client.send_message(QueueUrl=url, MessageBody="tick")["MessageId"] == (
        again["MessageId"])
    assert len(stored(aws, "window")) == 2


def test_the_same_id_with_other_parameters_is_not_a_retry(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="reused-id", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = "6f1c2a9e-0000-4000-8000-000000000002"
    first = client.send_message(QueueUrl=url, MessageBody="one")
    second = client.send_message(QueueUrl=url, MessageBody="two")
    assert first["MessageId"] != second["MessageId"]
    assert sorted(i["body"]["S"] for i in stored(aws, "reused-id")) == ["one", "two"]
    # AND the same id on another queue is another request
    other = client.create_queue(QueueName="reused-id-2", Attributes=PLAIN)["QueueUrl"]
    client.send_message(QueueUrl=other, MessageBody="one")
    assert len(stored(aws, "reused-id-2")) == 1


def test_a_send_without_the_header_or_with_a_malformed_one_is_not_recorded(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="no-id", Attributes=PLAIN)["QueueUrl"]
    for malformed in ("x" * 65, "not a uuid!", ""):
        wire.invocation_id = malformed
        client.send_message(QueueUrl=url, MessageBody="b")
        client.send_message(QueueUrl=url, MessageBody="b")
    assert len(stored(aws, "no-id")) == 6
    assert records(aws) == []


def test_fifo_queues_keep_their_own_deduplication(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="own.fifo", Attributes={"FifoQueue": "true", **PLAIN})[
        "QueueUrl"]
    wire.lose = 1
    sent = client.send_message(QueueUrl=url, MessageBody="f", MessageGroupId="g",
                               MessageDeduplicationId="d1")
    assert sent["ResponseMetadata"]["RetryAttempts"] == 1
    assert records(aws) == []  # the FIFO deduplication id answered the retry
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["MessageId"] for m in got] == [sent["MessageId"]]


def test_a_failed_send_is_not_recorded_and_its_retry_sends(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="failed", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = "6f1c2a9e-0000-4000-8000-000000000003"
    with pytest.raises(client.exceptions.ClientError, match="InvalidParameterValue"):
        client.send_message(QueueUrl=url, MessageBody="late", DelaySeconds=901)
    assert records(aws) == []  # released: the failure claimed nothing
    assert client.send_message(QueueUrl=url, MessageBody="late", DelaySeconds=900)
    assert len(stored(aws, "failed")) == 1


def test_the_query_protocol_is_deduplicated_too(client: Any, dmq: Client, aws: Clients) -> None:
    url = client.create_queue(QueueName="query", Attributes=PLAIN)["QueueUrl"]
    ids = []
    for _ in range(2):
        result = dmq.http.post("/", headers={
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
            "Host": "dmq.test", "amz-sdk-invocation-id": "6f1c2a9e-0000-4000-8000-00000000000f"},
            body=urlencode({"Action": "SendMessage", "Version": "2012-11-05",
                            "QueueUrl": url, "MessageBody": "q"}))
        assert result.status_code == 200, result.body
        root = ET.fromstring(result.body)
        ids.append(root.findtext(
            "{http://queue.amazonaws.com/doc/2012-11-05/}SendMessageResult/"
            "{http://queue.amazonaws.com/doc/2012-11-05/}MessageId"))
    assert ids[0] == ids[1] and ids[0]
    assert len(stored(aws, "query")) == 1


@pytest.fixture
def dedup_off(aws: Clients, settings: Settings, clock: FakeClock) -> Iterator[Client]:
    runtime.configure(replace(settings, request_dedup=False), clock)
    with Client(app) as chalice_client:
        yield chalice_client
    runtime.configure(None)


def test_with_dedup_off_a_retry_enqueues_again(dedup_off: Client, aws: Clients) -> None:
    wire = Wire(dedup_off)
    sqs = boto3.client("sqs", endpoint_url=ENDPOINT, region_name="us-east-1", config=RETRYING)
    sqs.meta.events.register_first("before-send.sqs", wire.serve)
    url = sqs.create_queue(QueueName="off", Attributes=PLAIN)["QueueUrl"]
    wire.lose = 1
    sqs.send_message(QueueUrl=url, MessageBody="dup")
    assert len(stored(aws, "off")) == 2
    assert records(aws) == []


# -- the service on its own: concurrent retries, crashes, store faults -------------------


@pytest.fixture
def queue(client: Any, dmq: Client) -> QueueRecord:
    client.create_queue(QueueName="service", Attributes=PLAIN)
    return runtime.services_for("us-east-1").queues.get(ACCOUNT, "service")


class Sleeps:
    def __init__(self) -> None:
        self.count = 0
        self.then: Any = None

    def __call__(self, seconds: float) -> None:
        self.count += 1
        if self.then is not None:
            self.then()
            self.then = None


def _dedup(aws: Clients, clock: FakeClock, sleeps: Sleeps, wait_s: float = 0.3) -> RequestDedup:
    return RequestDedup(RequestRecords(aws.dynamodb, CONTROL_TABLE), clock, sleeps,
                        wait_s=wait_s)


KEY_ID = "6f1c2a9e-0000-4000-8000-0000000000aa"


def test_two_concurrent_attempts_cannot_both_send(
        queue: QueueRecord, aws: Clients, clock: FakeClock) -> None:
    sleeps = Sleeps()
    dedup = _dedup(aws, clock, sleeps)
    records_ = RequestRecords(aws.dynamodb, CONTROL_TABLE)
    key = RequestKey(ACCOUNT, queue.queue_id, "SendMessage", KEY_ID)
    sent: list[str] = []

    def first() -> dict[str, Any]:
        # WHILE the first attempt is sending, its retry arrives: it finds the claim pending
        with pytest.raises(ServiceUnavailableError, match="still being served"):
            dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1}, second)
        assert records_.read(key).state == PENDING  # type: ignore[union-attr]
        sent.append("first")
        return {"MessageId": "m-1"}

    def second() -> dict[str, Any]:
        sent.append("second")
        return {"MessageId": "m-2"}

    assert dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1}, first) == {
        "MessageId": "m-1"}
    assert sent == ["first"]
    assert sleeps.count >= 1  # the retry waited before answering
    # AND a later retry gets the first response
    assert dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1}, second) == {
        "MessageId": "m-1"}
    assert sent == ["first"]


def test_a_retry_waiting_on_the_first_attempt_gets_its_response_when_it_completes(
        queue: QueueRecord, aws: Clients, clock: FakeClock) -> None:
    sleeps = Sleeps()
    dedup = _dedup(aws, clock, sleeps, wait_s=5.0)
    records_ = RequestRecords(aws.dynamodb, CONTROL_TABLE)
    key = RequestKey(ACCOUNT, queue.queue_id, "SendMessage", KEY_ID)
    digest = fingerprint("SendMessage", {"b": 1})
    assert records_.claim(key, "first-token", digest, clock.now_ms(), LEASE_MS, WINDOW_MS).claimed
    sleeps.then = lambda: records_.complete(key, "first-token", {"MessageId": "m-1"})
    answer = dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1},
                        lambda: pytest.fail("the retry must not send"))
    assert answer == {"MessageId": "m-1"}


def test_a_claim_left_by_a_crash_is_taken_over_after_its_lease(
        queue: QueueRecord, aws: Clients, clock: FakeClock) -> None:
    dedup = _dedup(aws, clock, Sleeps())
    records_ = RequestRecords(aws.dynamodb, CONTROL_TABLE)
    key = RequestKey(ACCOUNT, queue.queue_id, "SendMessage", KEY_ID)
    digest = fingerprint("SendMessage", {"b": 1})
    # GIVEN a first attempt that claimed, then crashed before sending
    assert records_.claim(key, "crashed", digest, clock.now_ms(), LEASE_MS, WINDOW_MS).claimed
    with pytest.raises(ServiceUnavailableError):  # within the lease: retry later
        dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1}, lambda: {"MessageId": "x"})
    clock.advance(LEASE_MS / 1000)
    assert dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1},
                      lambda: {"MessageId": "m-2"}) == {"MessageId": "m-2"}
    assert records_.read(key).response == {"MessageId": "m-2"}  # type: ignore[union-attr]
    # AND the crashed attempt, were it to come back, could not overwrite the record
    assert not records_.complete(key, "crashed", {"MessageId": "m-1"})


class FlakyRecords(RequestRecords):
    """Claims that fail as a timeout after the write does: written, then an error."""

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        super().claim(*args, **kwargs)
        raise StoreUnavailableError("read timeout after the write")


def test_a_claim_the_store_does_not_answer_fails_fast_and_sends_nothing(
        queue: QueueRecord, aws: Clients, clock: FakeClock) -> None:
    # GIVEN a claim that times out (here after landing, the worst case)
    dedup = RequestDedup(FlakyRecords(aws.dynamodb, CONTROL_TABLE), clock, Sleeps())
    sent: list[str] = []
    # WHEN a send is served THEN it is not sent: the store's silence is the answer (503),
    # so a frozen store costs one store budget, not one per call
    with pytest.raises(StoreUnavailableError):
        dedup.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1},
                   lambda: sent.append("m-1") or {"MessageId": "m-1"})
    assert sent == []
    # AND a retry once the landed claim's lease is over sends, once, and is recorded
    clock.advance(LEASE_MS / 1000)
    healthy = RequestDedup(RequestRecords(aws.dynamodb, CONTROL_TABLE), clock, Sleeps())
    assert healthy.once(queue, ACCOUNT, "SendMessage", KEY_ID, {"b": 1},
                        lambda: {"MessageId": "m-2"}) == {"MessageId": "m-2"}
    record = RequestRecords(aws.dynamodb, CONTROL_TABLE).read(
        RequestKey(ACCOUNT, queue.queue_id, "SendMessage", KEY_ID))
    assert record is not None and record.state == DONE
    assert record.response == {"MessageId": "m-2"}


def test_the_local_sweep_removes_expired_request_records_only(
        aws: Clients, clock: FakeClock) -> None:
    # GIVEN request records of two ages and another control item (moto, like DynamoDB
    # Local, never deletes expired items itself)
    records_ = RequestRecords(aws.dynamodb, CONTROL_TABLE)
    old = [RequestKey(ACCOUNT, f"{ACCOUNT}/q", "SendMessage", f"old-{i}") for i in range(30)]
    for key in old:
        records_.claim(key, "t", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS)
    clock.advance(WINDOW_MS / 1000)
    young = RequestKey(ACCOUNT, f"{ACCOUNT}/q", "SendMessage", "young")
    records_.claim(young, "t", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS)
    aws.dynamodb.put_item(TableName=CONTROL_TABLE, Item={
        "key": {"S": "cluster#default"}, "expires_at": {"N": "1"}})
    # WHEN the sweep runs past the TTL of the old ones (the window plus the TTL's slack)
    clock.advance(TTL_SLACK_S + 1)
    assert sweep_expired_records(aws.dynamodb, CONTROL_TABLE, clock.now_ms() // 1000) == 30
    # THEN the young record and the other item stay
    left = {i["key"]["S"] for i in aws.dynamodb.scan(TableName=CONTROL_TABLE)["Items"]}
    assert young.item_key in left and "cluster#default" in left
    assert not any(k.item_key in left for k in old)
    # AND a record found past its window is treated as gone even before a sweep
    clock.advance(WINDOW_MS / 1000)
    assert records_.claim(young, "new", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS).claimed


def test_a_retried_claim_put_recognises_its_own_claim(aws: Clients, clock: FakeClock) -> None:
    # GIVEN a claim put applied whose answer was lost, so that the store client puts again
    records_ = RequestRecords(aws.dynamodb, CONTROL_TABLE)
    key = RequestKey(ACCOUNT, f"{ACCOUNT}/q", "SendMessage", KEY_ID)
    assert records_.claim(key, "mine", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS).claimed
    # THEN the second put, under the same token, is the same claim; another token is not
    assert records_.claim(key, "mine", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS).claimed
    other = records_.claim(key, "theirs", "fp", clock.now_ms(), LEASE_MS, WINDOW_MS)
    assert not other.claimed and other.existing is not None
    assert other.existing.token == "mine" and other.existing.state == PENDING
