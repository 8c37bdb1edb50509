"""FIFO messages: group ids, deduplication, sequence numbers, group order and release."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.clocks import FakeClock

MISSING_DEDUP = ("The queue should either have ContentBasedDeduplication enabled or "
                 "MessageDeduplicationId provided explicitly")
ALL_SYSTEM = ["All"]


def _fifo(sqs: Any, name: str = "orders.fifo", **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name,
                                Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]
    return url


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def _send(sqs: Any, url: str, body: str, group: str = "g", dedup: str | None = None) -> Any:
    return sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group,
                            MessageDeduplicationId=dedup or body)


def _receive(sqs: Any, url: str, count: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=count, MessageSystemAttributeNames=ALL_SYSTEM,
        **kwargs).get("Messages", [])
    return result


def _bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


# -- send rules ----------------------------------------------------------------------------

def test_send_returns_message_id_and_a_20_digit_sequence_number(sqs: Any) -> None:
    url = _fifo(sqs)
    first = _send(sqs, url, "one")
    second = _send(sqs, url, "two")
    for sent in (first, second):
        assert len(sent["SequenceNumber"]) == 20 and sent["SequenceNumber"].isdigit()
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    assert first["MessageId"] != second["MessageId"]


def test_message_group_id_is_required(sqs: Any) -> None:
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d")
    assert _error(caught) == ("MissingParameter",
                              "The request must contain the parameter MessageGroupId.")


def test_deduplication_id_or_content_based_deduplication_is_required(sqs: Any) -> None:
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert _error(caught) == ("InvalidParameterValue", MISSING_DEDUP)


def test_per_message_delay_is_refused(sqs: Any) -> None:
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g",
                         MessageDeduplicationId="d", DelaySeconds=5)
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include parameter "
        "that is not valid for this queue type.")
    # DelaySeconds=0 is allowed
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g",
                     MessageDeduplicationId="d", DelaySeconds=0)


@pytest.mark.parametrize("name", ["MessageGroupId", "MessageDeduplicationId"])
@pytest.mark.parametrize("value", ["a" * 129, "has space", "caf\u00e9", ""])
def test_group_and_dedup_ids_are_checked(sqs: Any, name: str, value: str) -> None:
    url = _fifo(sqs)
    params = {"MessageGroupId": "g", "MessageDeduplicationId": "d", name: value}
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", **params)
    assert _error(caught) == (
        "InvalidParameterValue",
        f"Value {value} for parameter {name} is invalid. Reason: {name} can only include "
        "alphanumeric and punctuation characters. 1 to 128 in length.")


def test_longest_ids_with_punctuation_are_accepted(sqs: Any) -> None:
    url = _fifo(sqs)
    punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    group = (punctuation + "G" * 128)[:128]
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId=group,
                            MessageDeduplicationId="D" * 128)
    (message,) = _receive(sqs, url)
    assert message["MessageId"] == sent["MessageId"]
    assert message["Attributes"]["MessageGroupId"] == group
    assert message["Attributes"]["MessageDeduplicationId"] == "D" * 128


def test_standard_queue_refuses_a_deduplication_id(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d")
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value d for parameter MessageDeduplicationId is invalid. Reason: The request "
        "includes a parameter that is not valid for this queue type.")


# -- deduplication -------------------------------------------------------------------------

def test_duplicate_returns_the_original_and_is_stored_once(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs)
    first = _send(sqs, url, "one", dedup="d1")
    clock.advance(299)
    again = _send(sqs, url, "other body", dedup="d1")
    assert (again["MessageId"], again["SequenceNumber"]) == (
        first["MessageId"], first["SequenceNumber"])
    messages = _receive(sqs, url)
    assert _bodies(messages) == ["one"]


def test_dedup_window_holds_after_delete_and_ends_after_five_minutes(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs)
    first = _send(sqs, url, "one", dedup="d1")
    (message,) = _receive(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # Within 5 minutes, even after the delete, the same id is a duplicate
    clock.advance(200)
    assert _send(sqs, url, "one", dedup="d1")["MessageId"] == first["MessageId"]
    assert _receive(sqs, url) == []
    # After 5 minutes it is a new message
    clock.advance(101)
    later = _send(sqs, url, "one", dedup="d1")
    assert later["MessageId"] != first["MessageId"]
    assert [m["MessageId"] for m in _receive(sqs, url)] == [later["MessageId"]]


def test_content_based_deduplication_uses_the_body_sha256(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    first = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    other = sqs.send_message(QueueUrl=url, MessageBody="different", MessageGroupId="g")
    assert again["MessageId"] == first["MessageId"]
    assert other["MessageId"] != first["MessageId"]
    messages = _receive(sqs, url)
    assert _bodies(messages) == ["same", "different"]
    assert messages[0]["Attributes"]["MessageDeduplicationId"] == \
        hashlib.sha256(b"same").hexdigest()
    # An explicit id wins over the content
    explicit = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g",
                                MessageDeduplicationId="x")
    assert explicit["MessageId"] != first["MessageId"]


def test_dedup_scope_queue_spans_groups_and_message_group_does_not(sqs: Any) -> None:
    queue_scope = _fifo(sqs, "q1.fifo")
    a = _send(sqs, queue_scope, "a", group="g1", dedup="same")
    b = _send(sqs, queue_scope, "b", group="g2", dedup="same")
    assert a["MessageId"] == b["MessageId"]
    group_scope = _fifo(sqs, "q2.fifo", DeduplicationScope="messageGroup")
    c = _send(sqs, group_scope, "c", group="g1", dedup="same")
    d = _send(sqs, group_scope, "d", group="g2", dedup="same")
    e = _send(sqs, group_scope, "e", group="g1", dedup="same")
    assert c["MessageId"] != d["MessageId"]
    assert e["MessageId"] == c["MessageId"]


# -- ordering and groups -------------------------------------------------------------------

def test_a_group_is_delivered_in_order_and_blocked_while_in_flight(sqs: Any) -> None:
    url = _fifo(sqs)
    for body in ("1", "2", "3"):
        _send(sqs, url, body, group="A")
    _send(sqs, url, "b1", group="B")
    first = _receive(sqs, url, count=1)
    group = first[0]["Attributes"]["MessageGroupId"]
    # While the group's message is in flight, none of its later messages is delivered,
    # but the other group flows
    second = _receive(sqs, url, count=10)
    assert {m["Attributes"]["MessageGroupId"] for m in second} == ({"A", "B"} - {group})
    assert _receive(sqs, url) == []
    # Deleting the in-flight message releases the group: the rest comes in order
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    rest = _receive(sqs, url)
    if group == "A":
        assert _bodies(first) == ["1"] and _bodies(rest) == ["2", "3"]
    else:
        assert _bodies(second) == ["1", "2", "3"] and rest == []


def test_one_receive_returns_a_group_in_order_then_other_groups(sqs: Any) -> None:
    url = _fifo(sqs)
    for index in range(4):
        _send(sqs, url, f"a{index}", group="A")
        _send(sqs, url, f"b{index}", group="B")
    messages = _receive(sqs, url, count=10)
    assert len(messages) == 8
    for group in ("A", "B"):
        bodies = [m["Body"] for m in messages if m["Attributes"]["MessageGroupId"] == group]
        assert bodies == [f"{group.lower()}{i}" for i in range(4)]
    # Messages of one group come together, not interleaved
    groups = [m["Attributes"]["MessageGroupId"] for m in messages]
    assert groups in (["A"] * 4 + ["B"] * 4, ["B"] * 4 + ["A"] * 4)
    sequences = [int(m["Attributes"]["SequenceNumber"]) for m in messages[:4]]
    assert sequences == sorted(sequences)


def test_system_attributes_are_returned_when_asked(sqs: Any) -> None:
    url = _fifo(sqs)
    sent = _send(sqs, url, "x", group="G", dedup="D")
    (plain,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    assert "Attributes" not in plain
    (asked,) = sqs.receive_message(
        QueueUrl=url, MessageSystemAttributeNames=["MessageGroupId", "SequenceNumber"]
    )["Messages"]
    assert asked["Attributes"] == {"MessageGroupId": "G",
                                   "SequenceNumber": sent["SequenceNumber"]}


def test_visibility_timeout_redelivers_the_group_from_its_head(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    for body in ("1", "2", "3"):
        _send(sqs, url, body)
    first = _receive(sqs, url, count=2)
    assert _bodies(first) == ["1", "2"]
    clock.advance(5)
    assert _receive(sqs, url) == []
    clock.advance(6)
    again = _receive(sqs, url)
    assert _bodies(again) == ["1", "2", "3"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2", "2", "1"]


def test_queue_delay_applies_to_fifo_messages(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, DelaySeconds="30")
    _send(sqs, url, "late")
    assert _receive(sqs, url) == []
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessagesDelayed"] == "1"
    clock.advance(31)
    assert _bodies(_receive(sqs, url)) == ["late"]


def test_counts_of_a_fifo_queue(sqs: Any) -> None:
    url = _fifo(sqs)
    for body in ("1", "2", "3"):
        _send(sqs, url, body)
    _receive(sqs, url, count=2)

    def counts() -> tuple[str, str]:
        found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return (found["ApproximateNumberOfMessages"],
                found["ApproximateNumberOfMessagesNotVisible"])

    assert counts() == ("1", "2")


# -- delete and visibility -----------------------------------------------------------------

def test_delete_after_the_handle_expired_is_refused(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1")
    (message,) = _receive(sqs, url)
    clock.advance(11)
    with pytest.raises(ClientError) as caught:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert _error(caught) == (
        "InvalidParameterValue",
        f"Value {message['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: "
        "The receipt handle has expired.")
    assert _bodies(_receive(sqs, url)) == ["1"]


def test_earlier_handle_of_a_redelivered_message_deletes_it(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1")
    _send(sqs, url, "2")
    (old,) = _receive(sqs, url, count=1)
    clock.advance(11)
    (new,) = _receive(sqs, url, count=1)
    assert new["MessageId"] == old["MessageId"]
    # The earlier handle still works while the message is in flight again: it is deleted,
    # and the group is released
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    assert _bodies(_receive(sqs, url)) == ["2"]
    # Deleting a message already gone succeeds
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])


def test_delete_batch_reports_expired_handles(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1", group="A")
    _send(sqs, url, "x", group="B")
    received = {m["Body"]: m for m in _receive(sqs, url)}
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=received["1"]["ReceiptHandle"],
                                  VisibilityTimeout=1)
    clock.advance(2)
    result = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "old", "ReceiptHandle": received["1"]["ReceiptHandle"]},
        {"Id": "ok", "ReceiptHandle": received["x"]["ReceiptHandle"]},
    ])
    assert [s["Id"] for s in result["Successful"]] == ["ok"]
    assert result["Failed"][0]["Id"] == "old"
    assert result["Failed"][0]["Code"] == "InvalidParameterValue"
    assert result["Failed"][0]["SenderFault"] is True
    assert _bodies(_receive(sqs, url)) == ["1"]


def test_visibility_change_extends_and_ends_the_group_hold(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1")
    _send(sqs, url, "2")
    (first,) = _receive(sqs, url, count=1)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=60)
    clock.advance(30)
    assert _receive(sqs, url) == []  # the group stays held with its message
    # Ending the visibility makes the message, and its group, available again
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert _bodies(_receive(sqs, url)) == ["1", "2"]


def test_visibility_change_with_an_earlier_handle_changes_the_redelivery(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1")
    (old,) = _receive(sqs, url)
    clock.advance(11)
    (new,) = _receive(sqs, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"],
                                  VisibilityTimeout=100)
    clock.advance(50)
    assert _receive(sqs, url) == []
    assert new["MessageId"] == old["MessageId"]


def test_visibility_change_of_a_visible_message_is_refused(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, VisibilityTimeout="10")
    _send(sqs, url, "1")
    (message,) = _receive(sqs, url)
    clock.advance(11)
    with pytest.raises(sqs.exceptions.MessageNotInflight):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"],
                                      VisibilityTimeout=5)


def test_purge_empties_groups_and_clears_the_dedup_window(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs)
    first = _send(sqs, url, "1", dedup="d")
    _send(sqs, url, "2", group="other")
    sqs.purge_queue(QueueUrl=url)
    assert _receive(sqs, url) == []
    clock.advance(0.001)  # a message sent in the purge's millisecond may go too
    assert _send(sqs, url, "1", dedup="d")["MessageId"] != first["MessageId"]
    _send(sqs, url, "3", dedup="new")
    assert _bodies(_receive(sqs, url)) == ["1", "3"]


# -- receive request attempts --------------------------------------------------------------

def test_receive_request_attempt_id_returns_the_same_messages(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs)
    for body in ("1", "2", "3"):
        _send(sqs, url, body)
    first = _receive(sqs, url, count=2, ReceiveRequestAttemptId="try-1")
    again = _receive(sqs, url, count=2, ReceiveRequestAttemptId="try-1")
    assert _bodies(again) == _bodies(first) == ["1", "2"]
    assert [m["ReceiptHandle"] for m in again] == [m["ReceiptHandle"] for m in first]
    # Another attempt id is a new receive: the group is still held
    assert _receive(sqs, url, ReceiveRequestAttemptId="try-2") == []
    # After five minutes the attempt id is forgotten
    clock.advance(301)
    fresh = _receive(sqs, url, count=3, ReceiveRequestAttemptId="try-1")
    assert _bodies(fresh) == ["1", "2", "3"]


def test_receive_request_attempt_id_is_checked(sqs: Any) -> None:
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="bad id")
    assert _error(caught)[0] == "InvalidParameterValue"


def test_a_queue_created_again_does_not_deduplicate_against_the_old_one(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs)
    first = _send(sqs, url, "1", dedup="d")
    sqs.delete_queue(QueueUrl=url)
    clock.advance(61)
    url = _fifo(sqs)
    again = _send(sqs, url, "1", dedup="d")
    assert again["MessageId"] != first["MessageId"]
    assert _bodies(_receive(sqs, url)) == ["1"]


def test_standard_queues_ignore_the_receive_attempt_id(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="any id!")["Messages"]
    assert message["Body"] == "x"


@pytest.mark.parametrize("timeout", [0, 1])
def test_a_group_serves_a_message_visible_again_while_the_next_is_in_flight(
        sqs: Any, clock: FakeClock, timeout: int) -> None:
    # As SQS is observed to do: ending (or shortening) the visibility of the first of two
    # in-flight messages of a group makes that message, and only it, available again
    url = _fifo(sqs, VisibilityTimeout="30")
    _send(sqs, url, "g1-m1", group="group-1")
    _send(sqs, url, "g1-m2", group="group-1")
    _send(sqs, url, "g2-m1", group="group-2")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert _bodies(first) == ["g1-m1", "g1-m2"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"],
                                  VisibilityTimeout=timeout)
    clock.advance(timeout + 1)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3)["Messages"]
    assert sorted(_bodies(again)) == ["g1-m1", "g2-m1"]
