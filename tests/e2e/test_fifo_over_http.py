"""GIVEN the real local server on DynamoDB Local WHEN boto3 drives a FIFO queue over HTTP
THEN groups keep their order and hold, duplicates return the original, sequence numbers
increase, attempt ids replay, and a FIFO dead-letter queue takes over-received messages
in order."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

Names = Callable[[str], str]


def _fifo(sqs: Any, name: str, **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true",
                                                            **attributes})["QueueUrl"]
    return url


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    params = {"MaxNumberOfMessages": 10, "MessageSystemAttributeNames": ["All"], **kwargs}
    found: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, **params).get(
        "Messages", [])
    return found


def test_fifo_queue_over_http(sqs: Any, unique_name: Names) -> None:
    url = _fifo(sqs, unique_name("orders") + ".fifo", VisibilityTimeout="30")
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": f"e{i}", "MessageBody": f"m{i}", "MessageGroupId": "A" if i < 5 else "B",
         "MessageDeduplicationId": f"d{i}"} for i in range(10)])["Successful"]
    numbers = [int(s["SequenceNumber"]) for s in sent]
    assert all(len(s["SequenceNumber"]) == 20 for s in sent)
    assert numbers[:5] == sorted(numbers[:5]) and numbers[5:] == sorted(numbers[5:])
    # A duplicate returns the original id and sequence number
    again = sqs.send_message(QueueUrl=url, MessageBody="other", MessageGroupId="A",
                             MessageDeduplicationId="d0")
    assert (again["MessageId"], again["SequenceNumber"]) == (
        sent[0]["MessageId"], sent[0]["SequenceNumber"])
    # A receive of 3 takes group A's first three in order (or B's); the group is then held
    first = _receive(sqs, url, MaxNumberOfMessages=3, ReceiveRequestAttemptId="attempt-1")
    group = first[0]["Attributes"]["MessageGroupId"]
    offset = 0 if group == "A" else 5
    assert [m["Body"] for m in first] == [f"m{offset + i}" for i in range(3)]
    # The same attempt id returns the same messages and handles
    replay = _receive(sqs, url, MaxNumberOfMessages=3, ReceiveRequestAttemptId="attempt-1")
    assert [m["ReceiptHandle"] for m in replay] == [m["ReceiptHandle"] for m in first]
    # The other group flows while this one is held
    other = _receive(sqs, url)
    assert [m["Body"] for m in other] == [f"m{5 - offset + i}" for i in range(5)]
    assert _receive(sqs, url) == []
    # Deleting the held messages releases the rest of the group, in order
    sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(first)])
    rest = _receive(sqs, url)
    assert [m["Body"] for m in rest] == [f"m{offset + 3}", f"m{offset + 4}"]
    # Errors come in SQS's shape
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="z")
    assert caught.value.response["Error"]["Code"] == "MissingParameter"
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="A",
                         MessageDeduplicationId="z", DelaySeconds=1)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_concurrent_senders_and_consumers_keep_group_order(sqs: Any,
                                                           unique_name: Names) -> None:
    url = _fifo(sqs, unique_name("busy") + ".fifo", ContentBasedDeduplication="true",
                DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    per_group = 20
    groups = ["g0", "g1", "g2", "g3", "g4", "g5"]

    def produce(group: str) -> None:
        for start in range(0, per_group, 5):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"{group}:{start + i:03d}", "MessageGroupId": group}
                for i in range(5)])

    received: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        for _ in range(60):
            with lock:
                if len(received) >= per_group * len(groups):
                    return
            messages = _receive(sqs, url, WaitTimeSeconds=1)
            if messages:
                with lock:
                    received.extend(m["Body"] for m in messages)
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)])

    threads = [threading.Thread(target=produce, args=(g,)) for g in groups]
    threads += [threading.Thread(target=consume) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(received) == sorted(f"{g}:{i:03d}" for g in groups for i in range(per_group))
    for group in groups:
        mine = [body for body in received if body.startswith(group + ":")]
        assert mine == sorted(mine), group


def test_fifo_dead_letters_over_http(sqs: Any, unique_name: Names) -> None:
    dlq = _fifo(sqs, unique_name("dead") + ".fifo")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = _fifo(sqs, unique_name("src") + ".fifo", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": 1}))
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g",
                         MessageDeduplicationId=f"d{i}")
    # Received once with no visibility timeout: the next receive moves all three, in order
    assert [m["Body"] for m in _receive(sqs, url, VisibilityTimeout=0)] == ["m0", "m1", "m2"]
    assert _receive(sqs, url) == []
    moved = _receive(sqs, dlq)
    assert [m["Body"] for m in moved] == ["m0", "m1", "m2"]
    assert {m["Attributes"]["MessageGroupId"] for m in moved} == {"g"}
    standard = sqs.create_queue(QueueName=unique_name("plain"))["QueueUrl"]
    standard_arn = sqs.get_queue_attributes(QueueUrl=standard, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": standard_arn, "maxReceiveCount": 1})})
    assert caught.value.response["Error"]["Message"].endswith(
        "Dead-letter queue must be same type of queue as the source..")
