"""GIVEN a queue WHEN its attributes are read or set THEN values, limits and errors match SQS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.clocks import FakeClock

RANGES = [
    ("VisibilityTimeout", 0, 43200),
    ("DelaySeconds", 0, 900),
    ("MaximumMessageSize", 1024, 1048576),
    ("MessageRetentionPeriod", 60, 1209600),
    ("ReceiveMessageWaitTimeSeconds", 0, 20),
]


def _code(caught: pytest.ExceptionInfo[Any]) -> str:
    return str(caught.value.response["Error"]["Code"])


def _get(sqs: Any, url: str, *names: str) -> dict[str, str]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names))
    return dict(found.get("Attributes", {}))


def _queue(sqs: Any, name: str = "conf", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


# -- GetQueueAttributes ---------------------------------------------------------------------


def test_all_returns_defaults_arn_timestamps_and_counts(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue created at a known time
    url = _queue(sqs, "every")
    now_s = str(clock.now_ms() // 1000)
    # WHEN All is asked for
    found = _get(sqs, url, "All")
    # THEN the defaults, the ARN, both timestamps and zero counts are returned
    assert found["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:every"
    assert found["CreatedTimestamp"] == now_s
    assert found["LastModifiedTimestamp"] == now_s
    assert found["VisibilityTimeout"] == "30"
    assert found["MessageRetentionPeriod"] == "345600"
    assert found["MaximumMessageSize"] == "1048576"
    assert found["DelaySeconds"] == "0"
    assert found["ReceiveMessageWaitTimeSeconds"] == "0"
    assert found["ApproximateNumberOfMessages"] == "0"
    assert found["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert found["ApproximateNumberOfMessagesDelayed"] == "0"


def test_named_attributes_return_only_those(sqs: Any) -> None:
    # GIVEN a queue WHEN two attributes are asked for THEN exactly those two come back
    url = _queue(sqs)
    assert set(_get(sqs, url, "QueueArn", "DelaySeconds")) == {"QueueArn", "DelaySeconds"}


def test_no_attribute_names_returns_no_attributes(sqs: Any) -> None:
    # GIVEN a queue WHEN GetQueueAttributes names no attribute THEN none are returned
    url = _queue(sqs)
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)


@pytest.mark.parametrize("name", ["Bogus", "visibilitytimeout", "FifoQueue",
                                  "ContentBasedDeduplication", ""])
def test_unknown_attribute_name_is_invalid(sqs: Any, name: str) -> None:
    # GIVEN a standard queue WHEN an unknown or FIFO-only attribute is asked for
    url = _queue(sqs)
    # THEN InvalidAttributeName, even beside valid names
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn", name])


def test_attributes_of_a_missing_queue_raise_does_not_exist(sqs: Any) -> None:
    # GIVEN no queue "ghost" WHEN its attributes are read or set THEN QueueDoesNotExist
    url = "http://dmq.test/000000000000/ghost"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "1"})


# -- SetQueueAttributes ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "low", "high"), RANGES)
def test_set_accepts_both_ends_of_each_range(
    sqs: Any, name: str, low: int, high: int
) -> None:
    # GIVEN a queue WHEN an attribute is set to its lowest, then its highest value
    url = _queue(sqs)
    for value in (str(low), str(high)):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
        # THEN each value reads back as set
        assert _get(sqs, url, name) == {name: value}


@pytest.mark.parametrize(("name", "low", "high"), RANGES)
def test_set_rejects_values_just_outside_each_range(
    sqs: Any, name: str, low: int, high: int
) -> None:
    # GIVEN a queue with its default values
    url = _queue(sqs)
    before = _get(sqs, url, name)
    # WHEN an attribute is set one below its lowest or one above its highest value
    for value in (str(low - 1), str(high + 1)):
        with pytest.raises(sqs.exceptions.InvalidAttributeValue):
            sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
    # THEN InvalidAttributeValue, and the attribute is unchanged
    assert _get(sqs, url, name) == before


@pytest.mark.parametrize("value", ["", "ten", "2.5", "--1", "\u00b3"])
def test_set_rejects_non_integer_values(sqs: Any, value: str) -> None:
    # GIVEN a queue WHEN DelaySeconds is set to something not an integer
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": value})
    # THEN InvalidAttributeValue and the default stays
    assert _get(sqs, url, "DelaySeconds") == {"DelaySeconds": "0"}


def test_a_rejected_set_changes_nothing(sqs: Any) -> None:
    # GIVEN a queue WHEN one valid and one invalid attribute are set together
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"DelaySeconds": "10", "VisibilityTimeout": "43201"}
        )
    # THEN neither is applied
    assert _get(sqs, url, "DelaySeconds", "VisibilityTimeout") == {
        "DelaySeconds": "0", "VisibilityTimeout": "30"
    }


@pytest.mark.parametrize(
    "name",
    ["Bogus", "QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed",
     "CreatedTimestamp", "LastModifiedTimestamp", "All"],
)
def test_set_unknown_or_read_only_attribute_is_an_invalid_name(sqs: Any, name: str) -> None:
    # GIVEN a queue WHEN a computed or unknown attribute is set
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: "1"})


def test_set_fifo_attribute_on_a_standard_queue_is_an_invalid_name(sqs: Any) -> None:
    # GIVEN a standard queue WHEN FifoQueue=true is set THEN SQS's unknown-attribute error
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})


def test_set_updates_last_modified_but_not_created(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue created at t0
    url = _queue(sqs)
    created = str(clock.now_ms() // 1000)
    # WHEN 100 s later an attribute is changed
    clock.advance(100)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "31"})
    # THEN LastModifiedTimestamp moves to now, CreatedTimestamp stays
    found = _get(sqs, url, "CreatedTimestamp", "LastModifiedTimestamp")
    assert found == {"CreatedTimestamp": created,
                     "LastModifiedTimestamp": str(clock.now_ms() // 1000)}


def test_set_keeps_the_attributes_it_does_not_name(sqs: Any) -> None:
    # GIVEN a queue with a custom delay WHEN only the visibility timeout is set
    url = _queue(sqs, DelaySeconds="8")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "99"})
    # THEN the delay is kept
    assert _get(sqs, url, "DelaySeconds", "VisibilityTimeout") == {
        "DelaySeconds": "8", "VisibilityTimeout": "99"
    }


def test_new_visibility_timeout_applies_to_later_receives(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue whose VisibilityTimeout is set to 5 s and a message in it
    url = _queue(sqs)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "5"})
    sqs.send_message(QueueUrl=url, MessageBody="m")
    # WHEN it is received THEN it stays hidden 4 s and returns at 5 s
    assert len(sqs.receive_message(QueueUrl=url).get("Messages", [])) == 1
    clock.advance(4)
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    clock.advance(1)
    assert len(sqs.receive_message(QueueUrl=url).get("Messages", [])) == 1


def test_policy_is_stored_and_an_empty_policy_removes_it(sqs: Any) -> None:
    # GIVEN a queue and a JSON policy document
    url = _queue(sqs)
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    # WHEN it is set THEN it reads back
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
    assert json.loads(_get(sqs, url, "Policy")["Policy"]) == json.loads(policy)
    # WHEN it is set to "" THEN the queue has no Policy any more
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert "Policy" not in _get(sqs, url, "All")


@pytest.mark.parametrize("policy", ["{not json", "[]", "\"text\""])
def test_a_policy_that_is_not_a_json_object_is_invalid(sqs: Any, policy: str) -> None:
    # GIVEN a queue WHEN Policy is set to something other than a JSON object
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
    # THEN InvalidAttributeValue and no Policy is stored
    assert "Policy" not in _get(sqs, url, "All")
