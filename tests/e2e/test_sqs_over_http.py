"""GIVEN the real local server (`python -m dmqlocal`) in a subprocess
WHEN boto3's SQS client drives it over HTTP
THEN every action answers as SQS does: bodies, attributes and digests round-trip,
counts are right, errors are botocore's modelled exceptions with HTTP 400,
long polls wake on a send, and queue URLs and ARNs follow the request."""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

ACCOUNT = "000000000000"
MIB = 1_048_576
# The local server removes a purged queue's messages within seconds (SQS: within 60 s).
PURGED_WITHIN_S = 30.0

Names = Callable[[str], str]
ClientFactory = Callable[..., Any]


# -- helpers ------------------------------------------------------------------------------
def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def md5_of_message_attributes(attributes: dict[str, dict[str, Any]]) -> str:
    """AWS's digest of message attributes, written out independently of chalicelib:
    sorted names; each name, type and value length-prefixed (4 bytes, big-endian), with a
    transport byte before the value (1 for String/Number, 2 for Binary)."""

    def field(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(field(name.encode()))
        digest.update(field(value["DataType"].encode()))
        if "BinaryValue" in value:
            digest.update(b"\x02" + field(value["BinaryValue"]))
        else:
            digest.update(b"\x01" + field(value["StringValue"].encode()))
    return digest.hexdigest()


def receive_all(sqs: Any, url: str, expected: int, **kwargs: Any) -> list[dict[str, Any]]:
    """Receive until `expected` messages arrived, in at most 10 bounded rounds."""
    got: list[dict[str, Any]] = []
    for _ in range(10):
        if len(got) >= expected:
            break
        response = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                       WaitTimeSeconds=1, **kwargs)
        got += response.get("Messages", [])
    return got


