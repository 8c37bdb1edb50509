"""FIFO batches, dead letters and high throughput: SQS's batch rules and group order."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from app import runtime
from chalicelib.fifo import rules as fifo
from tests.clocks import FakeClock

MISSING_DEDUP = ("The queue should either have ContentBasedDeduplication enabled or "
                 "MessageDeduplicationId provided explicitly")


def _fifo(sqs: Any, name: str = "orders.fifo", **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name,
                                Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]
    return url


def _entry(index: int, group: str = "g", **extra: Any) -> dict[str, Any]:
    return {"Id": f"e{index}", "MessageBody": f"m{index}", "MessageGroupId": group,
            "MessageDeduplicationId": f"d{index}", **extra}


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"],
        **kwargs).get("Messages", [])
    return result


def test_batch_sends_in_order_with_increasing_sequence_numbers(sqs: Any) -> None:
    url = _fifo(sqs)
    result = sqs.send_message_batch(QueueUrl=url, Entries=[_entry(i) for i in range(10)])
    assert [s["Id"] for s in result["Successful"]] == [f"e{i}" for i in range(10)]
    numbers = [int(s["SequenceNumber"]) for s in result["Successful"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == 10
    assert [m["Body"] for m in _receive(sqs, url)] == [f"m{i}" for i in range(10)]


def test_batch_without_a_group_fails_as_a_whole(sqs: Any) -> None:
    url = _fifo(sqs)
    entries = [_entry(0), {"Id": "e1", "MessageBody": "x", "MessageDeduplicationId": "d"}]
    with pytest.raises(ClientError) as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == \
        "The request must contain the parameter MessageGroupId."
    assert _receive(sqs, url) == []


def test_batch_without_a_dedup_id_fails_as_a_whole(sqs: Any) -> None:
    url = _fifo(sqs)
    entries = [_entry(0), {"Id": "e1", "MessageBody": "x", "MessageGroupId": "g"}]
    with pytest.raises(ClientError) as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert caught.value.response["Error"]["Message"] == MISSING_DEDUP
    assert _receive(sqs, url) == []


def test_batch_entry_errors_fail_alone(sqs: Any) -> None:
    url = _fifo(sqs)
    entries = [_entry(0), _entry(1, DelaySeconds=3), _entry(2, group="bad group"),
               _entry(3, MessageDeduplicationId="x" * 129), _entry(4)]
    result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert [s["Id"] for s in result["Successful"]] == ["e0", "e4"]
    failed = {f["Id"]: f for f in result["Failed"]}
    assert failed["e1"]["Message"] == (
        "Value 3 for parameter DelaySeconds is invalid. Reason: The request include "
        "parameter that is not valid for this queue type.")
    assert failed["e2"]["Message"] == (
        "Value bad group for parameter MessageGroupId is invalid. Reason: MessageGroupId can "
        "only include alphanumeric and punctuation characters. 1 to 128 in length.")
    assert failed["e3"]["Message"].startswith(
        "Value " + "x" * 129 + " for parameter MessageDeduplicationId is invalid.")
    assert all(f["Code"] == "InvalidParameterValue" and f["SenderFault"]
               for f in failed.values())
    assert [m["Body"] for m in _receive(sqs, url)] == ["m0", "m4"]


def test_duplicates_in_and_across_batches_return_the_original(sqs: Any) -> None:
    url = _fifo(sqs)
    first = sqs.send_message(QueueUrl=url, MessageBody="old", MessageGroupId="g",
                             MessageDeduplicationId="d0")
    entries = [_entry(0), _entry(1), {**_entry(2), "MessageDeduplicationId": "d1"}]
    result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    by_id = {s["Id"]: s for s in result["Successful"]}
    assert by_id["e0"]["MessageId"] == first["MessageId"]
    assert by_id["e0"]["SequenceNumber"] == first["SequenceNumber"]
    assert by_id["e2"]["MessageId"] == by_id["e1"]["MessageId"]
    assert by_id["e2"]["SequenceNumber"] == by_id["e1"]["SequenceNumber"]
    assert [m["Body"] for m in _receive(sqs, url)] == ["old", "m1"]


def test_groups_of_a_batch_are_received_in_their_own_order(sqs: Any) -> None:
    url = _fifo(sqs)
    entries = [_entry(i, group="A" if i % 2 else "B") for i in range(10)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    messages = _receive(sqs, url)
    a = [m["Body"] for m in messages if m["Attributes"]["MessageGroupId"] == "A"]
    b = [m["Body"] for m in messages if m["Attributes"]["MessageGroupId"] == "B"]
    assert a == ["m1", "m3", "m5", "m7", "m9"] and b == ["m0", "m2", "m4", "m6", "m8"]


def test_over_received_messages_move_in_order_to_the_fifo_dlq(
        sqs: Any, clock: FakeClock) -> None:
    dlq = _fifo(sqs, "dead.fifo")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = _fifo(sqs, VisibilityTimeout="5", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    sent = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g",
                             MessageDeduplicationId=f"d{i}") for i in range(3)]
    assert [m["Body"] for m in _receive(sqs, url)] == ["m0", "m1", "m2"]
    clock.advance(6)
    # Each message was received once: the next receive moves all three, in order
    assert _receive(sqs, url) == []
    moved = _receive(sqs, dlq)
    assert [m["Body"] for m in moved] == ["m0", "m1", "m2"]
    assert [m["MessageId"] for m in moved] == [s["MessageId"] for s in sent]
    assert [m["Attributes"]["MessageGroupId"] for m in moved] == ["g"] * 3
    assert [m["Attributes"]["MessageDeduplicationId"] for m in moved] == ["d0", "d1", "d2"]
    # a dead letter keeps its receive count, as SQS counts it: one receive in the source,
    # one in the dead-letter queue
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in moved] == ["2"] * 3


def test_group_stays_behind_its_head_until_the_head_moves(sqs: Any, clock: FakeClock) -> None:
    dlq = _fifo(sqs, "dead.fifo")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = _fifo(sqs, VisibilityTimeout="5", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    for i in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g",
                         MessageDeduplicationId=f"d{i}")
    # The head is received alone, then again with the next message behind it
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in first] == ["m0"]
    clock.advance(6)
    second = _receive(sqs, url)
    assert [m["Body"] for m in second] == ["m0", "m1"]
    clock.advance(6)
    # Now m0 is over its count: it moves first; m1 (received once) is delivered after it
    third = _receive(sqs, url)
    assert [m["Body"] for m in third] == ["m1"]
    assert [m["Body"] for m in _receive(sqs, dlq)] == ["m0"]


def test_high_throughput_spreads_groups_over_shards_by_hash(sqs: Any) -> None:
    url = _fifo(sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    groups = [f"group-{i}" for i in range(20)]
    for group in groups:
        for index in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=f"{group}:{index}", MessageGroupId=group,
                             MessageDeduplicationId=str(index))
    # The groups land on several of the 4 shards, each group on one
    assert len({fifo.shard_slot(g, 4) for g in groups}) > 1
    queue = runtime.services_for().queues.get("000000000000", "orders.fifo")
    per_shard = runtime.services_for().messages.shard_counts(queue)
    expected = {s: 3 * sum(1 for g in groups if fifo.shard_slot(g, 4) == s) for s in range(4)}
    assert {s: c.visible for s, c in per_shard.items()} == expected
    received: dict[str, list[str]] = {}
    for _ in range(20):
        for message in _receive(sqs, url):
            group = message["Attributes"]["MessageGroupId"]
            received.setdefault(group, []).append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert received == {g: [f"{g}:{i}" for i in range(3)] for g in groups}
