"""What the message service asks of a kind of queue, standard or FIFO: one interface, two
classes (`standard_messages.StandardMessages`, `fifo_messages.FifoMessages`), so that the
service never branches on the queue's type but to pick one."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chalicelib.domain.messages import (
    AttributeValue,
    Counts,
    Message,
    MessageRef,
    VisibilityOutcome,
)
from chalicelib.domain.queues import QueueRecord
from chalicelib.service.exceptions import SqsError
from chalicelib.service.request_dedup import SendCall

QueueByArn = Callable[[str], QueueRecord | None]
SyncReplicate = Callable[[QueueRecord, str, Sequence[tuple[int, Message]]], None]
# Makes a checked message from a request, with the id given (None: a new one).
Build = Callable[["SendRequest", str | None], Message]


@dataclass(frozen=True)
class SendRequest:
    """One message to send (a batch entry, or the single message of SendMessage)."""

    entry_id: str
    body: str | None
    delay_seconds: int | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    system_attributes: dict[str, AttributeValue] = field(default_factory=dict)
    # The X-Amzn-Trace-Id header of the request: the AWSTraceHeader of a message that
    # does not carry its own.
    trace_header: str | None = None
    message_group_id: str | None = None
    deduplication_id: str | None = None
    # The entry's place in its request (0 for SendMessage): the order of the request's
    # messages among those sent in the same millisecond.
    position: int = 0

    def digest(self) -> str:
        """A digest of the parameters the message is made of (request deduplication: the
        same entry sent again has the same one). The trace header is a header of the
        request, which an SDK's retry may change, not a parameter: it is left out."""
        text = json.dumps([self.body, self.delay_seconds, _listed(self.attributes),
                           _listed(self.system_attributes), self.message_group_id,
                           self.deduplication_id], separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _listed(attributes: Mapping[str, AttributeValue]) -> list[list[str | None]]:
    """Message attributes as plain data, in name order."""
    return [[name, value.data_type, value.string_value,
             base64.b64encode(value.binary_value).decode() if value.binary_value is not None
             else None]
            for name, value in sorted(attributes.items())]


@dataclass(frozen=True)
class EntryFailure:
    """A batch entry that failed, with the SQS error it failed with."""

    entry_id: str
    error: SqsError

    @classmethod
    def of(cls, entry_id: str, error: SqsError) -> EntryFailure:
        """The failure entry for an SQS error."""
        return cls(entry_id, error)


@dataclass(frozen=True)
class HandleEntry:
    """A receipt handle with its batch entry id and, for visibility changes, the timeout."""

    entry_id: str
    receipt_handle: str
    visibility_timeout: int = 0


@dataclass(frozen=True)
class Received:
    """A claimed message and its receipt handle."""

    message: Message
    receipt_handle: str


@dataclass
class ReceiveStats:
    """Counters that show the cost of receives (read by the benchmark)."""

    receives: int = 0
    returned: int = 0
    items_read: int = 0
    lost_claims: int = 0


@dataclass(frozen=True)
class Stored:
    """What a send stored: the messages as the client is answered (FIFO: with their
    sequence numbers, or a duplicate's original), the ids that could not be stored, and
    whether anything was written (a retried request's messages may be there already)."""

    messages: list[Message]
    unstored: frozenset[str] = frozenset()
    wrote: bool = True


class MessageKind(Protocol):
    """The operations that differ between standard and FIFO queues."""

    def check_batch(self, queue: QueueRecord,
                    entries: Sequence[tuple[str | None, str | None]]) -> None:
        """Refuse a batch of (group id, dedup id) this kind of queue cannot take."""
        ...

    def prepare(self, queue: QueueRecord, request: SendRequest, now: int,
                call: SendCall | None, build: Build) -> Message:
        """A validated message as this kind of queue stores it, made by `build` (the
        checks every message passes) from the request as this kind takes it."""
        ...

    def store(self, queue: QueueRecord, messages: list[Message],
              call: SendCall | None) -> Stored:
        """Store sealed messages."""
        ...

    def replay(self, queue: QueueRecord, attempt_id: str | None) -> list[Received] | None:
        """What a live receive attempt returned (None: none to replay)."""
        ...

    def receive_once(self, queue: QueueRecord, wanted: int, timeout: int,
                     attempt_id: str | None) -> list[Received]:
        """One pass over the queue's shards, claiming up to `wanted`."""
        ...

    def quiet_until(self, queue: QueueRecord, now: int) -> int | None:
        """Until when a long poll may sleep unless woken, after a pass found nothing (0:
        something may show now; None: unknown, the poll interval applies)."""
        ...

    def delete(self, queue: QueueRecord,
               refs: Sequence[tuple[str, str, MessageRef]]) -> list[tuple[str, SqsError]]:
        """Delete by (entry id, handle, ref); the entries that failed, with why."""
        ...

    def change_visibility(self, queue: QueueRecord, refs: Sequence[tuple[str, MessageRef]],
                          timeouts: Mapping[str, int], now: int) -> list[VisibilityOutcome]:
        """Change each message's visibility timeout; the outcomes, in order."""
        ...

    def purge(self, queue: QueueRecord) -> int:
        """Delete every message."""
        ...

    def peek(self, queue: QueueRecord, limit: int) -> list[Message]:
        """The oldest messages, sealed as stored, without claiming them."""
        ...

    def counts(self, queue: QueueRecord) -> Counts:
        """Approximate counts over every shard."""
        ...

    def shard_counts(self, queue: QueueRecord) -> dict[int, Counts]:
        """Approximate counts of each shard."""
        ...
