"""GIVEN queues with messages WHEN an admin lists, describes and peeks
THEN they see every queue and the oldest messages, and peeking claims nothing."""

from __future__ import annotations

from typing import Any

from chalice.test import Client

from tests.admin_signing import admin_call
from tests.clocks import FakeClock


def _send(sqs: Any, url: str, body: str, clock: FakeClock) -> str:
    """Send a millisecond after the last send: peeks order by send time (message ids do
    not order sends)."""
    clock.advance(0.001)
    return str(sqs.send_message(QueueUrl=url, MessageBody=body)["MessageId"])


def test_admin_lists_describes_and_peeks_without_receiving(
        sqs: Any, dmq: Client, clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="inspect-me")["QueueUrl"]
    sqs.create_queue(QueueName="other")
    ids = [_send(sqs, url, f"m{i}", clock) for i in range(3)]

    listed = admin_call(dmq, "GET", "/admin/queues").json_body
    assert [q["name"] for q in listed["queues"]] == ["inspect-me", "other"]

    shown = admin_call(dmq, "GET", "/admin/queues/000000000000/inspect-me").json_body
    assert (shown["visible"], shown["in_flight"], shown["delayed"]) == (3, 0, 0)

    peeked = admin_call(dmq, "GET",
                        "/admin/queues/000000000000/inspect-me/messages?limit=2").json_body
    assert [m["message_id"] for m in peeked["messages"]] == ids[:2]
    assert [m["body"] for m in peeked["messages"]] == ["m0", "m1"]
    assert all(m["receive_count"] == 0 for m in peeked["messages"])
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(received) == 3


def test_admin_on_a_missing_queue_is_a_404_with_the_sqs_code(dmq: Client) -> None:
    response = admin_call(dmq, "GET", "/admin/queues/000000000000/nope")
    assert response.status_code == 404
    assert response.json_body["code"] == "QueueDoesNotExist"
