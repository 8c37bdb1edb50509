"""GIVEN a RedrivePolicy WHEN a message is received too often THEN it moves to the DLQ."""

from __future__ import annotations

import json
from typing import Any

from botocore.config import Config
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.functional.test_faults import Faults

MESSAGES_TABLE = "dmq-messages"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
ATTRIBUTES = {
    "kind": {"DataType": "String", "StringValue": "poison"},
    "attempt": {"DataType": "Number", "StringValue": "7"},
    "raw": {"DataType": "Binary", "BinaryValue": b"\x01\x02"},
}


def _queues(
    sqs: Any, max_receives: int, source_retention: str = "345600", dlq_retention: str = "345600"
) -> tuple[str, str]:
    """A DLQ and a source queue (5 s visibility timeout) that redrives into it."""
    dlq = sqs.create_queue(
        QueueName="dead", Attributes={"MessageRetentionPeriod": dlq_retention}
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": max_receives})
    source = sqs.create_queue(QueueName="work", Attributes={
        "RedrivePolicy": policy, "VisibilityTimeout": "5",
        "MessageRetentionPeriod": source_retention,
    })["QueueUrl"]
    return str(source), str(dlq)


def _receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    found = sqs.receive_message(
        QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"], MaxNumberOfMessages=10
    )
    return list(found.get("Messages", []))


def _fail_times(sqs: Any, url: str, clock: FakeClock, times: int) -> None:
    """Receive the one message `times` times without deleting it."""
    for _ in range(times):
        assert len(_receive(sqs, url)) == 1
        clock.advance(5)


def test_message_moves_on_the_receive_after_max_receive_count(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a source queue with maxReceiveCount=3 and a message received 3 times
    source, dlq = _queues(sqs, 3)
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    _fail_times(sqs, source, clock, 3)
    assert _receive(sqs, dlq) == []
    # WHEN the source queue is read a 4th time THEN nothing comes back from it
    assert _receive(sqs, source) == []
    # AND the message is in the DLQ
    assert [m["Body"] for m in _receive(sqs, dlq)] == ["poison"]


def test_max_receive_count_of_one_moves_on_the_second_receive(sqs: Any, clock: FakeClock) -> None:
    # GIVEN maxReceiveCount=1 and a message received once
    source, dlq = _queues(sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="once")
    _fail_times(sqs, source, clock, 1)
    # WHEN it would be received again THEN it moves instead
    assert _receive(sqs, source) == []
    assert [m["Body"] for m in _receive(sqs, dlq)] == ["once"]


def test_moved_message_keeps_its_id_body_attributes_and_send_time(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a message with attributes sent at T and received twice under maxReceiveCount=2
    source, dlq = _queues(sqs, 2)
    sent_at = clock.now_ms()
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison", MessageAttributes=ATTRIBUTES)
    _fail_times(sqs, source, clock, 2)
    # WHEN it moves to the DLQ and is received there
    assert _receive(sqs, source) == []
    (moved,) = _receive(sqs, dlq)
    # THEN id, body, attributes, digests and SentTimestamp are those of the original send
    assert moved["MessageId"] == sent["MessageId"]
    assert moved["Body"] == "poison"
    assert moved["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert moved["MessageAttributes"] == ATTRIBUTES
    assert moved["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert moved["Attributes"]["SentTimestamp"] == str(sent_at)


def test_moved_message_is_handled_like_any_dlq_message(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a message moved to the DLQ
    source, dlq = _queues(sqs, 1)
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison")
    _fail_times(sqs, source, clock, 1)
    assert _receive(sqs, source) == []
    # WHEN it is received from the DLQ and deleted with that handle
    (moved,) = _receive(sqs, dlq)
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=moved["ReceiptHandle"])
    # THEN it is gone from both queues and from the table
    clock.advance(60)
    assert _receive(sqs, dlq) == []
    assert _receive(sqs, source) == []
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    assert [i for i in items if i["sk"]["S"] == sent["MessageId"]] == []


def test_deleted_message_never_moves(sqs: Any, clock: FakeClock) -> None:
    # GIVEN maxReceiveCount=2 and a message received twice, then deleted
    source, dlq = _queues(sqs, 2)
    sqs.send_message(QueueUrl=source, MessageBody="handled")
    assert len(_receive(sqs, source)) == 1
    clock.advance(5)
    (message,) = _receive(sqs, source)
    sqs.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
    clock.advance(5)
    # WHEN both queues are read THEN neither holds it
    assert _receive(sqs, source) == []
    assert _receive(sqs, dlq) == []


def test_only_over_received_messages_move(sqs: Any, clock: FakeClock) -> None:
    # GIVEN maxReceiveCount=1, one message received once and a fresh one sent later
    source, dlq = _queues(sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    _fail_times(sqs, source, clock, 1)
    sqs.send_message(QueueUrl=source, MessageBody="fresh")
    # WHEN the source queue is read
    got = _receive(sqs, source)
    # THEN the fresh message is delivered and only the poison one moved
    assert [m["Body"] for m in got] == ["fresh"]
    assert [m["Body"] for m in _receive(sqs, dlq)] == ["poison"]


def test_dlq_retention_counts_from_the_original_send(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a DLQ keeping messages 120 s and a message that moves there 100 s after its send
    source, dlq = _queues(sqs, 1, dlq_retention="120")
    sqs.send_message(QueueUrl=source, MessageBody="aging")
    clock.advance(95)
    _fail_times(sqs, source, clock, 1)
    assert _receive(sqs, source) == []
    # THEN it is in the DLQ at 119 s after the send and gone at 120 s
    clock.advance(19)
    (moved,) = _receive(sqs, dlq)
    sqs.change_message_visibility(QueueUrl=dlq, ReceiptHandle=moved["ReceiptHandle"],
                                  VisibilityTimeout=0)
    clock.advance(1)
    assert _receive(sqs, dlq) == []


def test_large_body_moves_intact(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a body large enough to live in S3, in a queue with maxReceiveCount=1
    source, dlq = _queues(sqs, 1)
    body = "large-" * 60_000
    sqs.send_message(QueueUrl=source, MessageBody=body)
    _fail_times(sqs, source, clock, 1)
    # WHEN it moves to the DLQ THEN it comes back intact from there
    assert _receive(sqs, source) == []
    (moved,) = _receive(sqs, dlq)
    assert moved["Body"] == body


def test_list_dead_letter_source_queues_names_the_source(sqs: Any) -> None:
    # GIVEN a DLQ with one source queue, and an unrelated queue
    source, dlq = _queues(sqs, 3)
    sqs.create_queue(QueueName="unrelated")
    # WHEN the DLQ's sources are listed THEN only the source queue is named
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [source]


def test_queue_without_redrive_policy_never_moves_messages(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue without a RedrivePolicy and a message received many times
    url = sqs.create_queue(QueueName="plain", Attributes={"VisibilityTimeout": "5"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="again")
    _fail_times(sqs, url, clock, 5)
    # WHEN it is received once more THEN it is still delivered, with its count
    (message,) = _receive(sqs, url)
    assert message["Attributes"]["ApproximateReceiveCount"] == "6"


def _moves_only(schedule: Any) -> Any:
    """Apply `schedule` to dead-letter move transactions only (a Put among its items)."""
    seen = [0]

    def only_moves(call: int, request: dict[str, Any]) -> str | None:
        if not any("Put" in op for op in request.get("TransactItems", [])):
            return None
        seen[0] += 1
        return schedule(seen[0], request)

    return only_moves


def test_a_move_that_loses_a_race_skips_the_message_instead_of_failing(
    sqs: Any, clock: FakeClock, dmq: Client,
) -> None:
    # GIVEN a message due to move to the DLQ
    source, dlq = _queues(sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="contested")
    _fail_times(sqs, source, clock, 1)
    # AND another receiver that changes it first (the move's condition fails, so DynamoDB
    # cancels the transaction with ConditionalCheckFailed for the source's delete)
    faults = Faults(runtime.backend().stores.of("default")._db)
    faults.lose = lambda position: position == 0
    faults.add("TransactWriteItems", _moves_only(lambda call, request: (
        "cancel-condition" if call == 1 else None)))
    try:
        # WHEN the source queue is read (by a client that does not retry)
        # THEN the receive succeeds, skipping the message
        assert _receive(sqs_client(dmq, "us-east-1", NO_RETRIES), source) == []
        assert faults.count() == 1
    finally:
        faults.clear()
    # AND a later receive moves it as usual
    assert _receive(sqs, source) == []
    assert [m["Body"] for m in _receive(sqs, dlq)] == ["contested"]
