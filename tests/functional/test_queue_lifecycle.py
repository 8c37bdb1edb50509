"""GIVEN queues WHEN they are deleted, re-created or purged THEN SQS's cool-downs hold."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clocks import FakeClock
from tests.purges import remove_purged

COUNTS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def _counts(sqs: Any, url: str) -> tuple[int, int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
    visible, hidden, delayed = (int(found[n]) for n in COUNTS)
    return visible, hidden, delayed


def _bodies(sqs: Any, url: str) -> list[str]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(m["Body"] for m in found.get("Messages", []))


def _names(sqs: Any) -> list[str]:
    return [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]


# -- DeleteQueue ----------------------------------------------------------------------------


def test_deleted_queue_no_longer_exists(sqs: Any) -> None:
    # GIVEN a queue holding a message, next to another queue
    url = sqs.create_queue(QueueName="doomed")["QueueUrl"]
    sqs.create_queue(QueueName="survivor")
    sqs.send_message(QueueUrl=url, MessageBody="lost")
    # WHEN it is deleted
    sqs.delete_queue(QueueUrl=url)
    # THEN it cannot be found, listed or used, and the other queue is untouched
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="doomed")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url, MessageBody="late")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert _names(sqs) == ["survivor"]


def test_deleting_a_missing_or_deleted_queue_raises_does_not_exist(sqs: Any) -> None:
    # GIVEN a queue that was deleted, and a URL that never named a queue
    url = sqs.create_queue(QueueName="once")["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    # WHEN either is deleted THEN QueueDoesNotExist
    for target in (url, "http://dmq.test/000000000000/never", "not-a-queue-url"):
        with pytest.raises(sqs.exceptions.QueueDoesNotExist):
            sqs.delete_queue(QueueUrl=target)


@pytest.mark.parametrize("wait", [0, 30, 59])
def test_recreating_within_60_seconds_raises_deleted_recently(
    sqs: Any, clock: FakeClock, wait: int
) -> None:
    # GIVEN a queue deleted `wait` seconds ago (less than 60)
    url = sqs.create_queue(QueueName="phoenix")["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    clock.advance(wait)
    # WHEN a queue of the same name is created THEN QueueDeletedRecently, and none exists
    with pytest.raises(sqs.exceptions.QueueDeletedRecently):
        sqs.create_queue(QueueName="phoenix")
    assert _names(sqs) == []


def test_other_names_can_be_created_right_after_a_delete(sqs: Any) -> None:
    # GIVEN a queue deleted just now
    sqs.delete_queue(QueueUrl=sqs.create_queue(QueueName="gone")["QueueUrl"])
    # WHEN a queue of another name is created THEN it is not held back
    sqs.create_queue(QueueName="fresh")
    assert _names(sqs) == ["fresh"]


def test_recreating_after_61_seconds_gives_a_new_empty_queue(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a customised, tagged queue with messages, deleted
    url = sqs.create_queue(
        QueueName="phoenix", Attributes={"VisibilityTimeout": "90"}, tags={"team": "a"}
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    sqs.delete_queue(QueueUrl=url)
    # WHEN 61 s pass (the background removed its messages) and the name is created again
    clock.advance(61)
    remove_purged()
    again = sqs.create_queue(QueueName="phoenix")["QueueUrl"]
    # THEN it is a new queue: same URL, default attributes, no tags, no messages
    assert again == url
    found = sqs.get_queue_attributes(QueueUrl=again, AttributeNames=["All"])["Attributes"]
    assert found["VisibilityTimeout"] == "30"
    assert found["CreatedTimestamp"] == str(clock.now_ms() // 1000)
    assert sqs.list_queue_tags(QueueUrl=again).get("Tags", {}) == {}
    assert _counts(sqs, again) == (0, 0, 0)
    assert _bodies(sqs, again) == []


def test_recreated_queue_can_use_different_attributes(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue with VisibilityTimeout 90, deleted 61 s ago
    url = sqs.create_queue(QueueName="reborn", Attributes={"VisibilityTimeout": "90"})["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    clock.advance(61)
    # WHEN it is created again with other attributes THEN no QueueNameExists is raised
    sqs.create_queue(QueueName="reborn", Attributes={"VisibilityTimeout": "5"})
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert found["Attributes"] == {"VisibilityTimeout": "5"}


# -- PurgeQueue -----------------------------------------------------------------------------


def test_purge_removes_visible_in_flight_and_delayed_messages(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a queue with a visible, an in-flight and a delayed message
    url = sqs.create_queue(QueueName="full")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="taken")
    sqs.receive_message(QueueUrl=url)
    sqs.send_message(QueueUrl=url, MessageBody="waiting")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=120)
    assert _counts(sqs, url) == (1, 1, 1)
    # WHEN the queue is purged (and the background removed its messages)
    sqs.purge_queue(QueueUrl=url)
    remove_purged()
    # THEN no message is counted, and none comes back once timeouts and delays pass
    assert _counts(sqs, url) == (0, 0, 0)
    clock.advance(121)
    assert _bodies(sqs, url) == []


def test_purge_keeps_the_queue_and_later_messages(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a purged queue with a custom attribute
    url = sqs.create_queue(QueueName="kept", Attributes={"DelaySeconds": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    sqs.purge_queue(QueueUrl=url)
    # WHEN a message is sent after the purge
    clock.advance(1)
    sqs.send_message(QueueUrl=url, MessageBody="after")
    # THEN the queue still exists and delivers the new message only
    assert sqs.get_queue_url(QueueName="kept")["QueueUrl"] == url
    assert _bodies(sqs, url) == ["after"]


@pytest.mark.parametrize("wait", [0, 1, 59])
def test_second_purge_within_60_seconds_is_in_progress(
    sqs: Any, clock: FakeClock, wait: int
) -> None:
    # GIVEN a queue purged `wait` seconds ago and a message sent since
    url = sqs.create_queue(QueueName="busy")["QueueUrl"]
    sqs.purge_queue(QueueUrl=url)
    clock.advance(wait or 0.001)  # a message sent in the purge's millisecond may go too
    sqs.send_message(QueueUrl=url, MessageBody="survives")
    # WHEN it is purged again THEN PurgeQueueInProgress, and the message stays
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress) as caught:
        sqs.purge_queue(QueueUrl=url)
    # as SQS answers it: HTTP 403 and this text
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert caught.value.response["Error"]["Message"] == (
        "Only one PurgeQueue operation on busy is allowed every 60 seconds.")
    assert _bodies(sqs, url) == ["survives"]


def test_purge_is_allowed_again_after_60_seconds(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue purged 61 s ago holding a new message
    url = sqs.create_queue(QueueName="again")["QueueUrl"]
    sqs.purge_queue(QueueUrl=url)
    clock.advance(61)
    sqs.send_message(QueueUrl=url, MessageBody="second")
    # WHEN it is purged again THEN the purge succeeds and the message is gone
    sqs.purge_queue(QueueUrl=url)
    assert _bodies(sqs, url) == []


def test_purge_cool_down_is_per_queue(sqs: Any, clock: FakeClock) -> None:
    # GIVEN one queue purged just now
    first = sqs.create_queue(QueueName="first")["QueueUrl"]
    second = sqs.create_queue(QueueName="second")["QueueUrl"]
    sqs.send_message(QueueUrl=second, MessageBody="x")
    sqs.purge_queue(QueueUrl=first)
    # WHEN another queue is purged THEN it is not held back, and only it is emptied
    clock.advance(0.001)
    sqs.send_message(QueueUrl=first, MessageBody="y")
    sqs.purge_queue(QueueUrl=second)
    assert _bodies(sqs, second) == []
    assert _bodies(sqs, first) == ["y"]


def test_purging_a_missing_queue_raises_does_not_exist(sqs: Any) -> None:
    # GIVEN no queue named "ghost" WHEN its URL is purged THEN QueueDoesNotExist
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.purge_queue(QueueUrl="http://dmq.test/000000000000/ghost")
