"""GIVEN the admin API WHEN an admin lists, creates and deletes push subscriptions THEN
they get CreateEventSourceMapping's defaults, and every limit it checks (botocore's Lambda
model: BatchSize 1-10,000, at most 10 for FIFO, above 10 only with a batching window;
MaximumBatchingWindowInSeconds 0-300; MaximumConcurrency 2-1,000; FunctionResponseTypes
at most one, ReportBatchItemFailures) is refused with a clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.push import targets
from chalicelib.push.subscriptions import MAX_PER_QUEUE
from tests.admin_signing import admin_call

ACCOUNT = "000000000000"
BASE = f"/admin/queues/{ACCOUNT}"


@pytest.fixture
def worker() -> Iterator[str]:
    targets.on_queue_message("subscription-worker")(lambda event: None)
    yield "subscription-worker"
    targets.unregister("subscription-worker")


def post(dmq: Client, name: str, body: Any) -> Any:
    return admin_call(dmq, "POST", f"{BASE}/{name}/subscriptions", json.dumps(body).encode())


def test_create_list_and_delete_with_the_documented_defaults(
        sqs: Any, dmq: Client, worker: str) -> None:
    url = sqs.create_queue(QueueName="subscribed")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    assert admin_call(dmq, "GET", f"{BASE}/subscribed/subscriptions").json_body == {
        "queue_id": f"{ACCOUNT}/subscribed", "subscriptions": []}
    created = post(dmq, "subscribed", {"FunctionName": worker}).json_body
    assert created["EventSourceArn"] == arn
    assert (created["BatchSize"], created["MaximumBatchingWindowInSeconds"]) == (10, 0)
    assert created["FunctionResponseTypes"] == []
    assert created["State"] == "Enabled"
    assert "ScalingConfig" not in created
    hook = post(dmq, "subscribed", {
        "Endpoint": "https://example.com/hook", "BatchSize": 10_000,
        "MaximumBatchingWindowInSeconds": 300, "FunctionResponseTypes":
        ["ReportBatchItemFailures"], "ScalingConfig": {"MaximumConcurrency": 1000},
        "Enabled": False}).json_body
    assert (hook["BatchSize"], hook["ScalingConfig"], hook["State"]) == (
        10_000, {"MaximumConcurrency": 1000}, "Disabled")
    listed = admin_call(dmq, "GET", f"{BASE}/subscribed/subscriptions").json_body["subscriptions"]
    assert sorted(s["UUID"] for s in listed) == sorted([created["UUID"], hook["UUID"]])

    deleted = admin_call(dmq, "DELETE", f"{BASE}/subscribed/subscriptions/{created['UUID']}")
    assert deleted.status_code == 200 and deleted.json_body["UUID"] == created["UUID"]
    listed = admin_call(dmq, "GET", f"{BASE}/subscribed/subscriptions").json_body["subscriptions"]
    assert [s["UUID"] for s in listed] == [hook["UUID"]]
    again = admin_call(dmq, "DELETE", f"{BASE}/subscribed/subscriptions/{created['UUID']}")
    assert again.status_code == 404
    assert again.json_body["code"] == "ResourceNotFoundException"


BAD = [
    ({"BatchSize": 0}, "Value '0' at 'batchSize' failed to satisfy constraint: Member must "
     "have value greater than or equal to 1"),
    ({"BatchSize": 10_001, "MaximumBatchingWindowInSeconds": 1},
     "Member must have value less than or equal to 10000"),
    ({"BatchSize": 11}, "Maximum batch window in seconds must be greater than 0 if maximum "
     "batch size is greater than 10"),
    ({"BatchSize": "10"}, "BatchSize must be an integer."),
    ({"MaximumBatchingWindowInSeconds": -1}, "greater than or equal to 0"),
    ({"MaximumBatchingWindowInSeconds": 301}, "less than or equal to 300"),
    ({"ScalingConfig": {"MaximumConcurrency": 1}},
     "at 'scalingConfig.maximumConcurrency' failed to satisfy constraint: Member must have "
     "value greater than or equal to 2"),
    ({"ScalingConfig": {"MaximumConcurrency": 1001}}, "less than or equal to 1000"),
    ({"ScalingConfig": {"Other": 3}}, "ScalingConfig takes MaximumConcurrency only."),
    ({"FunctionResponseTypes": ["Other"]},
     "Member must satisfy enum value set: [ReportBatchItemFailures]"),
    ({"FunctionResponseTypes": ["ReportBatchItemFailures", "ReportBatchItemFailures"]},
     "Member must have length less than or equal to 1"),
    ({"Enabled": "yes"}, "Enabled must be true or false."),
    ({"Colour": "red"}, "Unknown field(s): Colour."),
]


def test_every_limit_is_refused_with_its_message(sqs: Any, dmq: Client, worker: str) -> None:
    sqs.create_queue(QueueName="limits")
    sqs.create_queue(QueueName="limits.fifo", Attributes={"FifoQueue": "true"})
    for extra, message in BAD:
        response = post(dmq, "limits", {"FunctionName": worker, **extra})
        assert response.status_code == 400, extra
        assert response.json_body["code"] == "InvalidParameterValue", extra
        assert message in response.json_body["message"], (extra, response.json_body)
    fifo = post(dmq, "limits.fifo", {"FunctionName": worker, "BatchSize": 11,
                                     "MaximumBatchingWindowInSeconds": 1})
    assert fifo.json_body["message"] == "Batch size must be between 1 and 10 for FIFO queues."
    assert post(dmq, "limits.fifo", {"FunctionName": worker, "BatchSize": 10}).status_code == 200
    for target in ({}, {"FunctionName": worker, "Endpoint": "http://127.0.0.1:1/"},
                   {"Endpoint": "ftp://example.com/"}, {"Endpoint": "http:///nohost"},
                   {"FunctionName": ""}):
        response = post(dmq, "limits", target)
        assert response.status_code == 400, target
        assert response.json_body["code"] == "InvalidParameterValue", target
    unknown = post(dmq, "limits", {"FunctionName": "not-registered"})
    assert unknown.status_code == 404
    assert unknown.json_body == {"code": "ResourceNotFoundException",
                                 "message": "Function not found: not-registered"}
    not_json = admin_call(dmq, "POST", f"{BASE}/limits/subscriptions", b"[1]")
    assert not_json.status_code == 400
    assert post(dmq, "missing", {"FunctionName": worker}).status_code == 404
    assert admin_call(dmq, "GET", f"{BASE}/missing/subscriptions").json_body["code"] == (
        "QueueDoesNotExist")


def test_a_queue_takes_at_most_ten_subscriptions(sqs: Any, dmq: Client, worker: str) -> None:
    sqs.create_queue(QueueName="crowded")
    for _ in range(MAX_PER_QUEUE):
        assert post(dmq, "crowded", {"FunctionName": worker}).status_code == 200
    refused = post(dmq, "crowded", {"FunctionName": worker})
    assert refused.status_code == 409
    assert refused.json_body["code"] == "ResourceConflictException"
    listed = admin_call(dmq, "GET", f"{BASE}/crowded/subscriptions").json_body["subscriptions"]
    assert len(listed) == MAX_PER_QUEUE
