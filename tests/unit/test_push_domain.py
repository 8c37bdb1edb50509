"""How a push target's answer is read (Lambda's rules for ReportBatchItemFailures, from
the Lambda developer guide's "Handling errors for an SQS event source"), and which
messages of a FIFO batch stay when one fails."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.push.subscription import (
    BatchItem,
    Invocation,
    Subscription,
    failed_messages,
    reported_failures,
)

IDS = {"m1", "m2", "m3"}


@pytest.mark.parametrize("response", [None, {}, {"batchItemFailures": []},
                                      {"batchItemFailures": None}, {"other": 1}])
def test_no_or_empty_failures_are_a_complete_success(response: Any) -> None:
    assert reported_failures(response, IDS) == set()


def test_named_failures_are_the_failed_items() -> None:
    response = {"batchItemFailures": [{"itemIdentifier": "m2"}, {"itemIdentifier": "m3"}]}
    assert reported_failures(response, IDS) == {"m2", "m3"}


@pytest.mark.parametrize("response", [
    "not an object", 42, [], {"batchItemFailures": "m1"},
    {"batchItemFailures": ["m1"]},
    {"batchItemFailures": [{"itemIdentifier": ""}]},
    {"batchItemFailures": [{"itemIdentifier": None}]},
    {"batchItemFailures": [{"itemIdentifier": 7}]},
    {"batchItemFailures": [{"itemId": "m1"}]},
    {"batchItemFailures": [{"itemIdentifier": "unknown"}]},
    {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "unknown"}]},
])
def test_an_unusable_response_fails_the_whole_batch(response: Any) -> None:
    assert reported_failures(response, IDS) is None
    items = [BatchItem(i, None) for i in sorted(IDS)]
    assert failed_messages(items, Invocation(True, response), True, False) == IDS


def test_a_failed_invocation_fails_every_message() -> None:
    items = [BatchItem("m1", None), BatchItem("m2", None)]
    assert failed_messages(items, Invocation(False, error="boom"), False, False) == {"m1", "m2"}


def test_without_partial_reports_the_response_is_ignored() -> None:
    items = [BatchItem("m1", None)]
    response = {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert failed_messages(items, Invocation(True, response), False, False) == set()


def test_a_fifo_group_stops_at_its_first_failure() -> None:
    items = [BatchItem("a1", "A"), BatchItem("a2", "A"), BatchItem("b1", "B"),
             BatchItem("a3", "A"), BatchItem("b2", "B")]
    response = {"batchItemFailures": [{"itemIdentifier": "a2"}]}
    assert failed_messages(items, Invocation(True, response), True, True) == {"a2", "a3"}
    # A standard queue keeps only what was named.
    assert failed_messages(items, Invocation(True, response), True, False) == {"a2"}


def test_the_admin_view_uses_event_source_mapping_names() -> None:
    sub = Subscription("u-1", "000000000000/q", "arn:aws:sqs:us-east-1:000000000000:q",
                       None, "worker", 10, 0, True, 5, True, 1)
    assert sub.to_json() == {
        "UUID": "u-1", "QueueId": "000000000000/q",
        "EventSourceArn": "arn:aws:sqs:us-east-1:000000000000:q", "FunctionName": "worker",
        "BatchSize": 10, "MaximumBatchingWindowInSeconds": 0,
        "FunctionResponseTypes": ["ReportBatchItemFailures"], "State": "Enabled",
        "LastModified": 1, "ScalingConfig": {"MaximumConcurrency": 5}}
