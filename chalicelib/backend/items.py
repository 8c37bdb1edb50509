"""Conversion between Message and the DynamoDB item of the messages table."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import AttributeValue, Candidate, Counts, Message

Item = dict[str, Any]

VISIBLE_INDEX = "visible-index"
# The visibility index projects what a receive returns (infra/dmq.template.json), except
# the content of a wide item: one whose index entry would cost more than one write unit
# (1 KB) keeps its body and attributes as `lbody` and `lattrs`, outside the projection,
# and is marked `wide`; its claims are read back. A claim adds about CLAIM_GROWTH bytes.
WRITE_UNIT_BYTES = 1024
CLAIM_GROWTH = 96


def partition_key(queue_id: str, shard: int) -> str:
    """`<queue id>#<shard>`, the partition key of a queue shard."""
    return f"{queue_id}#{shard}"


def key(queue_id: str, shard: int, message_id: str) -> Item:
    """The primary key of a message item."""
    return {"pk": {"S": partition_key(queue_id, shard)}, "sk": {"S": message_id}}


def encode_attributes(values: dict[str, AttributeValue]) -> str:
    encoded = {
        name: [v.data_type, "b", base64.b64encode(v.binary_value or b"").decode()]
        if v.is_binary
        else [v.data_type, "s", v.string_value or ""]
        for name, v in values.items()
    }
    return json.dumps(encoded, separators=(",", ":"), ensure_ascii=False)


def decode_attributes(raw: str | None) -> dict[str, AttributeValue]:
    if not raw:
        return {}
    result: dict[str, AttributeValue] = {}
    for name, (data_type, kind, value) in json.loads(raw).items():
        if kind == "b":
            result[name] = AttributeValue(data_type, binary_value=base64.b64decode(value))
        else:
            result[name] = AttributeValue(data_type, string_value=value)
    return result


def encoded_size(message: Message) -> int:
    """Bytes (UTF-8, as DynamoDB counts them) the body and attributes take in an item."""
    attributes = encode_attributes(message.attributes)
    return len(message.body.encode("utf-8")) + len(attributes.encode("utf-8"))


def to_item(queue_id: str, shard: int, message: Message) -> Item:
    """The DynamoDB item for a message; a body stored in S3 leaves only its key."""
    item: Item = {
        **key(queue_id, shard, message.message_id),
        "visible_at": {"N": str(message.visible_at)},
        "sent_ms": {"N": str(message.sent_ms)},
        "expires_ms": {"N": str(message.expires_ms)},
        "expires_at": {"N": str(message.expires_ms // 1000 + 1)},
        "body_md5": {"S": message.body_md5},
        "sender": {"S": message.sender_id},
        "rc": {"N": str(message.receive_count)},
    }
    if message.body_key:
        item["body_key"] = {"S": message.body_key}
        item["body_size"] = {"N": str(len(message.body.encode("utf-8")))}
    else:
        item["body"] = {"S": message.body}
    inline_attributes = message.attributes and not message.attributes_key
    optional = {
        "attrs": encode_attributes(message.attributes) if inline_attributes else None,
        "attrs_key": message.attributes_key,
        "attrs_md5": message.attributes_md5,
        "sys": encode_attributes(message.system_attributes)
        if message.system_attributes
        else None,
        "sys_md5": message.system_attributes_md5,
        "claim": message.claim_token or None,
        "dlq_source": message.dead_letter_source_arn,
        "grp": message.group_id,
        "env": message.envelope,
    }
    item.update({k: {"S": v} for k, v in optional.items() if v})
    if message.first_receive_ms:
        item["frc"] = {"N": str(message.first_receive_ms)}
    if item_size(item) + CLAIM_GROWTH > WRITE_UNIT_BYTES:
        _widen(item)
    return item


def _widen(item: Item) -> None:
    """Keep the content of a wide item outside the index's projection."""
    for name, wide in (("body", "lbody"), ("attrs", "lattrs")):
        if name in item:
            item[wide] = item.pop(name)
    item["wide"] = {"N": "1"}


