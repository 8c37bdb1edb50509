"""GIVEN messages near the size limits WHEN sent THEN SQS's 1 MiB and per-queue limits hold."""

from __future__ import annotations

from typing import Any

import pytest

MIB = 1_048_576


def _queue(sqs: Any, name: str = "sized", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _invalid_parameter(sqs: Any, **kwargs: Any) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.send_message(**kwargs)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_body_of_exactly_1_mib_is_accepted_and_comes_back_intact(sqs: Any) -> None:
    # GIVEN a queue with the default 1 MiB limit and a body of exactly 1 MiB
    url = _queue(sqs)
    body = ("0123456789abcdef" * (MIB // 16))[:MIB]
    assert len(body.encode()) == MIB
    # WHEN it is sent and received
    sqs.send_message(QueueUrl=url, MessageBody=body)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    # THEN the body is unchanged
    assert message["Body"] == body


def test_body_one_byte_over_1_mib_is_rejected(sqs: Any) -> None:
    # GIVEN a queue with the default 1 MiB limit
    url = _queue(sqs)
    # WHEN a body of 1 MiB + 1 byte is sent THEN InvalidParameterValue, and nothing is stored
    _invalid_parameter(sqs, QueueUrl=url, MessageBody="x" * (MIB + 1))
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_size_counts_utf8_bytes_not_characters(sqs: Any) -> None:
    # GIVEN a queue with a 1024-byte limit
    url = _queue(sqs, MaximumMessageSize="1024")
    # WHEN 512 two-byte characters are sent THEN they fit exactly
    sqs.send_message(QueueUrl=url, MessageBody="é" * 512)
    # WHEN 513 of them are sent THEN the 1026 bytes are rejected
    _invalid_parameter(sqs, QueueUrl=url, MessageBody="é" * 513)


def test_attributes_count_towards_the_size_limit(sqs: Any) -> None:
    # GIVEN a queue with the default limit and an attribute of name, type and value
    url = _queue(sqs)
    attributes = {"key": {"DataType": "String", "StringValue": "value"}}
    overhead = len("key") + len("String") + len("value")
    # WHEN body plus attribute is exactly 1 MiB THEN the message is accepted
    sqs.send_message(QueueUrl=url, MessageBody="x" * (MIB - overhead),
                     MessageAttributes=attributes)
    # WHEN they add up to one byte more THEN it is rejected
    _invalid_parameter(sqs, QueueUrl=url, MessageBody="x" * (MIB - overhead + 1),
                       MessageAttributes=attributes)


def test_queue_maximum_message_size_is_enforced(sqs: Any) -> None:
    # GIVEN a queue whose MaximumMessageSize is 2048 bytes
    url = _queue(sqs, MaximumMessageSize="2048")
    # WHEN a 2048-byte body is sent THEN it is accepted
    sqs.send_message(QueueUrl=url, MessageBody="y" * 2048)
    # WHEN a 2049-byte body is sent THEN InvalidParameterValue
    _invalid_parameter(sqs, QueueUrl=url, MessageBody="y" * 2049)
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(message["Body"]) == 2048


def test_lowered_maximum_message_size_applies_to_later_sends(sqs: Any) -> None:
    # GIVEN a queue that accepted a 4 KiB message
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="z" * 4096)
    # WHEN its MaximumMessageSize is lowered to 1024
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1024"})
    # THEN a 4 KiB send is rejected while a 1 KiB send is accepted
    _invalid_parameter(sqs, QueueUrl=url, MessageBody="z" * 4096)
    sqs.send_message(QueueUrl=url, MessageBody="z" * 1024)


def test_batch_entry_over_the_queue_limit_fails_alone(sqs: Any) -> None:
    # GIVEN a queue with a 1024-byte limit
    url = _queue(sqs, MaximumMessageSize="1024")
    # WHEN a batch holds one entry at the limit and one over it
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "fits", "MessageBody": "a" * 1024},
        {"Id": "big", "MessageBody": "a" * 1025},
    ])
    # THEN only the oversized entry fails, with InvalidParameterValue
    assert [e["Id"] for e in result["Successful"]] == ["fits"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in result["Failed"]] == [
        ("big", "InvalidParameterValue", True)
    ]


def test_batch_totalling_exactly_1_mib_is_accepted(sqs: Any) -> None:
    # GIVEN four entries of a quarter MiB each
    url = _queue(sqs)
    entries = [{"Id": f"e{i}", "MessageBody": str(i) * (MIB // 4)} for i in range(4)]
    # WHEN they are sent in one batch THEN all succeed
    result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(e["Id"] for e in result["Successful"]) == ["e0", "e1", "e2", "e3"]
    assert result.get("Failed", []) == []


def test_batch_totalling_more_than_1_mib_is_batch_request_too_long(sqs: Any) -> None:
    # GIVEN two entries each under 1 MiB whose sum is 1 MiB + 1 byte
    url = _queue(sqs)
    entries = [
        {"Id": "first", "MessageBody": "a" * (MIB // 2)},
        {"Id": "second", "MessageBody": "b" * (MIB // 2 + 1)},
    ]
    # WHEN they are sent in one batch THEN the whole batch is rejected
    with pytest.raises(sqs.exceptions.BatchRequestTooLong):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    # AND nothing was stored
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_large_attribute_with_a_small_body_is_accepted(sqs: Any) -> None:
    # GIVEN a small body with a 600 KB binary attribute (within 1 MiB, beyond a DynamoDB item)
    url = _queue(sqs)
    blob = bytes(range(256)) * 2400
    attributes = {"blob": {"DataType": "Binary", "BinaryValue": blob}}
    # WHEN it is sent and received
    sqs.send_message(QueueUrl=url, MessageBody="small", MessageAttributes=attributes)
    found = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])
    # THEN the attribute comes back intact
    (message,) = found["Messages"]
    assert message["MessageAttributes"]["blob"]["BinaryValue"] == blob


def test_multibyte_attributes_count_in_bytes_when_storing(sqs: Any) -> None:
    # GIVEN a 240 KB body with a 200 KB attribute of four-byte characters
    url = _queue(sqs)
    body = "b" * 240_000
    attributes = {"emoji": {"DataType": "String", "StringValue": "😀" * 50_000}}
    # WHEN it is sent and received
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    found = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])
    # THEN body and attribute come back intact
    (message,) = found["Messages"]
    assert message["Body"] == body
    assert message["MessageAttributes"] == attributes
