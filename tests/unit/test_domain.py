"""Pure domain rules: ids, candidates, receipts, queue URLs, attributes and the template."""

from __future__ import annotations

import uuid

import pytest

from chalicelib.domain.messages import (
    Candidate,
    CandidateAction,
    MessageRef,
    call_message_id,
    new_message_id,
)
from chalicelib.frontend.context import region_from_headers
from chalicelib.frontend.queue_urls import parse_queue_url
from chalicelib.service.exceptions import (
    InvalidAttributeNameError,
    InvalidAttributeValueError,
    QueueDoesNotExistError,
    ReceiptHandleIsInvalidError,
)
from chalicelib.service.queue_kinds import FIFO, STANDARD
from chalicelib.service.receipts import ReceiptCodec
from infra import provision


def test_message_ids_sort_in_send_order() -> None:
    ids = [new_message_id(ms) for ms in (1_000, 1_001, 2_000, 10_000_000)]
    assert ids == sorted(ids)
    assert len(set(new_message_id(5) for _ in range(100))) == 100


def test_derived_message_ids_are_uuidv8_and_name_their_parts_only() -> None:
    call = ("000000000000", "000000000000/q", "SendMessage", "inv-1")
    derived = call_message_id(call, 0, ("", "digest"))
    assert uuid.UUID(derived).version == 8
    assert str(uuid.UUID(derived)) == derived
    assert call_message_id(call, 0, ("", "digest")) == derived
    # another part, or the same text cut elsewhere, is another id
    assert call_message_id(call, 0, ("", "other")) != derived
    assert call_message_id((*call[:-1], "inv-2"), 0, ("", "digest")) != derived
    assert call_message_id(("a",), 0, ("bc",)) != call_message_id(("ab",), 0, ("c",))


def test_the_derived_ids_of_one_call_sort_in_its_order() -> None:
    call = ("000000000000", "000000000000/q", "SendMessageBatch", "inv-1")
    ids = [call_message_id(call, position, (f"e{position}", f"d{9 - position}"))
           for position in range(10)]
    assert ids == sorted(ids) and len(set(ids)) == 10


@pytest.mark.parametrize(
    ("expires", "count", "limit", "action"),
    [
        (100, 0, None, CandidateAction.EXPIRE),
        (101, 5, None, CandidateAction.CLAIM),
        (101, 2, 3, CandidateAction.CLAIM),
        (101, 3, 3, CandidateAction.DEAD_LETTER),
    ],
)
def test_candidate_action(expires: int, count: int, limit: int | None, action: str) -> None:
    assert Candidate(0, "m", 10, expires, count).action(100, limit) is action


def test_receipt_handle_round_trips_and_rejects_tampering() -> None:
    codec = ReceiptCodec("secret")
    ref = MessageRef("acct/q", 3, "id-1", "tok")
    handle = codec.encode(ref)
    assert codec.decode(handle, "acct/q") == ref
    with pytest.raises(ReceiptHandleIsInvalidError):
        codec.decode(handle, "acct/other")
    with pytest.raises(ReceiptHandleIsInvalidError):
        ReceiptCodec("other-key").decode(handle, "acct/q")
    for garbled in ("", "not a handle", handle[:-2] + "AA", "%%%"):
        with pytest.raises(ReceiptHandleIsInvalidError):
            codec.decode(garbled, "acct/q")


def test_receipt_handles_never_start_with_a_dash() -> None:
    # The AWS CLI reads `--receipt-handle -x...` as an option; SQS's handles never start
    # with "-", so DMQ's must not either.
    codec = ReceiptCodec("secret")
    handles = [codec.encode(MessageRef("acct/q", 0, f"id-{i}", f"t{i}")) for i in range(500)]
    assert {h[0] for h in handles} == {"A"}
    assert all(codec.decode(h, "acct/q").message_id == f"id-{i}" for i, h in enumerate(handles))


def test_queue_url_and_region_parsing() -> None:
    assert parse_queue_url("http://h:9324/000000000000/q1").parts("x") == ("000000000000", "q1")
    with pytest.raises(QueueDoesNotExistError):
        parse_queue_url("http://h:9324/q1")
    auth = "AWS4-HMAC-SHA256 Credential=AK/20261122/eu-west-1/sqs/aws4_request, Signature=x"
    assert region_from_headers({"authorization": auth}, "us-east-1") == "eu-west-1"
    assert region_from_headers({}, "us-east-1") == "us-east-1"


def test_queue_attribute_validation() -> None:
    assert STANDARD.validate_settable({"VisibilityTimeout": "43200"}) == {
        "VisibilityTimeout": "43200"
    }
    with pytest.raises(InvalidAttributeValueError):
        STANDARD.validate_settable({"VisibilityTimeout": "43201"})
    with pytest.raises(InvalidAttributeNameError):
        STANDARD.validate_settable({"QueueArn": "x"})
    with pytest.raises(InvalidAttributeNameError):
        STANDARD.validate_settable({"FifoQueue": "true"})
    assert FIFO.validate_settable({"FifoQueue": "TRUE"}) == {"FifoQueue": "true"}
    assert STANDARD.with_defaults({})["VisibilityTimeout"] == "30"


def test_template_defines_the_visibility_index_stream_and_ttl() -> None:
    resources = provision.resources()
    request, ttl = provision.table_request(resources["MessagesTable"]["Properties"])
    assert request["TableName"] == "dmq-messages"
    assert request["LocalSecondaryIndexes"][0]["IndexName"] == "visible-index"
    assert request["StreamSpecification"] == {
        "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"
    }
    assert ttl == {"AttributeName": "expires_at", "Enabled": True}
    assert resources["BodiesBucket"]["Type"] == "AWS::S3::Bucket"


def test_message_ids_sort_in_send_order_within_one_millisecond() -> None:
    ids = [new_message_id(7_000) for _ in range(50)]
    assert ids == sorted(ids)
