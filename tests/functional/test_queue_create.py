"""GIVEN CreateQueue requests WHEN names and attributes vary THEN DMQ answers as SQS does."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

DEFAULTS = {
    "VisibilityTimeout": "30",
    "MessageRetentionPeriod": "345600",
    "MaximumMessageSize": "1048576",
    "DelaySeconds": "0",
    "ReceiveMessageWaitTimeSeconds": "0",
}


def _attributes(sqs: Any, url: str, *names: str) -> dict[str, str]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names) or ["All"])
    return dict(found.get("Attributes", {}))


def _code(caught: pytest.ExceptionInfo[Any]) -> str:
    return str(caught.value.response["Error"]["Code"])


def _names(sqs: Any) -> list[str]:
    return [u.rsplit("/", 1)[1] for u in sqs.list_queues().get("QueueUrls", [])]


# -- names ---------------------------------------------------------------------------------


def test_create_queue_returns_the_url_of_the_account_and_name(sqs: Any) -> None:
    # GIVEN no queue WHEN a queue is created
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    # THEN its URL is <endpoint>/<account>/<name> and GetQueueUrl agrees
    assert url == "http://dmq.test/000000000000/orders"
    assert sqs.get_queue_url(QueueName="orders")["QueueUrl"] == url


@pytest.mark.parametrize("name", ["a", "A-b_9", "x" * 80, "0123456789", "-_-"])
def test_valid_queue_names_are_accepted(sqs: Any, name: str) -> None:
    # GIVEN a name of 1 to 80 alphanumerics, hyphens or underscores
    # WHEN a queue is created with it THEN it exists under exactly that name
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url.endswith(f"/{name}")
    assert _names(sqs) == [name]


@pytest.mark.parametrize(
    "name",
    ["x" * 81, "", "has space", "dot.name", "slash/name", "colon:name", "star*", "caf\u00e9",
     "tab\tname", "orders\n", "plus+name"],
)
def test_invalid_queue_names_are_rejected(sqs: Any, name: str) -> None:
    # GIVEN a name that is too long, empty, or holds a character SQS refuses
    # WHEN a queue is created with it
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.create_queue(QueueName=name)
    # THEN the request fails with InvalidParameterValue and no queue exists
    assert _code(caught) == "InvalidParameterValue"
    assert _names(sqs) == []


def test_queue_names_are_case_sensitive(sqs: Any) -> None:
    # GIVEN a queue named "orders"
    lower = sqs.create_queue(QueueName="orders", Attributes={"DelaySeconds": "5"})["QueueUrl"]
    # WHEN "Orders" is created with other attributes THEN it is a second, distinct queue
    upper = sqs.create_queue(QueueName="Orders", Attributes={"DelaySeconds": "9"})["QueueUrl"]
    assert lower != upper
    assert sorted(_names(sqs)) == ["Orders", "orders"]
    assert _attributes(sqs, lower, "DelaySeconds") == {"DelaySeconds": "5"}


def test_fifo_name_without_fifo_queue_is_invalid(sqs: Any) -> None:
    # GIVEN a name ending in .fifo WHEN it is created without FifoQueue=true
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.create_queue(QueueName="orders.fifo")
    # THEN the name is refused as a standard queue's name and no queue exists
    assert _code(caught) == "InvalidParameterValue"
    assert _names(sqs) == []


@pytest.mark.parametrize(
    "attributes",
    [{"ContentBasedDeduplication": "true"},
     {"DeduplicationScope": "messageGroup"}, {"FifoThroughputLimit": "perMessageGroupId"}],
)
def test_fifo_attributes_are_refused_on_a_standard_queue(
        sqs: Any, attributes: dict[str, str]) -> None:
    # GIVEN a standard name WHEN a FIFO-only attribute is given
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.create_queue(QueueName="orders", Attributes=attributes)
    # THEN no queue is created
    assert _names(sqs) == []


def test_fifo_queue_false_is_refused_as_sqs_refuses_it(sqs: Any) -> None:
    # GIVEN FifoQueue=false WHEN a standard queue is created THEN SQS's answer: the
    # attribute is unknown to a standard queue, and no queue is made
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName="orders", Attributes={"FifoQueue": "false"})
    assert caught.value.response["Error"]["Message"] == "Unknown Attribute FifoQueue."
    assert "QueueUrls" not in sqs.list_queues()


# -- defaults and values ------------------------------------------------------------------------


def test_new_queue_has_the_documented_defaults(sqs: Any) -> None:
    # GIVEN a queue created without attributes
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    # WHEN its attributes are read THEN every documented default holds
    found = _attributes(sqs, url)
    assert {k: found[k] for k in DEFAULTS} == DEFAULTS
    assert "RedrivePolicy" not in found and "Policy" not in found


def test_given_attributes_override_the_defaults(sqs: Any) -> None:
    # GIVEN every settable number given explicitly
    given = {"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600",
             "MaximumMessageSize": "2048", "DelaySeconds": "7",
             "ReceiveMessageWaitTimeSeconds": "12"}
    # WHEN the queue is created THEN each reads back as given
    url = sqs.create_queue(QueueName="custom", Attributes=given)["QueueUrl"]
    assert _attributes(sqs, url, *given) == given


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("VisibilityTimeout", 0, 43200), ("DelaySeconds", 0, 900),
     ("MaximumMessageSize", 1024, 1048576), ("MessageRetentionPeriod", 60, 1209600),
     ("ReceiveMessageWaitTimeSeconds", 0, 20)],
)
def test_attribute_range_limits_are_inclusive(sqs: Any, name: str, low: int, high: int) -> None:
    # GIVEN the lowest and the highest value SQS allows WHEN queues are created with them
    low_url = sqs.create_queue(QueueName="low", Attributes={name: str(low)})["QueueUrl"]
    high_url = sqs.create_queue(QueueName="high", Attributes={name: str(high)})["QueueUrl"]
    # THEN both are accepted and stored
    assert _attributes(sqs, low_url, name) == {name: str(low)}
    assert _attributes(sqs, high_url, name) == {name: str(high)}
    # WHEN one below or one above is given THEN InvalidAttributeValue and no queue
    for value in (low - 1, high + 1):
        with pytest.raises(sqs.exceptions.ClientError) as caught:
            sqs.create_queue(QueueName="outside", Attributes={name: str(value)})
        assert _code(caught) == "InvalidAttributeValue"
    assert sorted(_names(sqs)) == ["high", "low"]


@pytest.mark.parametrize("value", ["abc", "1.5", "", "--5", "+-3", "\u00b2", "1e3", "0x10"])
def test_non_integer_attribute_values_are_rejected(sqs: Any, value: str) -> None:
    # GIVEN a VisibilityTimeout that is not a plain integer WHEN a queue is created
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.create_queue(QueueName="odd", Attributes={"VisibilityTimeout": value})
    # THEN the request fails with InvalidAttributeValue (never an internal error)
    assert _code(caught) == "InvalidAttributeValue"
    assert _names(sqs) == []


@pytest.mark.parametrize("name", ["Bogus", "QueueArn", "ApproximateNumberOfMessages",
                                  "CreatedTimestamp", "visibilitytimeout"])
def test_unknown_or_read_only_attribute_is_an_invalid_name(sqs: Any, name: str) -> None:
    # GIVEN an attribute name SQS does not let a client set WHEN a queue is created with it
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.create_queue(QueueName="named", Attributes={name: "1"})
    # THEN no queue is created
    assert _names(sqs) == []


# -- idempotency ---------------------------------------------------------------------------------


def test_create_queue_is_idempotent_with_the_same_attributes(sqs: Any) -> None:
    # GIVEN a queue created with attributes
    given = {"VisibilityTimeout": "60", "DelaySeconds": "3"}
    first = sqs.create_queue(QueueName="same", Attributes=given)["QueueUrl"]
    # WHEN it is created again with the same name and attributes
    second = sqs.create_queue(QueueName="same", Attributes=given)["QueueUrl"]
    # THEN the same URL comes back and there is still one queue
    assert second == first
    assert _names(sqs) == ["same"]


def test_create_queue_without_attributes_returns_the_existing_queue(sqs: Any) -> None:
    # GIVEN a queue with a custom visibility timeout
    first = sqs.create_queue(QueueName="kept", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    # WHEN the name is created again without attributes
    again = sqs.create_queue(QueueName="kept")["QueueUrl"]
    # THEN the existing queue is returned unchanged
    assert again == first
    assert _attributes(sqs, first, "VisibilityTimeout") == {"VisibilityTimeout": "60"}


@pytest.mark.parametrize(
    "other",
    [{"VisibilityTimeout": "61"}, {"VisibilityTimeout": "30"},
     {"VisibilityTimeout": "60", "DelaySeconds": "4"}],
)
def test_create_queue_with_different_attributes_raises_name_exists(
    sqs: Any, other: dict[str, str]
) -> None:
    # GIVEN a queue created with VisibilityTimeout 60 and DelaySeconds 3
    url = sqs.create_queue(
        QueueName="taken", Attributes={"VisibilityTimeout": "60", "DelaySeconds": "3"}
    )["QueueUrl"]
    # WHEN the name is created again with a differing value (even a default one)
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(QueueName="taken", Attributes=other)
    # THEN the existing queue keeps its attributes
    found = _attributes(sqs, url, "VisibilityTimeout", "DelaySeconds")
    assert found == {"VisibilityTimeout": "60", "DelaySeconds": "3"}
