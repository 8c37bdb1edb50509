"""GIVEN sends to a standard queue that carry the SDK's amz-sdk-invocation-id WHEN the
response of a send is lost after the write (a read timeout) and botocore retries with the
same invocation id THEN the retry gets the first response and nothing is enqueued twice:
each message's id and place follow from the request, and its write is conditional, so a
SendMessage is one store request and a SendMessageBatch of ten is one. Other invocation
ids, other parameters, FIFO queues and DMQ_REQUEST_DEDUP=off send as usual; a retry that
comes after the first copy was deleted enqueues again (the window that remains)."""

from __future__ import annotations

import uuid
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
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.conftest import ENDPOINT, _Raw
from tests.dynamo_counter import DynamoCounter

ACCOUNT = "000000000000"
MESSAGES_TABLE = "dmq-messages"
BODIES_BUCKET = "dmq-bodies"
RETRYING = Config(retries={"mode": "standard", "max_attempts": 3})
PINNED = "6f1c2a9e-0000-4000-8000-000000000001"


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


def _retrying(wire: Wire) -> Any:
    sqs = boto3.client("sqs", endpoint_url=ENDPOINT, region_name="us-east-1", config=RETRYING)
    sqs.meta.events.register_first("before-send.sqs", wire.serve)
    return sqs


@pytest.fixture
def client(wire: Wire) -> Any:
    """boto3's SQS client in standard retry mode (3 attempts), over the wire above."""
    return _retrying(wire)


def stored(aws: Clients, name: str) -> list[dict[str, Any]]:
    """The queue's messages as the table holds them, read with the test's own client."""
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    return [i for i in items if str(i["pk"]["S"]).startswith(f"{ACCOUNT}/{name}#")
            and ("body" in i or "body_key" in i)]


def _version(message_id: str) -> int | None:
    return uuid.UUID(message_id).version


def test_a_send_retried_after_a_timeout_after_the_write_is_enqueued_once(
        client: Any, wire: Wire, aws: Clients) -> None:
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
    # AND the message id is derived from the request (a UUIDv8), not drawn (a UUIDv7)
    assert _version(sent["MessageId"]) == 8
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


def test_a_retry_gets_the_first_message_id_and_the_queue_holds_one_message(
        client: Any, wire: Wire, aws: Clients, clock: FakeClock) -> None:
    url = client.create_queue(QueueName="same-id", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = PINNED
    first = client.send_message(QueueUrl=url, MessageBody="tick",
                                MessageAttributes={"n": {"DataType": "Number",
                                                         "StringValue": "1"}})
    # WHEN the same call comes again, even 10 minutes later, while the message is stored
    clock.advance(600)
    again = client.send_message(QueueUrl=url, MessageBody="tick",
                                MessageAttributes={"n": {"DataType": "Number",
                                                         "StringValue": "1"}})
    # THEN it is answered as the first attempt was, and nothing more is enqueued
    for name in ("MessageId", "MD5OfMessageBody", "MD5OfMessageAttributes"):
        assert again[name] == first[name]
    (message,) = stored(aws, "same-id")
    assert message["sk"]["S"] == first["MessageId"]
    assert int(message["sent_ms"]["N"]) == clock.now_ms() - 600_000  # the first copy


def test_different_invocation_ids_enqueue_twice(client: Any, aws: Clients) -> None:
    url = client.create_queue(QueueName="twice", Attributes=PLAIN)["QueueUrl"]
    first = client.send_message(QueueUrl=url, MessageBody="same body")
    second = client.send_message(QueueUrl=url, MessageBody="same body")
    assert first["MessageId"] != second["MessageId"]
    assert len(stored(aws, "twice")) == 2


def test_the_same_id_with_other_parameters_is_not_a_retry(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="reused-id", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = PINNED
    first = client.send_message(QueueUrl=url, MessageBody="one")
    second = client.send_message(QueueUrl=url, MessageBody="two")
    delayed = client.send_message(QueueUrl=url, MessageBody="two", DelaySeconds=1)
    assert len({first["MessageId"], second["MessageId"], delayed["MessageId"]}) == 3
    assert sorted(i["body"]["S"] for i in stored(aws, "reused-id")) == ["one", "two", "two"]
    # AND the same id on another queue is another request
    other = client.create_queue(QueueName="reused-id-2", Attributes=PLAIN)["QueueUrl"]
    client.send_message(QueueUrl=other, MessageBody="one")
    assert len(stored(aws, "reused-id-2")) == 1


def test_a_batch_retry_that_meets_some_entries_stored_sends_only_the_others(
        client: Any, wire: Wire, aws: Clients) -> None:
    # GIVEN a batch whose answer was lost, 3 of whose messages were then received and
    # deleted (the window that remains)
    url = client.create_queue(QueueName="partial", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = PINNED
    entries = [{"Id": f"e{i}", "MessageBody": f"body {i}"} for i in range(10)]
    first = client.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=3)["Messages"]
    assert len(got) == 3
    client.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got)])
    # WHEN the SDK retries the call
    again = client.send_message_batch(QueueUrl=url, Entries=entries)
    # THEN every entry is answered with the first attempt's id: the 7 stored messages are
    # left as they are, the 3 consumed ones are enqueued again
    assert again.get("Failed", []) == []
    assert ({s["Id"]: s["MessageId"] for s in again["Successful"]}
            == {s["Id"]: s["MessageId"] for s in first})
    held = stored(aws, "partial")
    assert len(held) == 10
    assert all(i["rc"]["N"] == "0" for i in held)


