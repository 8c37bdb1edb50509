"""Message domain types: what the store keeps and what a claim hands back."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum

from chalicelib.domain.unique_ids import random_bytes


@dataclass(frozen=True)
class AttributeValue:
    """One message attribute: a data type and a string or binary value."""

    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None

    @property
    def is_binary(self) -> bool:
        """Binary attributes carry bytes; String and Number carry text."""
        return self.data_type.split(".", 1)[0] == "Binary"


@dataclass(frozen=True)
class Message:
    """A message with its visibility state. `visible_at` and `expires_ms` are epoch ms."""

    message_id: str
    body: str
    body_md5: str
    sent_ms: int
    visible_at: int
    expires_ms: int
    sender_id: str = ""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    attributes_md5: str | None = None
    system_attributes: dict[str, AttributeValue] = field(default_factory=dict)
    system_attributes_md5: str | None = None
    receive_count: int = 0
    first_receive_ms: int = 0
    claim_token: str = ""
    body_key: str | None = None
    attributes_key: str | None = None
    dead_letter_source_arn: str | None = None
    # MessageGroupId: a FIFO queue's group, or the tenant of a standard queue's message
    # (fair queues).
    group_id: str | None = None
    # FIFO queues only: MessageDeduplicationId and SequenceNumber.
    dedup_id: str | None = None
    sequence_number: str | None = None
    # Encryption at rest: the envelope of a sealed message (its wrapped data key), whose
    # body and attribute values are then ciphertext; None for a message in clear text.
    envelope: str | None = None

    def is_visible(self, now_ms: int) -> bool:
        """True when a receive may claim it."""
        return self.visible_at <= now_ms and not self.is_expired(now_ms)

    def is_delayed(self, now_ms: int) -> bool:
        """True while a send delay hides a never-received message."""
        return self.receive_count == 0 and self.visible_at > now_ms

    def is_expired(self, now_ms: int) -> bool:
        """True once the retention period has passed: reads treat it as gone."""
        return self.expires_ms <= now_ms

    def with_changes(self, **changes: object) -> Message:
        """A copy with some fields replaced (a Message has no checks at construction, so
        the copy is made without `dataclasses.replace`'s call of `__init__`: a request
        makes several)."""
        unknown = changes.keys() - _MESSAGE_FIELDS
        if unknown:
            raise TypeError(f"Message has no field {sorted(unknown)[0]!r}")
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied.__dict__.update(changes)
        return copied

    def system_values(self) -> dict[str, str]:
        """Every system attribute the message has, by its SQS name, as text: what a
        receive returns for `All`, a push event carries, and the console shows."""
        values = {"SenderId": self.sender_id, "SentTimestamp": str(self.sent_ms),
                  "ApproximateReceiveCount": str(self.receive_count),
                  "ApproximateFirstReceiveTimestamp": str(self.first_receive_ms)}
        if self.group_id is not None:
            values["MessageGroupId"] = self.group_id
        if self.dedup_id:
            values["MessageDeduplicationId"] = self.dedup_id
        if self.sequence_number:
            values["SequenceNumber"] = self.sequence_number
        trace = self.system_attributes.get("AWSTraceHeader")
        if trace is not None and trace.string_value:
            values["AWSTraceHeader"] = trace.string_value
        if self.dead_letter_source_arn:
            values["DeadLetterQueueSourceArn"] = self.dead_letter_source_arn
        return values

    def moved_to_dead_letters(
        self, now_ms: int, retention_ms: int, source_arn: str | None = None
    ) -> Message:
        """The message as a dead-letter queue receives it, whichever path moved it.

        As in SQS, it keeps its id, body, attributes and send time, and the DLQ's
        retention counts from that send (standard queues). It is visible at once, unclaimed,
        and its receives go on from the source queue's, as SQS counts them: its receive
        count (a message moved after one receive past maxReceiveCount 1 is received from
        the DLQ with ApproximateReceiveCount 2) and its first-receive time are kept.
        `source_arn` is the queue it came from (the DeadLetterQueueSourceArn system
        attribute).
        """
        return self.with_changes(
            visible_at=now_ms, expires_ms=self.sent_ms + retention_ms, claim_token="",
            dead_letter_source_arn=source_arn or self.dead_letter_source_arn,
        )


_MESSAGE_FIELDS = frozenset(f.name for f in fields(Message))


class CandidateAction(StrEnum):
    """What a receive does with a visible candidate."""

    CLAIM = "claim"
    EXPIRE = "expire"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class Candidate:
    """A visible message as the visibility index shows it (keys and a few fields)."""

    shard: int
    message_id: str
    visible_at: int
    expires_ms: int
    receive_count: int
    # The whole message as the index projected it (None when the index projects only
    # those fields): a claim then needs no second read for it.
    message: Message | None = field(default=None, compare=False, repr=False)
    # When it was sent (0: the index does not project it, as in a table made by an
    # earlier version): a receive passes over messages a purge left behind.
    sent_ms: int = field(default=0, compare=False)

    def purged_by(self, purged_ms: int) -> bool:
        """Sent by the time of the queue's last purge, as far as the index shows."""
        return 0 < self.sent_ms <= purged_ms

    def action(self, now_ms: int, max_receive_count: int | None) -> CandidateAction:
        """Expired messages are dropped; over-received ones go to the dead-letter queue."""
        if self.expires_ms <= now_ms:
            return CandidateAction.EXPIRE
        if max_receive_count is not None and self.receive_count >= max_receive_count:
            return CandidateAction.DEAD_LETTER
        return CandidateAction.CLAIM


