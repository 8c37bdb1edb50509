"""GIVEN the app on moto WHEN a message goes round THEN SQS semantics hold."""

from __future__ import annotations

from typing import Any

from tests.clocks import FakeClock


def test_send_receive_delete_round_trip(sqs: Any, clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    assert url == "http://dmq.test/000000000000/orders"
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello")
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    assert [m["MessageId"] for m in got] == [sent["MessageId"]]
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    clock.advance(31)
    again = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    assert again["ReceiptHandle"] != got[0]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    clock.advance(31)
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