def test_a_retry_after_the_message_was_deleted_sends_it_again(
        client: Any, wire: Wire, aws: Clients) -> None:
    # GIVEN a message received and deleted
    url = client.create_queue(QueueName="deleted", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = PINNED
    first = client.send_message(QueueUrl=url, MessageBody="once more")
    (got,) = client.receive_message(QueueUrl=url)["Messages"]
    client.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    # WHEN a retry of the same call comes after that
    again = client.send_message(QueueUrl=url, MessageBody="once more")
    # THEN nothing stands in its way: the message is enqueued again, under the same id
    assert again["MessageId"] == first["MessageId"]
    (message,) = stored(aws, "deleted")
    assert message["rc"]["N"] == "0"
    (redelivered,) = client.receive_message(QueueUrl=url)["Messages"]
    assert redelivered["Body"] == "once more"


def test_a_send_without_the_header_or_with_a_malformed_one_gets_a_fresh_id(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="no-id", Attributes=PLAIN)["QueueUrl"]
    ids = []
    for malformed in ("x" * 65, "not a uuid!", ""):
        wire.invocation_id = malformed
        ids.append(client.send_message(QueueUrl=url, MessageBody="b")["MessageId"])
        ids.append(client.send_message(QueueUrl=url, MessageBody="b")["MessageId"])
    assert len(stored(aws, "no-id")) == 6
    assert {_version(i) for i in ids} == {7}


def test_fifo_queues_keep_their_own_deduplication(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="own.fifo", Attributes={"FifoQueue": "true", **PLAIN})[
        "QueueUrl"]
    wire.lose = 1
    sent = client.send_message(QueueUrl=url, MessageBody="f", MessageGroupId="g",
                               MessageDeduplicationId="d1")
    assert sent["ResponseMetadata"]["RetryAttempts"] == 1
    assert _version(sent["MessageId"]) == 7  # the FIFO deduplication id answered the retry
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["MessageId"] for m in got] == [sent["MessageId"]]


def test_a_refused_send_stores_nothing_and_its_corrected_retry_sends(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="failed", Attributes=PLAIN)["QueueUrl"]
    wire.invocation_id = PINNED
    with pytest.raises(client.exceptions.ClientError, match="InvalidParameterValue"):
        client.send_message(QueueUrl=url, MessageBody="late", DelaySeconds=901)
    assert stored(aws, "failed") == []
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