def item_size(item: Item) -> int:
    """An item's size as DynamoDB bills it: attribute names plus values (a number is
    counted as its digits, more than DynamoDB counts, so the estimate errs high)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode("utf-8"))
        for kind, data in value.items():
            size += len(data.encode("utf-8")) if kind in ("S", "N") else len(data) \
                if kind == "B" else 1
    return size


def is_whole(item: Item) -> bool:
    """Whether an index entry holds the whole message (it was projected, and is not
    wide): a table made by an earlier version projects only `expires_ms` and `rc`."""
    return "sent_ms" in item and "wide" not in item


def _s(item: Item, name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def _n(item: Item, name: str, default: int = 0) -> int:
    value = item.get(name)
    return default if value is None else int(value["N"])


def from_item(
    item: Item, body: str | None = None, attributes: dict[str, AttributeValue] | None = None
) -> Message:
    """The Message in an item; `body` and `attributes` supply those that live in S3."""
    return Message(
        message_id=str(item["sk"]["S"]),
        body=body if body is not None else (_s(item, "body") or _s(item, "lbody") or ""),
        body_md5=_s(item, "body_md5") or "",
        sent_ms=_n(item, "sent_ms"),
        visible_at=_n(item, "visible_at"),
        expires_ms=_n(item, "expires_ms"),
        sender_id=_s(item, "sender") or "",
        attributes=attributes if attributes is not None
        else decode_attributes(_s(item, "attrs") or _s(item, "lattrs")),
        attributes_md5=_s(item, "attrs_md5"),
        system_attributes=decode_attributes(_s(item, "sys")),
        system_attributes_md5=_s(item, "sys_md5"),
        receive_count=_n(item, "rc"),
        first_receive_ms=_n(item, "frc"),
        claim_token=_s(item, "claim") or "",
        body_key=_s(item, "body_key"),
        attributes_key=_s(item, "attrs_key"),
        dead_letter_source_arn=_s(item, "dlq_source"),
        group_id=_s(item, "grp"),
        envelope=_s(item, "env"),
    )


@dataclass(frozen=True)
class ShardChange:
    """What a messages-table stream record says of a queue shard: which, and when the
    message it wrote becomes visible (None: removed, or no visibility); the message's id,
    and whether the record is its insert."""

    queue_id: str
    shard: int
    visible_at: int | None
    message_id: str = ""
    inserted: bool = False


def changed_shards(records: Iterable[Mapping[str, Any]]) -> Iterator[ShardChange]:
    """The queue shards that stream records (Lambda's shape) changed; other items (a
    FIFO queue's bookkeeping, a queues-table record) are passed over."""
    for record in records:
        data = record.get("dynamodb") or {}
        pk = ((data.get("Keys") or {}).get("pk") or {}).get("S")
        queue_id, _, shard = str(pk or "").rpartition("#")
        if not queue_id or not shard.isdigit():
            continue
        visible = ((data.get("NewImage") or {}).get("visible_at") or {}).get("N")
        message_id = ((data.get("Keys") or {}).get("sk") or {}).get("S")
        yield ShardChange(queue_id, int(shard), _whole(visible), str(message_id or ""),
                          record.get("eventName") == "INSERT")


def _whole(number: object) -> int | None:
    """A DynamoDB number as an int (None when absent or not a number)."""
    try:
        return int(Decimal(str(number))) if number is not None else None
    except (ArithmeticError, ValueError):
        return None


def shard_of(item: Item) -> int:
    """The shard number in an item's partition key."""
    return int(str(item["pk"]["S"]).rsplit("#", 1)[1])


def sent_by(item: Item, before_ms: int | None) -> bool:
    """Whether an item was sent by `before_ms` (None: any time): what a purge removes."""
    return before_ms is None or _n(item, "sent_ms") <= before_ms


# What `weight_at` reads of a standard message item.
WEIGHT_PROJECTION = "visible_at, rc"


def weight_at(item: Item, now_ms: int) -> Counts:
    """The count a standard message item weighs in at `now_ms` (visible, in flight once
    received, delayed before that), as the shard counts weigh it."""
    visible_at = _n(item, "visible_at")
    if visible_at <= now_ms or visible_at >= LANE_BASE:  # a noisy lane waits visible
        return Counts(visible=1)
    return Counts(in_flight=1) if _n(item, "rc") > 0 else Counts(delayed=1)


def to_candidate(item: Item) -> Candidate:
    """A candidate from an index entry: the keys and the projected fields, and the whole
    message when the entry holds it (`is_whole`)."""
    return Candidate(
        shard=shard_of(item),
        message_id=str(item["sk"]["S"]),
        visible_at=_n(item, "visible_at"),
        expires_ms=_n(item, "expires_ms"),
        receive_count=_n(item, "rc"),
        message=from_item(item) if is_whole(item) else None,
        sent_ms=_n(item, "sent_ms"),
    )
