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


def test_a_peek_after_a_purge_shows_the_messages_sent_since_while_the_backlog_is_removed(
        sqs: Any, dmq: Client, clock: FakeClock) -> None:
    # GIVEN a backlog wider than a peek's sample, purged (its removal not yet run), and
    # messages sent after the purge
    url = sqs.create_queue(QueueName="purged-backlog")["QueueUrl"]
    for start in range(0, 250, 10):
        clock.advance(0.001)
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"old {start + i}"} for i in range(10)])
    clock.advance(0.001)
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)
    wide = "w" * 3000  # its index entry does not hold its body
    bodies = ["new 0", wide, "new 2"]
    ids = [_send(sqs, url, body, clock) for body in bodies]
    # WHEN an admin peeks
    peeked = admin_call(dmq, "GET",
                        "/admin/queues/000000000000/purged-backlog/messages?limit=10").json_body
    # THEN the messages sent since the purge show, oldest first, whole, and no purged one
    assert [m["message_id"] for m in peeked["messages"]] == ids
    assert [m["body"][:5] for m in peeked["messages"]] == ["new 0", "wwwww", "new 2"]
    assert peeked["messages"][1]["body_truncated"] is True
