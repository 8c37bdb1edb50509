"""GIVEN hostile JSON 1.0 input (deep nesting, lone surrogates) WHEN it reaches the app
THEN it gets the SQS error SQS gives, with usage metering on, never a 500."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.domain.exceptions import ConcurrentChangeError
from chalicelib.metadata.repository import QueueRepository
from chalicelib.settings import Settings

SURROGATE_ESCAPE = "\\ud800"  # a lone high surrogate, as a JSON escape
SURROGATE_BYTES = b"\xed\xa0\x80"  # the same, as (invalid) UTF-8 bytes
ACTIONS = ["CreateQueue", "SendMessage", "SendMessageBatch", "ReceiveMessage",
           "ListQueues", "TagQueue", "GetQueueAttributes", "PurgeQueue"]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Usage metering is on (it needs an archive folder), as in `make run`."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    data_dir=str(tmp_path))


def _call(dmq: Client, action: str, body: bytes | str) -> tuple[int, dict[str, Any], Any]:
    raw = body.encode() if isinstance(body, str) else body
    response = dmq.http.request(
        "POST", "/", body=raw,
        headers={"Content-Type": "application/x-amz-json-1.0",
                 "X-Amz-Target": f"AmazonSQS.{action}", "Host": "dmq.test"},
    )
    return response.status_code, response.headers, json.loads(response.body)


def _code(body: dict[str, Any]) -> str:
    return str(body["__type"]).rsplit("#", 1)[-1]


def _queue(dmq: Client, name: str = "q") -> str:
    status, _, body = _call(dmq, "CreateQueue", json.dumps({"QueueName": name}))
    assert status == 200, body
    return str(body["QueueUrl"])


@pytest.mark.parametrize(("action", "depth"), [
    *((action, 1_000) for action in ACTIONS), ("SendMessage", 100), ("SendMessage", 100_000),
])
def test_deeply_nested_json_is_a_serialization_exception(
    dmq: Client, action: str, depth: int,
) -> None:
    # GIVEN a body whose one member is nested `depth` arrays deep
    body = '{"QueueName": "q", "Extra": ' + "[" * depth + "]" * depth + "}"
    # WHEN it is sent THEN SQS's serialization error comes back, as a client error
    status, headers, error = _call(dmq, action, body)
    assert status == 400, error
    assert _code(error) == "SerializationException"
    assert headers["x-amzn-query-error"] == "SerializationException;Sender"


def test_nesting_as_deep_as_the_model_allows_is_served(dmq: Client) -> None:
    url = _queue(dmq)
    entry = {"Id": "a", "MessageBody": "x", "MessageAttributes": {
        "n": {"DataType": "String", "StringValue": "v"}}}
    status, _, body = _call(dmq, "SendMessageBatch",
                            json.dumps({"QueueUrl": url, "Entries": [entry]}))
    assert status == 200 and body["Successful"], body


@pytest.mark.parametrize("raw", [False, True], ids=["escape", "utf8-bytes"])
def test_a_lone_surrogate_in_a_body_is_invalid_message_contents(dmq: Client, raw: bool) -> None:
    url = _queue(dmq)
    for action, template in [
        ("SendMessage", '{"QueueUrl": "%s", "MessageBody": "a%sb"}'),
        ("SendMessageBatch", '{"QueueUrl": "%s", "Entries": [{"Id": "1", "MessageBody": "a%sb"}]}'),
    ]:
        body = (template % (url, "@")).encode().replace(
            b"@", SURROGATE_BYTES if raw else SURROGATE_ESCAPE.encode())
        status, _, error = _call(dmq, action, body)
        if action == "SendMessage":
            assert (status, _code(error)) == (400, "InvalidMessageContents"), error
        else:  # a batch reports the entry as failed, the request as served
            assert status == 200, error
            assert error["Failed"][0]["Code"] == "InvalidMessageContents", error


def test_a_lone_surrogate_in_a_message_attribute_is_invalid_parameter_value(
    dmq: Client,
) -> None:
    # SQS refuses an attribute value's invalid characters as InvalidParameterValue (a
    # body's as InvalidMessageContents)
    url = _queue(dmq)
    body = ('{"QueueUrl": "URL", "MessageBody": "b", "MessageAttributes": '
            '{"a": {"DataType": "String", "StringValue": "@"}}}').replace("URL", url)
    status, _, error = _call(dmq, "SendMessage", body.replace("@", SURROGATE_ESCAPE))
    assert (status, _code(error)) == (400, "InvalidParameterValueException"), error


def test_a_lone_surrogate_in_an_attribute_data_type_is_invalid_parameter_value(
    dmq: Client,
) -> None:
    url = _queue(dmq)
    body = ('{"QueueUrl": "URL", "MessageBody": "b", "MessageAttributes": '
            '{"a": {"DataType": "String.@", "StringValue": "v"}}}').replace("URL", url)
    status, _, error = _call(dmq, "SendMessage", body.replace("@", SURROGATE_ESCAPE))
    assert (status, _code(error)) == (400, "InvalidParameterValueException"), error


def test_a_lone_surrogate_on_a_missing_queue_still_gets_an_sqs_error(dmq: Client) -> None:
    # The error path meters the request too: it must not fail on the surrogate.
    body = '{"QueueUrl": "http://dmq.test/000000000000/nope", "MessageBody": "@"}'
    status, _, error = _call(dmq, "SendMessage", body.replace("@", SURROGATE_ESCAPE))
    assert status == 400 and _code(error) in ("QueueDoesNotExist", "InvalidMessageContents")


@pytest.mark.parametrize(("action", "template"), [
    ("CreateQueue", '{"QueueName": "q%s"}'),
    ("CreateQueue", '{"QueueName": "t", "tags": {"k": "v%s"}}'),
    ("CreateQueue", '{"QueueName": "t", "tags": {"k%s": "v"}}'),
    ("TagQueue", '{"QueueUrl": "URL", "Tags": {"k": "v%s"}}'),
    ("TagQueue", '{"QueueUrl": "URL", "Tags": {"k%s": "v"}}'),
    ("UntagQueue", '{"QueueUrl": "URL", "TagKeys": ["k%s"]}'),
    ("SetQueueAttributes", '{"QueueUrl": "URL", "Attributes": {"Policy": "p%s"}}'),
    ("ListQueues", '{"QueueNamePrefix": "q%s"}'),
    ("GetQueueUrl", '{"QueueName": "q%s"}'),
    ("SendMessage", '{"QueueUrl": "URL%s", "MessageBody": "b"}'),
])
def test_a_lone_surrogate_in_any_other_parameter_is_invalid_parameter_value(
    dmq: Client, action: str, template: str,
) -> None:
    url = _queue(dmq)
    body = (template % SURROGATE_ESCAPE).replace("URL", url)
    status, _, error = _call(dmq, action, body)
    assert (status, _code(error)) == (400, "InvalidParameterValueException"), error
    # THEN nothing was stored: the queue's tags are as they were
    status, _, tags = _call(dmq, "ListQueueTags", json.dumps({"QueueUrl": url}))
    assert status == 200 and tags.get("Tags", {}) == {}, tags


def test_a_metering_fault_never_fails_a_served_request(
    dmq: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN usage metering that fails on every request
    class BrokenMeter:
        def record(self, account: str, queue: str, action: str, payload_bytes: int) -> None:
            raise OSError("usage store unreachable")

    monkeypatch.setattr(runtime, "meter", lambda: BrokenMeter())
    # WHEN requests are served, and fail THEN their answers are what they would be
    url = _queue(dmq)
    status, _, body = _call(dmq, "SendMessage", json.dumps({"QueueUrl": url, "MessageBody": "m"}))
    assert status == 200 and body["MessageId"], body
    status, _, error = _call(dmq, "GetQueueUrl", json.dumps({"QueueName": "missing"}))
    assert (status, _code(error)) == (400, "QueueDoesNotExist"), error
    # AND the fault is logged
    assert "usage metering failed" in caplog.text


@pytest.mark.parametrize("action", ["PurgeQueue", "DeleteQueue"])
def test_a_queue_changed_by_concurrent_requests_is_a_retryable_error(
    dmq: Client, monkeypatch: pytest.MonkeyPatch, action: str,
) -> None:
    # GIVEN another request changes the queue's record between this one's read and write
    url = _queue(dmq)

    def lost_race(self: QueueRepository, record: Any, count: int = 0, quota: int = 0) -> Any:
        raise ConcurrentChangeError("the conditional request failed")

    monkeypatch.setattr(QueueRepository, "save", lost_race)
    # WHEN the request writes and keeps losing THEN it is told to retry with an error the
    # SDKs retry by themselves (503), as an SQS error, not a 500
    status, _, error = _call(dmq, action, json.dumps({"QueueUrl": url}))
    assert (status, _code(error)) == (503, "ServiceUnavailable"), error


HUGE = "q" * 300_000  # larger than any DynamoDB key


@pytest.mark.parametrize(("action", "params", "code"), [
    ("GetQueueUrl", {"QueueName": HUGE}, "QueueDoesNotExist"),
    ("GetQueueUrl", {"QueueName": "q", "QueueOwnerAWSAccountId": HUGE}, "QueueDoesNotExist"),
    ("SendMessage", {"QueueUrl": "http://dmq.test/000000000000/" + HUGE, "MessageBody": "m"},
     "QueueDoesNotExist"),
    ("GetQueueAttributes", {"QueueUrl": f"http://dmq.test/{HUGE}/q"}, "QueueDoesNotExist"),
    ("GetQueueUrl", {"QueueName": "a/b"}, "QueueDoesNotExist"),
    ("ListDeadLetterSourceQueues", {"QueueUrl": "http://[::1/000000000000/q"},
     "QueueDoesNotExist"),
    ("ListQueues", {"MaxResults": 5, "NextToken": base64.urlsafe_b64encode(
        HUGE.encode()).decode()}, "InvalidParameterValueException"),
])
def test_a_name_no_queue_can_have_is_an_sqs_error_not_a_store_fault(
    dmq: Client, store_keys: list[str], action: str, params: dict[str, Any], code: str,
) -> None:
    status, _, error = _call(dmq, action, json.dumps(params))
    assert (status, _code(error)) == (400, code), error
    # THEN the store was never asked for a key DynamoDB refuses (over 2,048 bytes)
    assert all(len(key) <= 2048 for key in store_keys)


def test_a_prefix_longer_than_any_name_lists_nothing(dmq: Client, store_keys: list[str]) -> None:
    _queue(dmq)
    status, _, body = _call(dmq, "ListQueues", json.dumps({"QueueNamePrefix": HUGE}))
    assert (status, body) == (200, {})
    assert all(len(key) <= 2048 for key in store_keys)


@pytest.fixture
def store_keys(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queue ids, prefixes and page starts the metadata store is asked for (moto
    accepts any size; DynamoDB refuses a key over 2,048 bytes, a 503 to the client)."""
    keys: list[str] = []
    get, list_names = QueueRepository.get, QueueRepository.list_names

    def spy_get(self: QueueRepository, queue_id: str, *args: Any, **kwargs: Any) -> Any:
        keys.append(queue_id)
        return get(self, queue_id, *args, **kwargs)

    def spy_list(self: QueueRepository, account: str, prefix: str, limit: int,
                 after: str | None) -> Any:
        keys.extend([account, prefix, after or ""])
        return list_names(self, account, prefix, limit, after)

    monkeypatch.setattr(QueueRepository, "get", spy_get)
    monkeypatch.setattr(QueueRepository, "list_names", spy_list)
    return keys


@pytest.mark.parametrize(("name", "value"), [
    ("Policy", json.dumps({"Statement": [{"Sid": "x" * 9000}]})),
    ("Policy", "[" * 100_000 + "]" * 100_000),
    ("KmsMasterKeyId", "k" * 300_000),  # over DynamoDB's 400 KB item with the record
    ("RedriveAllowPolicy", '{"redrivePermission": "allowAll", "x": "' + "y" * 9000 + '"}'),
])
def test_queue_attribute_text_over_its_limit_is_invalid_attribute_value(
    dmq: Client, name: str, value: str,
) -> None:
    url = _queue(dmq)
    for action, params in [("SetQueueAttributes", {"QueueUrl": url}),
                           ("CreateQueue", {"QueueName": "other"})]:
        status, _, error = _call(dmq, action, json.dumps({**params, "Attributes": {name: value}}))
        assert (status, _code(error)) == (400, "InvalidAttributeValue"), error
