"""GIVEN messages with attributes WHEN sent and received THEN values, digests, rules match SQS."""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import pytest

ATTRIBUTES: dict[str, dict[str, Any]] = {
    "text": {"DataType": "String", "StringValue": "héllo wörld ✓"},
    "count": {"DataType": "Number", "StringValue": "-12.50"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
    "ratio": {"DataType": "Number.float", "StringValue": "3.14159"},
    "label": {"DataType": "String.custom", "StringValue": "tagged"},
    "image": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a"},
}
# Digests published with an independent implementation of SQS's algorithm.
PUBLISHED: list[tuple[dict[str, dict[str, Any]], str]] = [
    ({"attribName1": {"DataType": "String", "StringValue": "attribValue 1"}},
     "19e27d4e946b072f3f58da80d94fd778"),
    ({"customNumberTypeAttrib": {"DataType": "Number.float",
                                 "StringValue": "4563442423554324324264524243.32543234"}},
     "9fe1b90bbd9965bdf77bac517c7d2495"),
    ({"binaryAttribute": {"DataType": "Binary", "BinaryValue": b"Hello binary world!"}},
     "31a92b15d92f8db860eda32aceb656c3"),
]


def _queue(sqs: Any, name: str = "typed") -> str:
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def expected_md5(attributes: dict[str, dict[str, Any]]) -> str:
    """SQS's attribute digest: per name in order, name, type, transport byte and value."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(_length_prefixed(name.encode()))
        digest.update(_length_prefixed(value["DataType"].encode()))
        if "BinaryValue" in value:
            digest.update(b"\x02" + _length_prefixed(value["BinaryValue"]))
        else:
            digest.update(b"\x01" + _length_prefixed(value["StringValue"].encode()))
    return digest.hexdigest()


def _send(sqs: Any, url: str, attributes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return dict(sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes=attributes))


def _received(sqs: Any, url: str, names: list[str]) -> dict[str, Any]:
    found = sqs.receive_message(QueueUrl=url, MessageAttributeNames=names, VisibilityTimeout=0)
    (message,) = found["Messages"]
    return dict(message)


# -- digests and round trip ----------------------------------------------------------------------


def test_body_digest_is_the_md5_of_the_utf8_body(sqs: Any) -> None:
    # GIVEN a body with non-ASCII characters
    url = _queue(sqs)
    body = "This is a test ✓ ünïcode 😀"
    # WHEN it is sent and received
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    # THEN both digests are the MD5 of its UTF-8 bytes and the body comes back unchanged
    expected = hashlib.md5(body.encode("utf-8")).hexdigest()
    assert sent["MD5OfMessageBody"] == expected
    assert message["MD5OfBody"] == expected
    assert message["Body"] == body
    assert "MD5OfMessageAttributes" not in sent


@pytest.mark.parametrize(("attributes", "digest"), PUBLISHED)
def test_attribute_digest_matches_published_values(
    sqs: Any, attributes: dict[str, dict[str, Any]], digest: str
) -> None:
    # GIVEN attributes whose digest is published
    url = _queue(sqs)
    # WHEN they are sent THEN DMQ returns the published digest
    assert _send(sqs, url, attributes)["MD5OfMessageAttributes"] == digest
    # AND the received message carries the same digest
    assert _received(sqs, url, ["All"])["MD5OfMessageAttributes"] == digest


def test_all_types_round_trip_with_matching_digests(sqs: Any) -> None:
    # GIVEN String, Number, Binary and custom-suffixed attributes
    url = _queue(sqs)
    # WHEN they are sent and received with All
    sent = _send(sqs, url, ATTRIBUTES)
    message = _received(sqs, url, ["All"])
    # THEN each value and type comes back as sent, and both digests match an independent one
    assert message["MessageAttributes"] == ATTRIBUTES
    assert sent["MD5OfMessageAttributes"] == expected_md5(ATTRIBUTES)
    assert message["MD5OfMessageAttributes"] == expected_md5(ATTRIBUTES)


def test_published_attributes_together_digest_in_name_order(sqs: Any) -> None:
    # GIVEN the three published attributes sent together
    url = _queue(sqs)
    together = {name: v for attributes, _ in PUBLISHED for name, v in attributes.items()}
    # THEN the digest is the published one for the set
    assert _send(sqs, url, together)["MD5OfMessageAttributes"] == (
        "c932db14a896c663f83c260297d594ff"
    )


def test_system_attribute_digest_is_returned_on_send(sqs: Any) -> None:
    # GIVEN a message sent with an AWSTraceHeader
    url = _queue(sqs)
    trace = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc;Sampled=1"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes=trace)
    # THEN MD5OfMessageSystemAttributes is its digest and no user attribute digest is given
    assert sent["MD5OfMessageSystemAttributes"] == expected_md5(trace)
    assert "MD5OfMessageAttributes" not in sent


# -- MessageAttributeNames selection -------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["All"], {"foo.a", "foo.b", "foobar", "other"}),
        ([".*"], {"foo.a", "foo.b", "foobar", "other"}),
        (["other"], {"other"}),
        # a prefix before ".*", as SQS reads it ("Hel.*" selects "Hello" and "Help.Me")
        (["foo.*"], {"foo.a", "foo.b", "foobar"}),
        (["*"], {"foo.a", "foo.b", "foobar", "other"}),
        (["foo.a", "other"], {"foo.a", "other"}),
        (["missing"], set()),
    ],
)
def test_message_attribute_names_select_what_comes_back(
    sqs: Any, names: list[str], expected: set[str]
) -> None:
    # GIVEN a message with four attributes
    url = _queue(sqs)
    attributes = {n: {"DataType": "String", "StringValue": n}
                  for n in ("foo.a", "foo.b", "foobar", "other")}
    _send(sqs, url, attributes)
    # WHEN it is received naming some of them
    message = _received(sqs, url, names)
    # THEN exactly the selected ones come back, with the digest of what came back
    got = message.get("MessageAttributes", {})
    assert set(got) == expected
    if expected:
        assert message["MD5OfMessageAttributes"] == expected_md5(got)
    else:
        assert "MD5OfMessageAttributes" not in message


def test_no_message_attribute_names_returns_no_attributes(sqs: Any) -> None:
    # GIVEN a message with attributes
    url = _queue(sqs)
    _send(sqs, url, {"a": {"DataType": "String", "StringValue": "1"}})
    # WHEN it is received without MessageAttributeNames THEN none come back
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    assert "MessageAttributes" not in message
    assert "MD5OfMessageAttributes" not in message


# -- validation ----------------------------------------------------------------------------------


def test_ten_attributes_are_accepted_and_eleven_rejected(sqs: Any) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    ten = {f"a{i}": {"DataType": "Number", "StringValue": str(i)} for i in range(10)}
    # WHEN ten attributes are sent THEN they are accepted
    assert _send(sqs, url, ten)["MD5OfMessageAttributes"] == expected_md5(ten)
    # WHEN eleven are sent THEN InvalidParameterValue
    eleven = {**ten, "a10": {"DataType": "Number", "StringValue": "10"}}
    assert _error(sqs, url, eleven) == (
        "InvalidParameterValue",
        "Number of message attributes [11] exceeds the allowed maximum [10].")


RESERVED = (
    "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings "
    "are reserved for internal use. Additionally, they cannot start or end with '.'."
)
CHARACTERS = (
    "Message (user) attributes name can only contain upper and lower score characters, digits, "
    "periods, hyphens and underscores. "
)


def _error(sqs: Any, url: str, attributes: dict[str, dict[str, Any]]) -> tuple[str, str]:
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        _send(sqs, url, attributes)
    return caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("name", "message"),
    [("AWS.reserved", RESERVED), ("aws.lower", RESERVED), ("Amazon.reserved", RESERVED),
     ("AMAZON.upper", RESERVED), (".lead", RESERVED), ("trail.", RESERVED),
     ("a..b", CHARACTERS), ("with space", CHARACTERS), ("slash/name", CHARACTERS),
     ("newline\n", CHARACTERS),
     ("", "The request must contain non-empty message (user) attribute names."),
     ("x" * 257, "Message (user) attribute names must be shorter than 256 Bytes")],
)
def test_invalid_attribute_names_are_rejected(sqs: Any, name: str, message: str) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN an attribute with a forbidden name is sent THEN InvalidParameterValue, worded as
    # SQS words it
    attributes = {name: {"DataType": "String", "StringValue": "v"}}
    assert _error(sqs, url, attributes) == ("InvalidParameterValue", message)


@pytest.mark.parametrize("name", ["a", "Under_score-Hyphen.dot", "AWSish", "x" * 256])
def test_valid_attribute_names_are_accepted(sqs: Any, name: str) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN an attribute with an allowed name is sent and received THEN it comes back
    _send(sqs, url, {name: {"DataType": "String", "StringValue": "v"}})
    assert set(_received(sqs, url, ["All"])["MessageAttributes"]) == {name}


TYPES = ("The type of message (user) attribute 'attr' is invalid. You must use only the "
         "following supported type prefixes: Binary, Number, String.")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"DataType": "Text", "StringValue": "v"}, TYPES),
        ({"DataType": "Stringy", "StringValue": "v"}, TYPES),
        ({"DataType": "String", "StringValue": ""},
         "Message (user) attribute 'attr' must contain a non-empty value of type 'String'."),
        ({"DataType": "Number", "StringValue": "twelve"},
         "Can't cast the value of message (user) attribute 'attr' to a number."),
        ({"DataType": "Number", "StringValue": "1e200"},
         "Value of message (user) attribute 'attr' is out of range: numbers hold up to 38 "
         "significant digits, from -10^128 to 10^126."),
        ({"DataType": "Binary", "BinaryValue": b""},
         "Message (user) attribute 'attr' must contain a non-empty value of type 'Binary'."),
    ],
)
def test_invalid_attribute_types_and_values_are_rejected(
    sqs: Any, value: dict[str, Any], message: str,
) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN an attribute with a bad type or value is sent THEN InvalidParameterValue
    assert _error(sqs, url, {"attr": value}) == ("InvalidParameterValue", message)


@pytest.mark.parametrize(("body", "named"), [
    ("nul\x00", "0"), ("bell\x07", "7"), ("\ufffe", "FFFE"), ("\uffff", "FFFF"),
    ("lone\ud800", "D800")])
def test_invalid_body_characters_are_invalid_message_contents(
    sqs: Any, body: str, named: str,
) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a body holds a character outside SQS's allowed set THEN InvalidMessageContents,
    # naming the character as SQS does
    with pytest.raises(sqs.exceptions.InvalidMessageContents) as caught:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    assert caught.value.response["Error"]["Message"] == (
        f"Invalid binary character '#x{named}' was found in the message body, the set of "
        "allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | "
        "[#x10000-#x10FFFF].")
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_allowed_edge_characters_are_accepted(sqs: Any) -> None:
    # GIVEN a body with tab, newline, carriage return and the edges of the allowed ranges
    url = _queue(sqs)
    body = "\t\n\r \ud7ff\ue000\ufffd\U00010000\U0010ffff"
    # WHEN it is sent and received THEN it comes back unchanged
    sqs.send_message(QueueUrl=url, MessageBody=body)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    assert message["Body"] == body
