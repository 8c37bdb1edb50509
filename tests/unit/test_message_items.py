"""GIVEN messages of every size WHEN they become items of the messages table THEN an item
whose index entry would cost more than one write unit keeps its content outside the
index's projection, and every item comes back as the message it was."""

from __future__ import annotations

import hashlib
import json

import pytest

from chalicelib.backend import items
from chalicelib.backend.archive import redact_image
from chalicelib.domain.messages import AttributeValue, Message
from infra import provision

QUEUE = "000000000000/" + "q" * 80  # the longest queue names make the largest keys


def _message(body: str, **changes: object) -> Message:
    message = Message("0" * 36, body, "d" * 32, sent_ms=1_700_000_000_000,
                      visible_at=1_700_000_000_000, expires_ms=1_700_345_600_000,
                      sender_id="AIDA" + "X" * 17)
    return message.with_changes(**changes)


def _projected() -> set[str]:
    table = provision.resources()["MessagesTable"]["Properties"]
    (index,) = table["LocalSecondaryIndexes"]
    return {"pk", "sk", "visible_at", *index["Projection"]["NonKeyAttributes"]}


def test_item_size_counts_names_and_values_as_dynamodb_bills_them() -> None:
    # 2 + 3 for pk "abc"; 1 + 4 digits for n; 1 + 1 for a bool; 1 + 3 for binary
    assert items.item_size({"pk": {"S": "abc"}}) == 5
    assert items.item_size({"n": {"N": "1234"}}) == 5
    assert items.item_size({"b": {"BOOL": True}}) == 2
    assert items.item_size({"x": {"B": b"abc"}}) == 4
    assert items.item_size({"s": {"S": "é"}}) == 3  # UTF-8 bytes


@pytest.mark.parametrize("size", [1, 300, 600, 700, 800, 2048, 250_000])
def test_an_entry_of_the_index_never_costs_more_than_one_write_unit(size: int) -> None:
    # GIVEN a message of `size` bytes, already received (a claim adds its fields)
    message = _message("b" * size, claim_token="t" * 36, first_receive_ms=1_700_000_000_001,
                       receive_count=1)
    item = items.to_item(QUEUE, 3, message)
    # WHEN the index projects its attributes
    entry = {k: v for k, v in item.items() if k in _projected()}
    # THEN the entry is within one write unit, with room for a claim's growth
    assert items.item_size(entry) + items.CLAIM_GROWTH <= items.WRITE_UNIT_BYTES or (
        "wide" in item and items.item_size(entry) <= items.WRITE_UNIT_BYTES)
    # AND an item that fits is whole in the index, one that does not is marked wide
    fits = items.item_size(item) + items.CLAIM_GROWTH <= items.WRITE_UNIT_BYTES
    assert items.is_whole(entry) is fits
    assert ("body" in item, "lbody" in item) == (fits, not fits)
    # AND either way the item is the message it was made of
    assert items.from_item(item) == message


def test_wide_attributes_leave_the_projection_with_the_body() -> None:
    attributes = {"a": AttributeValue("String", string_value="v" * 900)}
    message = _message("small", attributes=attributes, attributes_md5="m" * 32)
    item = items.to_item(QUEUE, 0, message)
    assert "wide" in item and "attrs" not in item and "lbody" in item
    assert json.loads(item["lattrs"]["S"])["a"][2] == "v" * 900
    assert items.from_item(item).attributes == attributes


def test_a_small_message_is_whole_in_its_index_entry() -> None:
    # GIVEN a compact message with every field an item keeps set (a field added to the
    # item but not to the index's projection fails here)
    message = _message(
        "hello", attributes={"a": AttributeValue("String", string_value="v")},
        attributes_md5="a" * 32, system_attributes={
            "AWSTraceHeader": AttributeValue("String", string_value="Root=1-5759e988")},
        system_attributes_md5="s" * 32, receive_count=2, first_receive_ms=1_700_000_000_005,
        claim_token="t" * 8, dead_letter_source_arn="arn:aws:sqs:us-east-1:0:src",
        group_id="tenant", envelope="e" * 40)
    item = items.to_item(QUEUE, 0, message)
    entry = {k: v for k, v in item.items() if k in _projected()}
    # THEN its index entry holds it whole
    assert items.is_whole(entry)
    assert items.to_candidate(entry).message == message
    # AND every attribute of the item but its TTL (`expires_at`) is projected
    assert set(item) - _projected() == {"expires_at"}


def test_an_entry_of_an_earlier_version_is_not_whole() -> None:
    entry = {"pk": {"S": QUEUE + "#0"}, "sk": {"S": "m1"}, "visible_at": {"N": "5"},
             "expires_ms": {"N": "9"}, "rc": {"N": "0"}}
    assert items.to_candidate(entry).message is None


def test_the_archive_shows_a_wide_items_content_as_any_others() -> None:
    # GIVEN a compact and a wide item WHEN the archive redacts them THEN both show the
    # digest and size of their body under the same names, and no content
    for body in ("small", "w" * 2048):
        redacted = redact_image(items.to_item(QUEUE, 0, _message(body)))
        assert redacted["body_sha256"]["S"] == hashlib.sha256(body.encode()).hexdigest()
        assert redacted["body_size"] == {"N": str(len(body))}
        assert not {"body", "lbody", "attrs", "lattrs"} & set(redacted)
