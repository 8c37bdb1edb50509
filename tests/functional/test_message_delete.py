"""GIVEN receipt handles WHEN messages are deleted THEN SQS's handle rules hold."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from chalicelib.aws import Clients
from chalicelib.domain.messages import MessageRef
from chalicelib.service.receipts import ReceiptCodec
from tests.clocks import FakeClock

MESSAGES_TABLE = "dmq-messages"


def _queue(sqs: Any, name: str = "jobs", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _receive_one(sqs: Any, url: str, **kwargs: Any) -> dict[str, Any]:
    (message,) = sqs.receive_message(QueueUrl=url, **kwargs)["Messages"]
    return dict(message)


def _in_flight(sqs: Any, url: str, body: str = "job") -> dict[str, Any]:
    sqs.send_message(QueueUrl=url, MessageBody=body)
    return _receive_one(sqs, url)


def _stored_ids(aws: Clients) -> set[str]:
    return {str(i["sk"]["S"]) for i in aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]}


def _tampered(handle: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def test_delete_removes_the_message_for_good(sqs: Any, clock: FakeClock, aws: Clients) -> None:
    # GIVEN a received message
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    # WHEN it is deleted with its handle
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # THEN its item is gone and it never comes back
    assert message["MessageId"] not in _stored_ids(aws)
    clock.advance(3600)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_deleting_twice_with_the_same_handle_succeeds(sqs: Any) -> None:
    # GIVEN a message deleted with its handle
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # WHEN the same handle is used again THEN the call succeeds
    response = sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_an_older_handle_of_a_redelivered_message_deletes_it(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message received twice: the first handle is the older one
    url = _queue(sqs, VisibilityTimeout="10")
    first = _in_flight(sqs, url)
    clock.advance(10)
    second = _receive_one(sqs, url)
    assert second["MessageId"] == first["MessageId"]
    # WHEN it is deleted with the older handle THEN the call succeeds and, as SQS does for
    # standard queues ("older receipt handles might succeed"), the message is gone
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert first["MessageId"] not in _stored_ids(aws)
    clock.advance(10)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    # AND the latest handle then succeeds and deletes nothing more
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])


def test_an_older_handle_deletes_a_message_visible_again(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message whose visibility timeout ended after two receives
    url = _queue(sqs, VisibilityTimeout="10")
    first = _in_flight(sqs, url)
    clock.advance(10)
    _receive_one(sqs, url)
    clock.advance(10)
    # WHEN the first handle deletes it THEN it is gone
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert first["MessageId"] not in _stored_ids(aws)


def test_latest_handle_deletes_after_redelivery(sqs: Any, clock: FakeClock, aws: Clients) -> None:
    # GIVEN a message received twice
    url = _queue(sqs, VisibilityTimeout="10")
    first = _in_flight(sqs, url)
    clock.advance(10)
    second = _receive_one(sqs, url)
    # WHEN it is deleted with the latest handle THEN it is gone
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert first["MessageId"] not in _stored_ids(aws)


def test_delete_after_the_visibility_timeout_still_deletes(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message whose visibility timeout ended but that nobody received again
    url = _queue(sqs, VisibilityTimeout="10")
    message = _in_flight(sqs, url)
    clock.advance(60)
    # WHEN it is deleted with its (latest) handle THEN it is gone
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert message["MessageId"] not in _stored_ids(aws)


@pytest.mark.parametrize("handle", ["garbled", "!!!!", "ünïcode", "A" * 2000])
def test_garbled_handle_is_receipt_handle_is_invalid(sqs: Any, handle: str) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a handle DMQ never issued is used THEN ReceiptHandleIsInvalid, in SQS's words
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as caught:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert caught.value.response["Error"]["Message"] == (
        f'The input receipt handle "{handle}" is not a valid receipt handle.')


def test_tampered_handle_is_invalid_and_deletes_nothing(sqs: Any, aws: Clients) -> None:
    # GIVEN a received message and its handle with one bit flipped
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    forged = _tampered(message["ReceiptHandle"])
    assert forged != message["ReceiptHandle"]
    # WHEN the forged handle is used THEN ReceiptHandleIsInvalid, and the message stays
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=forged)
    assert message["MessageId"] in _stored_ids(aws)


def test_handle_signed_with_another_key_is_invalid(sqs: Any, aws: Clients) -> None:
    # GIVEN a well-formed handle naming a real message but signed with a key DMQ does not hold
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    ref = MessageRef("000000000000/jobs", 0, message["MessageId"], "token")
    forged = ReceiptCodec("not-the-dmq-key").encode(ref)
    # WHEN it is used THEN ReceiptHandleIsInvalid, and the message stays
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=forged)
    assert message["MessageId"] in _stored_ids(aws)


def test_handle_of_another_queue_is_invalid(sqs: Any, aws: Clients) -> None:
    # GIVEN a message received from queue A and an empty queue B
    url_a = _queue(sqs, "queue-a")
    url_b = _queue(sqs, "queue-b")
    message = _in_flight(sqs, url_a)
    # WHEN A's handle is used on B THEN ReceiptHandleIsInvalid, and A's message stays
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as caught:
        sqs.delete_message(QueueUrl=url_b, ReceiptHandle=message["ReceiptHandle"])
    assert caught.value.response["Error"]["Message"] == (
        f'The input receipt handle "{message["ReceiptHandle"]}" is not a valid receipt handle.')
    assert message["MessageId"] in _stored_ids(aws)
    # AND A's handle still deletes it on A
    sqs.delete_message(QueueUrl=url_a, ReceiptHandle=message["ReceiptHandle"])
    assert message["MessageId"] not in _stored_ids(aws)


def test_delete_on_a_missing_queue_is_queue_does_not_exist(sqs: Any) -> None:
    # GIVEN a handle from a queue, and a URL of a queue that does not exist
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    missing = url.replace("/jobs", "/nowhere")
    # WHEN the handle is used on the missing queue THEN QueueDoesNotExist
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.delete_message(QueueUrl=missing, ReceiptHandle=message["ReceiptHandle"])


def test_delete_batch_with_an_older_handle_deletes_the_redelivered_message(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message received twice and another received once
    url = _queue(sqs, VisibilityTimeout="10")
    stale = _in_flight(sqs, url, "redelivered")
    clock.advance(10)
    current = _receive_one(sqs, url)
    other = _in_flight(sqs, url, "other")
    # WHEN a batch deletes with the stale handle and the other message's handle
    result = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "stale", "ReceiptHandle": stale["ReceiptHandle"]},
        {"Id": "other", "ReceiptHandle": other["ReceiptHandle"]},
    ])
    # THEN both entries succeed and both messages are gone
    assert sorted(e["Id"] for e in result["Successful"]) == ["other", "stale"]
    assert result.get("Failed", []) == []
    assert current["MessageId"] == stale["MessageId"]
    assert _stored_ids(aws) == set()


def test_delete_batch_with_the_same_handle_twice_deletes_once(sqs: Any, aws: Clients) -> None:
    # GIVEN a received message
    url = _queue(sqs)
    message = _in_flight(sqs, url)
    # WHEN a batch names its handle under two Ids THEN both succeed and the message is gone
    result = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "first", "ReceiptHandle": message["ReceiptHandle"]},
        {"Id": "again", "ReceiptHandle": message["ReceiptHandle"]},
    ])
    assert sorted(e["Id"] for e in result["Successful"]) == ["again", "first"]
    assert message["MessageId"] not in _stored_ids(aws)


def test_delete_batch_with_latest_and_stale_handles_of_one_message_deletes_it(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message received twice: one stale and one latest handle
    url = _queue(sqs, VisibilityTimeout="10")
    stale = _in_flight(sqs, url)
    clock.advance(10)
    latest = _receive_one(sqs, url)
    # WHEN one batch names the latest handle, then the stale one
    result = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "latest", "ReceiptHandle": latest["ReceiptHandle"]},
        {"Id": "stale", "ReceiptHandle": stale["ReceiptHandle"]},
    ])
    # THEN both entries succeed and the message is gone
    assert sorted(e["Id"] for e in result["Successful"]) == ["latest", "stale"]
    assert latest["MessageId"] not in _stored_ids(aws)