def counts(sqs: Any, url: str) -> tuple[int, int, int]:
    """(visible, not visible, delayed) as GetQueueAttributes reports them."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                        "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return (int(attributes["ApproximateNumberOfMessages"]),
            int(attributes["ApproximateNumberOfMessagesNotVisible"]),
            int(attributes["ApproximateNumberOfMessagesDelayed"]))


def expect_error(
    call: Callable[[], Any], exception: type[Exception], status: int = 400,
) -> ClientError:
    """Run a call that must fail with `exception` and an HTTP 400 (or `status`); return
    the error."""
    with pytest.raises(exception) as caught:
        call()
    error = caught.value
    assert isinstance(error, ClientError)
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == status, error.response
    return error


# -- the message life cycle ------------------------------------------------------------------
def test_send_receive_change_visibility_and_delete(sqs: Any, dmq_url: str,
                                                   unique_name: Names) -> None:
    name = unique_name("flow")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{dmq_url}/{ACCOUNT}/{name}"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url

    body = "héllo, wörld ✓ " * 3
    attributes: dict[str, dict[str, Any]] = {
        "Greeting": {"DataType": "String", "StringValue": "bonjour ☀"},
        "Count": {"DataType": "Number", "StringValue": "42.5"},
        "Blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff binary"},
        "Kind": {"DataType": "String.custom", "StringValue": "typed"},
    }
    before_ms = int(time.time() * 1000)
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    assert sent["MessageId"]
    assert sent["MD5OfMessageBody"] == md5_hex(body.encode("utf-8"))
    assert sent["MD5OfMessageAttributes"] == md5_of_message_attributes(attributes)

    first = sqs.receive_message(QueueUrl=url, AttributeNames=["All"],
                                MessageAttributeNames=["All"], VisibilityTimeout=60,
                                WaitTimeSeconds=2)["Messages"]
    assert len(first) == 1
    message = first[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == body
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    system = message["Attributes"]
    assert {"SentTimestamp", "ApproximateReceiveCount", "SenderId",
            "ApproximateFirstReceiveTimestamp"} <= set(system)
    assert system["SenderId"]
    assert system["ApproximateReceiveCount"] == "1"
    sent_ms = int(system["SentTimestamp"])
    assert before_ms - 5_000 <= sent_ms <= int(time.time() * 1000) + 5_000
    assert int(system["ApproximateFirstReceiveTimestamp"]) >= sent_ms

    # In flight: nobody else gets it.
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert counts(sqs, url) == (0, 1, 0)

    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"],
                                  VisibilityTimeout=0)
    second = sqs.receive_message(QueueUrl=url, AttributeNames=["All"],
                                 MessageAttributeNames=["All"], VisibilityTimeout=60,
                                 WaitTimeSeconds=2)["Messages"]
    assert len(second) == 1
    again = second[0]
    assert again["MessageId"] == message["MessageId"]
    assert again["ReceiptHandle"] != message["ReceiptHandle"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    assert (again["Attributes"]["ApproximateFirstReceiveTimestamp"]
            == system["ApproximateFirstReceiveTimestamp"])
    assert again["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]

    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    assert counts(sqs, url) == (0, 0, 0)


def test_batches_of_ten(sqs: Any, unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("batch"))["QueueUrl"]
    entries = [{"Id": f"m{i}", "MessageBody": f"message number {i}",
                "MessageAttributes": {"Index": {"DataType": "Number", "StringValue": str(i)}}}
               for i in range(10)]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sent.get("Failed", []) == []
    assert sorted(e["Id"] for e in sent["Successful"]) == sorted(e["Id"] for e in entries)
    by_id = {e["Id"]: e for e in entries}
    for result in sent["Successful"]:
        entry = by_id[result["Id"]]
        assert result["MD5OfMessageBody"] == md5_hex(entry["MessageBody"].encode())
        assert result["MD5OfMessageAttributes"] == md5_of_message_attributes(
            entry["MessageAttributes"])
    assert counts(sqs, url) == (10, 0, 0)

    got = receive_all(sqs, url, 10, VisibilityTimeout=60)
    assert sorted(m["Body"] for m in got) == sorted(e["MessageBody"] for e in entries)
    assert counts(sqs, url) == (0, 10, 0)

    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": f"c{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
        for i, m in enumerate(got)
    ])
    assert changed.get("Failed", []) == []
    assert len(changed["Successful"]) == 10
    assert counts(sqs, url) == (10, 0, 0)

    again = receive_all(sqs, url, 10, VisibilityTimeout=60, AttributeNames=["All"])
    assert len(again) == 10
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}

    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(again)
    ])
    assert deleted.get("Failed", []) == []
    assert sorted(e["Id"] for e in deleted["Successful"]) == sorted(f"d{i}" for i in range(10))
    assert counts(sqs, url) == (0, 0, 0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


# -- queue operations ------------------------------------------------------------------------
def test_queue_attributes_counts_and_updates(sqs: Any, unique_name: Names) -> None:
    name = unique_name("attrs")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    every = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert every["VisibilityTimeout"] == "45"
    assert every["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert every["MaximumMessageSize"] == str(MIB)
    assert every["ApproximateNumberOfMessages"] == "0"
    assert int(every["CreatedTimestamp"]) <= int(time.time()) + 5

    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="will be in flight")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=120)
    assert counts(sqs, url) == (2, 0, 1)
    received = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60, WaitTimeSeconds=1)
    assert len(received["Messages"]) == 1
    assert counts(sqs, url) == (1, 1, 1)

    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "VisibilityTimeout": "120", "MaximumMessageSize": "2048", "DelaySeconds": "5",
    })
    after = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["VisibilityTimeout", "MaximumMessageSize", "DelaySeconds"],
    )["Attributes"]
    assert after == {"VisibilityTimeout": "120", "MaximumMessageSize": "2048",
                     "DelaySeconds": "5"}

    error = expect_error(
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "-1"}),
        sqs.exceptions.InvalidAttributeValue)
    assert "VisibilityTimeout" in str(error)


def test_tag_list_and_untag(sqs: Any, unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("tags"), tags={"team": "core"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core"}

    sqs.tag_queue(QueueUrl=url, Tags={"env": "e2e", "team": "platform"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "e2e", "team": "platform"}

    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "not-there"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "e2e"}

    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert sqs.list_queue_tags(QueueUrl=url).get("Tags", {}) == {}


def test_list_queues_by_prefix_and_in_pages(sqs: Any, dmq_url: str, unique_name: Names) -> None:
    prefix = unique_name("list")
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        sqs.create_queue(QueueName=name)
    expected = [f"{dmq_url}/{ACCOUNT}/{name}" for name in names]
    other = sqs.create_queue(QueueName=unique_name("other"))["QueueUrl"]

    listed = sqs.list_queues(QueueNamePrefix=prefix)
    assert sorted(listed["QueueUrls"]) == expected
    assert "NextToken" not in listed
    assert other in sqs.list_queues()["QueueUrls"]
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=f"{prefix}-none")

    pages: list[list[str]] = []
    token: str | None = None
    for _ in range(10):
        kwargs: dict[str, Any] = {"QueueNamePrefix": prefix, "MaxResults": 2}
        if token:
            kwargs["NextToken"] = token
        page = sqs.list_queues(**kwargs)
        pages.append(page.get("QueueUrls", []))
        token = page.get("NextToken")
        if not token:
            break
    assert token is None, "paging did not end within 10 pages"
    assert all(len(page) <= 2 for page in pages)
    collected = [url for page in pages for url in page]
    assert sorted(collected) == expected  # each queue exactly once
    assert [len(page) for page in pages if page] == [2, 2, 1]


def test_dead_letter_sources_and_redrive(sqs: Any, unique_name: Names) -> None:
    dlq = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq,
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})
    sources = sorted(
        sqs.create_queue(QueueName=unique_name(f"src{i}"),
                         Attributes={"RedrivePolicy": policy})["QueueUrl"]
        for i in range(2)
    )
    sqs.create_queue(QueueName=unique_name("unrelated"))

    listed = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert sorted(listed["queueUrls"]) == sources

    first = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=1)
    assert len(first["queueUrls"]) == 1 and first.get("NextToken")
    second = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=1,
                                                NextToken=first["NextToken"])
    assert sorted(first["queueUrls"] + second["queueUrls"]) == sources

    # maxReceiveCount 1: the second receive moves the message to the dead-letter queue.
    source = sources[0]
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert sqs.receive_message(QueueUrl=source, VisibilityTimeout=0,
                               WaitTimeSeconds=1)["Messages"][0]["Body"] == "poison"
    assert "Messages" not in sqs.receive_message(QueueUrl=source, WaitTimeSeconds=1)
    moved = receive_all(sqs, dlq, 1)
    assert [m["Body"] for m in moved] == ["poison"]


def test_purge_then_delete_queue(sqs: Any, unique_name: Names) -> None:
    name = unique_name("purge")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    assert counts(sqs, url) == (5, 0, 0)

    sqs.purge_queue(QueueUrl=url)
    # receives see none at once; the counts follow as the stored messages are removed
    # (SQS allows a purge 60 s)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    deadline = time.monotonic() + PURGED_WITHIN_S
    while counts(sqs, url) != (0, 0, 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert counts(sqs, url) == (0, 0, 0)
    expect_error(lambda: sqs.purge_queue(QueueUrl=url), sqs.exceptions.PurgeQueueInProgress,
                 status=403)

    sqs.delete_queue(QueueUrl=url)
    expect_error(lambda: sqs.get_queue_url(QueueName=name), sqs.exceptions.QueueDoesNotExist)
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name)
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"),
                 sqs.exceptions.QueueDoesNotExist)
    expect_error(lambda: sqs.create_queue(QueueName=name), sqs.exceptions.QueueDeletedRecently)


# -- errors --------------------------------------------------------------------------------
def test_missing_queue_is_queue_does_not_exist(sqs: Any, dmq_url: str,
                                               unique_name: Names) -> None:
    missing = unique_name("missing")
    error = expect_error(lambda: sqs.get_queue_url(QueueName=missing),
                         sqs.exceptions.QueueDoesNotExist)
    assert error.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert error.response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"
    assert error.response["Error"]["Message"] == "The specified queue does not exist."
    assert error.response["ResponseMetadata"]["RequestId"]

    url = f"{dmq_url}/{ACCOUNT}/{missing}"
    expect_error(lambda: sqs.receive_message(QueueUrl=url), sqs.exceptions.QueueDoesNotExist)
    expect_error(lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
                 sqs.exceptions.QueueDoesNotExist)


def test_garbage_receipt_handle_is_invalid(sqs: Any, unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("handle"))["QueueUrl"]
    error = expect_error(
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-receipt-handle"),
        sqs.exceptions.ReceiptHandleIsInvalid)
    assert error.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    expect_error(
        lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="garbage!!",
                                              VisibilityTimeout=10),
        sqs.exceptions.ReceiptHandleIsInvalid)

    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "bad", "ReceiptHandle": "garbage"}])
    assert deleted.get("Successful", []) == []
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in deleted["Failed"]] == [
        ("bad", "ReceiptHandleIsInvalid", True)]


def test_eleven_entries_are_too_many(sqs: Any, unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("eleven"))["QueueUrl"]
    error = expect_error(
        lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"e{i}", "MessageBody": "x"} for i in range(11)]),
        sqs.exceptions.TooManyEntriesInBatchRequest)
    assert error.response["Error"]["QueryErrorCode"] == "TooManyEntriesInBatchRequest"
    expect_error(
        lambda: sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": f"e{i}", "ReceiptHandle": "h"} for i in range(11)]),
        sqs.exceptions.TooManyEntriesInBatchRequest)
    expect_error(
        lambda: sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
            {"Id": f"e{i}", "ReceiptHandle": "h", "VisibilityTimeout": 1} for i in range(11)]),
        sqs.exceptions.TooManyEntriesInBatchRequest)
    assert counts(sqs, url) == (0, 0, 0)  # nothing of the refused batch was sent


def test_fifo_and_invalid_queue_names_are_refused(sqs: Any, unique_name: Names) -> None:
    fifo = unique_name("fifo") + ".fifo"
    error = expect_error(lambda: sqs.create_queue(QueueName=fifo), ClientError)
    assert error.response["Error"]["Code"] == "InvalidParameterValue"
    expect_error(lambda: sqs.get_queue_url(QueueName=fifo), sqs.exceptions.QueueDoesNotExist)
    named = expect_error(lambda: sqs.create_queue(QueueName=unique_name("plain"),
                                                  Attributes={"FifoQueue": "true"}), ClientError)
    assert "must end with .fifo suffix" in named.response["Error"]["Message"]

    bad = expect_error(lambda: sqs.create_queue(QueueName="has spaces!"), ClientError)
    assert bad.response["Error"]["Code"] == "InvalidParameterValue"


# -- long polling ----------------------------------------------------------------------------
def test_long_poll_wakes_up_when_a_message_is_sent(make_sqs: ClientFactory,
                                                   unique_name: Names) -> None:
    sender = make_sqs()
    url = sender.create_queue(QueueName=unique_name("poll"))["QueueUrl"]
    receiver = make_sqs()
    result: dict[str, Any] = {}

    def wait_for_message() -> None:
        started = time.monotonic()
        try:
            result["response"] = receiver.receive_message(QueueUrl=url, WaitTimeSeconds=10)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            result["error"] = exc
        result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=wait_for_message, daemon=True)
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    sender.send_message(QueueUrl=url, MessageBody="wake up")
    thread.join(timeout=20)
    assert not thread.is_alive(), "the long poll never returned"
    assert "error" not in result, result.get("error")
    assert [m["Body"] for m in result["response"]["Messages"]] == ["wake up"]
    # The server re-reads only every 5 s on its own: returning sooner means the send woke it.
    assert result["elapsed"] < 3, f"long poll took {result['elapsed']:.2f} s"
    assert result["elapsed"] >= 0.3, "the receive did not wait for the send"
    assert time.monotonic() - started < 5


def test_long_poll_on_an_empty_queue_waits_then_returns_nothing(sqs: Any,
                                                                unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("empty"))["QueueUrl"]
    started = time.monotonic()
    response = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
    elapsed = time.monotonic() - started
    assert "Messages" not in response
    assert 1.5 <= elapsed < 8, f"an empty 2 s long poll took {elapsed:.2f} s"


# -- URLs and ARNs follow the request ---------------------------------------------------------
def test_queue_url_follows_the_host_the_client_used(make_sqs: ClientFactory,
                                                    dmq_server: Any,
                                                    unique_name: Names) -> None:
    name = unique_name("host")
    by_ip = make_sqs()
    url = by_ip.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"http://127.0.0.1:{dmq_server.port}/{ACCOUNT}/{name}"

    local_endpoint = f"http://localhost:{dmq_server.port}"
    by_name = make_sqs(endpoint_url=local_endpoint)
    local_url = by_name.get_queue_url(QueueName=name)["QueueUrl"]
    assert local_url == f"{local_endpoint}/{ACCOUNT}/{name}"
    assert f"{local_endpoint}/{ACCOUNT}/{name}" in by_name.list_queues(
        QueueNamePrefix=name)["QueueUrls"]

    # Either URL names the same queue.
    by_name.send_message(QueueUrl=local_url, MessageBody="via localhost")
    got = by_ip.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["via localhost"]


def test_region_comes_from_the_sigv4_scope(make_sqs: ClientFactory, unique_name: Names) -> None:
    # The server serves DMQ_REGIONS' default, us-east-1, and, as a namespace of its own,
    # any other region a request is signed for; a name that is no region is refused as
    # AWS refuses a region it does not serve.
    name = unique_name("region")
    url = make_sqs().create_queue(QueueName=name)["QueueUrl"]
    arn = make_sqs().get_queue_attributes(
        QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    ireland = make_sqs(region_name="eu-west-1")
    elsewhere = ireland.create_queue(QueueName=unique_name("elsewhere"))["QueueUrl"]
    assert ireland.get_queue_attributes(QueueUrl=elsewhere, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"].startswith("arn:aws:sqs:eu-west-1:")
    with pytest.raises(ClientError) as caught:
        make_sqs(region_name="xx").create_queue(QueueName=unique_name("junk"))
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Error"]["Code"] == "SignatureDoesNotMatch"
    assert "scoped to a valid region, not 'xx'" in error["Error"]["Message"]


# -- message size -------------------------------------------------------------------------
def test_one_mib_body_round_trips_and_one_byte_more_is_refused(sqs: Any,
                                                              unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name("big"))["QueueUrl"]
    body = ("0123456789abcdef" * (MIB // 16))
    assert len(body.encode()) == MIB

    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_hex(body.encode())
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert len(got) == 1
    assert len(got[0]["Body"]) == MIB
    assert got[0]["Body"] == body
    assert got[0]["MD5OfBody"] == md5_hex(body.encode())
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])

    error = expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody=body + "x"),
                         ClientError)
    assert error.response["Error"]["Code"] == "InvalidParameterValue"
    assert str(MIB) in error.response["Error"]["Message"]
    assert counts(sqs, url) == (0, 0, 0)
