"""GIVEN messages in flight WHEN time passes or visibility changes THEN SQS's rules hold."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clocks import FakeClock


def _queue(sqs: Any, name: str = "work", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", []))


def _one_in_flight(sqs: Any, url: str, body: str = "job", **kwargs: Any) -> dict[str, Any]:
    sqs.send_message(QueueUrl=url, MessageBody=body)
    (message,) = _receive(sqs, url, **kwargs)
    return message


# -- visibility timeout and redelivery -------------------------------------------------------


def test_received_message_is_hidden_until_the_queue_visibility_timeout_passes(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a queue with a 10 s visibility timeout and a message received from it
    url = _queue(sqs, VisibilityTimeout="10")
    first = _one_in_flight(sqs, url)
    # WHEN 9 s pass THEN the message stays hidden
    clock.advance(9)
    assert _receive(sqs, url) == []
    # WHEN the 10th second passes THEN it is delivered again, with a new receipt handle
    clock.advance(1)
    (again,) = _receive(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == first["MessageId"]
    assert again["Body"] == "job"
    assert again["ReceiptHandle"] != first["ReceiptHandle"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


def test_default_visibility_timeout_is_30_seconds(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue with default attributes and a received message
    url = _queue(sqs)
    _one_in_flight(sqs, url)
    # WHEN 29 s pass THEN it is hidden; WHEN 30 s have passed THEN it is back
    clock.advance(29)
    assert _receive(sqs, url) == []
    clock.advance(1)
    assert len(_receive(sqs, url)) == 1


def test_receive_visibility_timeout_overrides_the_queue_value(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue with a 30 s visibility timeout
    url = _queue(sqs)
    # WHEN a message is received with VisibilityTimeout=5
    _one_in_flight(sqs, url, VisibilityTimeout=5)
    # THEN it is back after 5 s, not 30 s
    clock.advance(4)
    assert _receive(sqs, url) == []
    clock.advance(1)
    assert len(_receive(sqs, url)) == 1


def test_receive_with_zero_visibility_timeout_leaves_the_message_visible(sqs: Any) -> None:
    # GIVEN a message received with VisibilityTimeout=0
    url = _queue(sqs)
    first = _one_in_flight(sqs, url, VisibilityTimeout=0)
    # WHEN the queue is read again at once THEN the same message comes back
    (again,) = _receive(sqs, url)
    assert again["MessageId"] == first["MessageId"]


@pytest.mark.parametrize("timeout", [-1, 43_201])
def test_receive_visibility_timeout_outside_0_to_43200_is_rejected(sqs: Any, timeout: int) -> None:
    # GIVEN a queue holding a message
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    # WHEN it is received with an out-of-range VisibilityTimeout THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.receive_message(QueueUrl=url, VisibilityTimeout=timeout)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    # AND the message was not claimed
    assert len(_receive(sqs, url)) == 1


def test_receive_visibility_timeout_of_43200_is_accepted(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message received with the largest VisibilityTimeout, 12 hours
    url = _queue(sqs)
    _one_in_flight(sqs, url, VisibilityTimeout=43_200)
    # THEN it is hidden a second before 12 hours and visible at 12 hours
    clock.advance(43_199)
    assert _receive(sqs, url) == []
    clock.advance(1)
    assert len(_receive(sqs, url)) == 1


# -- ChangeMessageVisibility -------------------------------------------------------------------


def test_change_visibility_extends_the_timeout_from_the_time_of_the_call(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a message received 20 s ago under a 30 s timeout
    url = _queue(sqs)
    message = _one_in_flight(sqs, url)
    clock.advance(20)
    # WHEN its visibility is changed to 60 s
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=60
    )
    # THEN it stays hidden for 60 s counted from the change, not from the receive
    clock.advance(59)
    assert _receive(sqs, url) == []
    clock.advance(1)
    assert len(_receive(sqs, url)) == 1


def test_change_visibility_to_zero_makes_the_message_visible_at_once(sqs: Any) -> None:
    # GIVEN a message in flight
    url = _queue(sqs)
    message = _one_in_flight(sqs, url)
    # WHEN its visibility timeout is set to 0
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    # THEN the next receive returns it
    (again,) = _receive(sqs, url)
    assert again["MessageId"] == message["MessageId"]


def test_change_visibility_of_a_message_no_longer_in_flight_is_message_not_inflight(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a message whose visibility timeout has expired (it is visible, not in flight),
    # received again since and visible again (the latest handle would still act: SQS's
    # observed behaviour, tests/functional/test_sqs_observed_behaviour.py)
    url = _queue(sqs, VisibilityTimeout="5")
    message = _one_in_flight(sqs, url)
    clock.advance(6)
    assert len(_receive(sqs, url)) == 1
    clock.advance(6)
    # WHEN its visibility is changed with the old handle THEN MessageNotInflight
    with pytest.raises(sqs.exceptions.MessageNotInflight) as caught:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=60
        )
    assert caught.value.response["Error"]["Message"] == (
        "Message does not exist or is not available for visibility timeout change.")
    # AND the message stays visible
    assert len(_receive(sqs, url)) == 1


def test_an_older_handle_changes_the_visibility_of_the_current_receive(
    sqs: Any, clock: FakeClock,
) -> None:
    # GIVEN a message received with VisibilityTimeout=0, then received again for 30 s
    # (SQS's observed behaviour: an older handle acts on the message's current receive)
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (first,) = _receive(sqs, url, VisibilityTimeout=0)
    (second,) = _receive(sqs, url, VisibilityTimeout=30)
    assert _receive(sqs, url) == []
    # WHEN the first handle terminates the visibility timeout
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )
    # THEN the message is visible again at once
    (again,) = _receive(sqs, url, VisibilityTimeout=30)
    assert again["MessageId"] == second["MessageId"]
    # AND the first handle can also extend the current receive
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=120
    )
    clock.advance(60)
    assert _receive(sqs, url) == []
    clock.advance(60)
    assert len(_receive(sqs, url)) == 1


def test_change_visibility_of_a_deleted_message_is_invalid_parameter_value(sqs: Any) -> None:
    # GIVEN a message received and then deleted
    url = _queue(sqs)
    message = _one_in_flight(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # WHEN its visibility is changed THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=10
        )
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        f"Value {message['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: "
        "Message does not exist or is not available for visibility timeout change.")


@pytest.mark.parametrize(("timeout", "reason"), [
    (-1, "Must be >= 0 and <= 43200."),
    (43_201, "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"),
])
def test_change_visibility_outside_0_to_43200_is_rejected(
    sqs: Any, timeout: int, reason: str,
) -> None:
    # GIVEN a message in flight
    url = _queue(sqs)
    message = _one_in_flight(sqs, url)
    # WHEN its visibility is changed to an out-of-range value THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=timeout
        )
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: {reason}")


def test_change_visibility_with_a_garbled_handle_is_receipt_handle_is_invalid(sqs: Any) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a visibility change names a handle DMQ never issued THEN ReceiptHandleIsInvalid
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as caught:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="garbled", VisibilityTimeout=5)
    assert caught.value.response["Error"]["Message"] == (
        'The input receipt handle "garbled" is not a valid receipt handle.')


def test_change_visibility_batch_reports_each_entry(sqs: Any, clock: FakeClock) -> None:
    # GIVEN two messages in flight
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.send_message(QueueUrl=url, MessageBody="b")
    received = _receive(sqs, url, MaxNumberOfMessages=2)
    assert len(received) == 2
    # WHEN a batch extends one, releases the other and names a garbled handle
    result = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "keep", "ReceiptHandle": received[0]["ReceiptHandle"], "VisibilityTimeout": 300},
        {"Id": "free", "ReceiptHandle": received[1]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "bad", "ReceiptHandle": "garbled", "VisibilityTimeout": 0},
    ])
    # THEN the two valid entries succeed and the garbled one fails alone
    assert sorted(e["Id"] for e in result["Successful"]) == ["free", "keep"]
    (failed,) = result["Failed"]
    assert failed["Id"] == "bad"
    assert failed["Code"] == "ReceiptHandleIsInvalid"
    assert failed["Message"] == 'The input receipt handle "garbled" is not a valid receipt handle.'
    assert failed["SenderFault"] is True
    # AND only the released message is visible now, the kept one after 300 s
    (released,) = _receive(sqs, url, VisibilityTimeout=0)
    assert released["MessageId"] == received[1]["MessageId"]
    clock.advance(300)
    ids = {m["MessageId"] for m in _receive(sqs, url, MaxNumberOfMessages=10)}
    assert ids == {received[0]["MessageId"], received[1]["MessageId"]}


def test_change_visibility_batch_fails_an_out_of_range_entry_alone(sqs: Any) -> None:
    # GIVEN a message in flight
    url = _queue(sqs)
    message = _one_in_flight(sqs, url)
    # WHEN a batch gives one entry a timeout above 12 hours and another a valid one
    result = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "big", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 43_201},
        {"Id": "ok", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0},
    ])
    # THEN only the out-of-range entry fails, with InvalidParameterValue
    assert [e["Id"] for e in result["Successful"]] == ["ok"]
    assert [(e["Id"], e["Code"]) for e in result["Failed"]] == [("big", "InvalidParameterValue")]


def test_change_visibility_batch_naming_one_message_twice_applies_both_in_order(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a message in flight
    url = _queue(sqs)
    handle = _one_in_flight(sqs, url)["ReceiptHandle"]
    # WHEN one batch names its handle twice, first with 100 s and then with 20 s
    result = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "first", "ReceiptHandle": handle, "VisibilityTimeout": 100},
        {"Id": "second", "ReceiptHandle": handle, "VisibilityTimeout": 20},
    ])
    # THEN both entries succeed and the later timeout holds
    assert sorted(e["Id"] for e in result["Successful"]) == ["first", "second"]
    assert result.get("Failed", []) == []
    clock.advance(19)
    assert _receive(sqs, url) == []
    clock.advance(1)
    assert len(_receive(sqs, url)) == 1