def _store_client() -> Any:
    return runtime.backend().stores.of("default")._db


def test_a_send_is_one_store_request_and_a_batch_of_ten_is_one(
        client: Any, wire: Wire, aws: Clients) -> None:
    url = client.create_queue(QueueName="counted", Attributes=PLAIN)["QueueUrl"]
    client.send_message(QueueUrl=url, MessageBody="warm-up")  # metadata read and cached
    counter = DynamoCounter()
    counter.attach(_store_client())
    entries = [{"Id": f"e{i}", "MessageBody": f"b{i}"} for i in range(10)]
    try:
        # WHEN a SendMessage is served (the SDK sends an invocation id: deduplicated)
        start = counter.snapshot()
        client.send_message(QueueUrl=url, MessageBody="counted")
        single = counter.snapshot() - start
        # AND a SendMessageBatch of ten, and a retry of it
        wire.invocation_id = PINNED
        start = counter.snapshot()
        client.send_message_batch(QueueUrl=url, Entries=entries)
        batch = counter.snapshot() - start
        start = counter.snapshot()
        client.send_message_batch(QueueUrl=url, Entries=entries)
        retry = counter.snapshot() - start
    finally:
        counter.detach()
    # THEN each made one request to the store, the write of its messages, and nothing else
    assert single.calls == {"PutItem": 1}
    assert batch.calls == {"TransactWriteItems": 1}
    assert retry.calls == {"TransactWriteItems": 1}  # cancelled: every message was there
    assert len(stored(aws, "counted")) == 12


@pytest.fixture
def large_bodies(aws: Clients, settings: Settings, clock: FakeClock) -> Iterator[Client]:
    """The app with a small inline limit, so that modest bodies go to S3."""
    runtime.configure(replace(settings, inline_body_limit=2048), clock)
    with Client(app) as chalice_client:
        yield chalice_client
    runtime.configure(None)


def test_a_retried_large_message_keeps_its_first_body(
        large_bodies: Client, aws: Clients) -> None:
    # GIVEN an encrypted queue (every attempt seals with its own nonce) and a large body
    wire = Wire(large_bodies)
    wire.invocation_id = PINNED
    sqs = _retrying(wire)
    url = sqs.create_queue(QueueName="large")["QueueUrl"]
    body = "large " * 1000
    first = sqs.send_message(QueueUrl=url, MessageBody=body)
    # WHEN the call is retried
    again = sqs.send_message(QueueUrl=url, MessageBody=body)
    # THEN the retry's own object was removed, and the first one still opens
    assert again["MessageId"] == first["MessageId"]
    (item,) = stored(aws, "large")
    listed = aws.s3.list_objects_v2(Bucket=BODIES_BUCKET, Prefix=f"bodies/{ACCOUNT}/large/")
    assert [o["Key"] for o in listed.get("Contents", [])] == [item["body_key"]["S"]]
    (got,) = sqs.receive_message(QueueUrl=url)["Messages"]
    assert (got["MessageId"], got["Body"]) == (first["MessageId"], body)


@pytest.fixture
def dedup_off(aws: Clients, settings: Settings, clock: FakeClock) -> Iterator[Client]:
    runtime.configure(replace(settings, request_dedup=False), clock)
    with Client(app) as chalice_client:
        yield chalice_client
    runtime.configure(None)


def test_with_dedup_off_a_retry_enqueues_again(dedup_off: Client, aws: Clients) -> None:
    wire = Wire(dedup_off)
    sqs = _retrying(wire)
    url = sqs.create_queue(QueueName="off", Attributes=PLAIN)["QueueUrl"]
    wire.lose = 1
    sqs.send_message(QueueUrl=url, MessageBody="dup")
    assert len(stored(aws, "off")) == 2