@dataclass(frozen=True)
class MessageRef:
    """Where a claimed message lives and which claim the caller holds."""

    queue_id: str
    shard: int
    message_id: str
    claim_token: str


class VisibilityOutcome(StrEnum):
    """Result of a visibility change."""

    CHANGED = "changed"
    NOT_FOUND = "not_found"
    NOT_IN_FLIGHT = "not_in_flight"


@dataclass(frozen=True)
class Counts:
    """Approximate message counts of a queue."""

    visible: int = 0
    in_flight: int = 0
    delayed: int = 0

    @property
    def total(self) -> int:
        """Every message counted, whatever its state."""
        return self.visible + self.in_flight + self.delayed

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.visible + other.visible,
            self.in_flight + other.in_flight,
            self.delayed + other.delayed,
        )


_ID_LOCK = threading.Lock()
_last_id: list[int] = [0, 0]  # the last id's millisecond and its 12-bit sequence


def new_message_id(now_ms: int) -> str:
    """A UUIDv7: 48 bits of send time, then a 12-bit sequence within the millisecond.

    Ids from one process sort in send order even within a millisecond. Ids derived from a
    request (`call_message_id`) sort in the request's order only: nothing may take the
    order of message ids (the sort keys) for the order of sends; `sent_ms` is that order.
    """
    with _ID_LOCK:
        millis, sequence = _last_id
        if now_ms > millis or sequence >= 0xFFF:
            millis, sequence = max(now_ms, millis + (sequence >= 0xFFF)), 0
        else:
            sequence += 1
        _last_id[:] = [millis, sequence]
    value = bytearray(millis.to_bytes(6, "big") + sequence.to_bytes(2, "big") + random_bytes(8))
    value[6] = (value[6] & 0x0F) | 0x70  # version 7
    value[8] = (value[8] & 0x3F) | 0x80  # RFC 4122 variant
    return str(uuid.UUID(bytes=bytes(value)))


def call_message_id(call: Sequence[str], position: int, entry: Sequence[str]) -> str:
    """A UUIDv8 (RFC 9562) for the message at `position` of one call: 48 bits of the
    SHA-256 of `call`, the position in 12 bits, then 62 bits of the SHA-256 of the call and
    `entry`. The same call and entry give the same id, and the ids of one call sort in the
    call's order, as a process's UUIDv7s do: a batch's messages, sent in one millisecond,
    come back in the batch's order (the index orders equal times by message id)."""
    whole = hashlib.sha256(json.dumps([list(call), list(entry)],
                                      separators=(",", ":")).encode("utf-8")).digest()
    prefix = hashlib.sha256(json.dumps(list(call), separators=(",", ":")).encode(
        "utf-8")).digest()
    value = bytearray(prefix[:6] + (position & 0xFFF).to_bytes(2, "big") + whole[:8])
    value[6] = (value[6] & 0x0F) | 0x80  # version 8
    value[8] = (value[8] & 0x3F) | 0x80  # RFC 4122 variant
    return str(uuid.UUID(bytes=bytes(value)))


def new_claim_token() -> str:
    """A fresh random claim token."""
    return os.urandom(9).hex()
