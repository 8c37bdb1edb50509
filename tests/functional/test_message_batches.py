"""GIVEN batch requests WHEN they break SQS's batch rules THEN the modelled errors come back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Batch = Callable[[Any, str, list[dict[str, Any]]], Any]


def _queue(sqs: Any, name: str = "batched") -> str:
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


def _send(sqs: Any, url: str, ids: list[str]) -> Any:
    return sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": i, "MessageBody": f"body-{i}"} for i in ids]
    )


def _delete(sqs: Any, url: str, ids: list[str]) -> Any:
    return sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": i, "ReceiptHandle": "handle"} for i in ids]
    )


def _change(sqs: Any, url: str, ids: list[str]) -> Any:
    return sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[{"Id": i, "ReceiptHandle": "handle", "VisibilityTimeout": 5} for i in ids],
    )


ACTIONS = pytest.mark.parametrize("batch", [_send, _delete, _change],
                                  ids=["send", "delete", "change_visibility"])


def _stored(sqs: Any, url: str) -> list[str]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(m["Body"] for m in found.get("Messages", []))


# -- request-level errors ------------------------------------------------------------------------


@ACTIONS
def test_empty_batch_is_empty_batch_request(sqs: Any, batch: Batch) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a batch with no entries is sent THEN EmptyBatchRequest
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        batch(sqs, url, [])


@ACTIONS
def test_eleven_entries_are_too_many(sqs: Any, batch: Batch) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a batch of eleven entries is sent THEN TooManyEntriesInBatchRequest
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        batch(sqs, url, [f"e{i}" for i in range(11)])
    # AND a send batch stored nothing
    assert _stored(sqs, url) == []


@ACTIONS
def test_repeated_entry_ids_are_not_distinct(sqs: Any, batch: Batch) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN two entries share an Id THEN BatchEntryIdsNotDistinct
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        batch(sqs, url, ["same", "other", "same"])
    assert _stored(sqs, url) == []


@ACTIONS
@pytest.mark.parametrize("bad_id", ["has space", "dot.ted", "é", "newline\n", "x" * 81])
def test_malformed_entry_id_is_invalid_batch_entry_id(sqs: Any, batch: Batch, bad_id: str) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN an entry Id breaks the rules (alphanumerics, - and _, up to 80) THEN InvalidBatchEntryId
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        batch(sqs, url, ["good", bad_id])
    assert _stored(sqs, url) == []


def test_ten_entries_with_well_formed_ids_are_accepted(sqs: Any) -> None:
    # GIVEN ten entries whose Ids use every allowed kind of character, one of 80 letters
    url = _queue(sqs)
    ids = ["a", "Z9", "with-hyphen", "with_underscore", "x" * 80, *[f"n{i}" for i in range(5)]]
    # WHEN they are sent in one batch THEN each succeeds under its own Id
    result = _send(sqs, url, ids)
    assert sorted(e["Id"] for e in result["Successful"]) == sorted(ids)
    assert result.get("Failed", []) == []
    assert len({e["MessageId"] for e in result["Successful"]}) == 10


# -- per-entry results ---------------------------------------------------------------------------


def test_send_batch_reports_digests_per_entry(sqs: Any) -> None:
    # GIVEN a batch of two entries, one with an attribute
    url = _queue(sqs)
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "plain", "MessageBody": "hello"},
        {"Id": "tagged", "MessageBody": "hello",
         "MessageAttributes": {"attribName1": {"DataType": "String",
                                               "StringValue": "attribValue 1"}}},
    ])
    by_id = {e["Id"]: e for e in result["Successful"]}
    # THEN each entry has its own digests
    assert by_id["plain"]["MD5OfMessageBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert "MD5OfMessageAttributes" not in by_id["plain"]
    assert by_id["tagged"]["MD5OfMessageAttributes"] == "19e27d4e946b072f3f58da80d94fd778"


def test_send_batch_fails_invalid_entries_alone(sqs: Any) -> None:
    # GIVEN a batch with a good entry, an invalid body, a bad attribute and too many attributes
    url = _queue(sqs)
    eleven = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "good", "MessageBody": "fine"},
        {"Id": "badchars", "MessageBody": "bad\x00"},
        {"Id": "badname", "MessageBody": "x",
         "MessageAttributes": {"AWS.no": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "toomany", "MessageBody": "x", "MessageAttributes": eleven},
    ])
    # THEN the good entry succeeds and each bad one fails with its own code, as a sender fault
    assert [e["Id"] for e in result["Successful"]] == ["good"]
    failed = {e["Id"]: (e["Code"], e["SenderFault"]) for e in result["Failed"]}
    assert failed == {
        "badchars": ("InvalidMessageContents", True),
        "badname": ("InvalidParameterValue", True),
        "toomany": ("InvalidParameterValue", True),
    }
    assert all(e["Message"] for e in result["Failed"])
    # AND only the good message was stored
    assert _stored(sqs, url) == ["fine"]


def test_delete_batch_reports_each_entry(sqs: Any) -> None:
    # GIVEN two received messages
    url = _queue(sqs)
    _send(sqs, url, ["a", "b", "c"])
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert len(received) == 2
    # WHEN a batch deletes both and names a garbled handle
    result = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "one", "ReceiptHandle": received[0]["ReceiptHandle"]},
        {"Id": "two", "ReceiptHandle": received[1]["ReceiptHandle"]},
        {"Id": "bad", "ReceiptHandle": "garbled"},
    ])
    # THEN the two deletes succeed and the garbled entry fails alone
    assert sorted(e["Id"] for e in result["Successful"]) == ["one", "two"]
    assert [(e["Id"], e["Code"]) for e in result["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    # AND only the third message remains
    deleted = {m["Body"] for m in received}
    assert _stored(sqs, url) == sorted({"body-a", "body-b", "body-c"} - deleted)
