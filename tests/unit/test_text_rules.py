"""GIVEN text SQS cannot hold (lone surrogates, control characters) WHEN a rule or the usage
meter sees it THEN the rule refuses it with SQS's error and the meter measures it."""

from __future__ import annotations

import pytest

from chalicelib.domain.messages import AttributeValue
from chalicelib.service import message_rules
from chalicelib.service.exceptions import InvalidParameterValueError
from chalicelib.service.tags import check_tag_keys, check_tags
from chalicelib.service.text import has_invalid_characters, printable, utf8_length
from chalicelib.usage.metering import payload_bytes, queue_of

LONE = "\ud800"


@pytest.mark.parametrize("text", [LONE, "a\udfffb", "\x00", "\x1f", "\ufffe"])
def test_characters_outside_the_allowed_set_are_invalid(text: str) -> None:
    assert has_invalid_characters(text)
    assert "\\u" in printable(text) or "\\x" in printable(text)


@pytest.mark.parametrize("text", ["", "plain", "\t\n\r", "\ud7ff\ue000\ufffd", "\U0010ffff"])
def test_characters_of_the_allowed_set_are_valid(text: str) -> None:
    assert not has_invalid_characters(text)


def test_a_lone_surrogate_measures_three_bytes() -> None:
    assert utf8_length("a" + LONE) == 4


@pytest.mark.parametrize("tags", [{"k": LONE}, {LONE: "v"}, {"k": "a\x00"}])
def test_tags_with_invalid_characters_are_invalid_parameter_value(tags: dict[str, str]) -> None:
    with pytest.raises(InvalidParameterValueError):
        check_tags(tags, "q")


def test_untag_keys_with_invalid_characters_are_invalid_parameter_value() -> None:
    with pytest.raises(InvalidParameterValueError):
        check_tag_keys(["k" + LONE])


def test_a_surrogate_in_an_attribute_value_is_invalid_parameter_value() -> None:
    with pytest.raises(InvalidParameterValueError):
        message_rules.check_attribute("a", AttributeValue("String", string_value=LONE))


def test_a_surrogate_in_an_attribute_type_is_invalid_parameter_value() -> None:
    with pytest.raises(InvalidParameterValueError):
        message_rules.check_attribute("a", AttributeValue("String." + LONE, string_value="v"))


def test_sizes_and_usage_bytes_measure_text_the_rules_refuse() -> None:
    attributes = {"a": AttributeValue("String", string_value=LONE)}
    assert message_rules.message_size(LONE, attributes) == 3 + 1 + 6 + 3
    sent = {"MessageBody": LONE, "MessageAttributes": {
        "a" + LONE: {"DataType": "String" + LONE, "StringValue": LONE}}}
    assert payload_bytes("SendMessage", sent, None) == 3 + 4 + 9 + 3
    batch = {"Entries": [sent, "junk", {"MessageBody": 5}]}
    assert payload_bytes("SendMessageBatch", batch, None) == 19


def test_a_queue_url_that_is_no_url_names_no_queue_for_the_usage_records() -> None:
    assert queue_of({"QueueUrl": "http://[::1/000000000000/q"}) == ""
