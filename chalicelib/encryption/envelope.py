"""Encryption at rest: envelope encryption of message bodies and attribute values.

A queue is encrypted when `KmsMasterKeyId` names a key (SSE-KMS) or, without one, when
`SqsManagedSseEnabled` is true (SSE-SQS, DMQ's own managed key; the default for new
queues). Messages are sealed here, in the service, before any store sees them, and
opened here after a read, so that every store below (DynamoDB items, large bodies in S3
or the body folder, stream records, the audit archive, table exports and replicas) only
ever holds ciphertext.

- Each queue has a data key (AES-256) made by the key-encryption key (`encryption.keys`)
  and reused for `KmsDataKeyReusePeriodSeconds` (default 300) before a new one is made.
  Data keys are cached in memory, both the one a queue seals with and those unwrapped to
  open messages, so the hot path makes no call to the key service, and no store call.
- Every field is AES-256-GCM with a random 96-bit nonce. Its additional data binds the
  queue the message was sealed for, the message id and the field (body, or the name and
  data type of an attribute): a ciphertext copied onto another message, another field or
  another queue's envelope fails to open.
- The message keeps the envelope, `1|<key-encryption key ref>|<wrapped data key>|<queue
  id>`, in the item, so any process (a replica region, a dead-letter queue, the redrive)
  can open it without asking anything of the queue that sealed it.

The MD5 digests returned to clients are taken from the plaintext at send and stored
beside the ciphertext, so MD5OfMessageBody and MD5OfMessageAttributes stay exact.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chalicelib.clock import Clock
from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.encryption.keys import NONCE_BYTES, KeyServiceError, KeyWrapper
from chalicelib.service.exceptions import KmsError

VERSION = "1"
DEFAULT_REUSE_S = 300
# Unwrapped data keys kept per process (each serves every message sealed with it).
OPEN_CACHE = 4096


@dataclass(frozen=True)
class Protection:
    """How a queue's new messages are sealed: under which key-encryption key id, and for
    how long one data key is reused."""

    key_id: str
    reuse_s: int


def reuse_period_s(queue: QueueRecord) -> int:
    """KmsDataKeyReusePeriodSeconds (default 300)."""
    raw = queue.attributes.get("KmsDataKeyReusePeriodSeconds")
    return int(raw) if raw else DEFAULT_REUSE_S


def protection_of(queue: QueueRecord, managed_key_id: str) -> Protection | None:
    """SSE-KMS with the queue's key, else SSE-SQS with DMQ's managed key, else none."""
    key_id = queue.attributes.get("KmsMasterKeyId", "")
    if key_id:
        return Protection(key_id, reuse_period_s(queue))
    if queue.attributes.get("SqsManagedSseEnabled", "false") == "true":
        return Protection(managed_key_id, reuse_period_s(queue))
    return None


def _aad(queue_id: str, message_id: str, field: str) -> bytes:
    return f"dmq-sse|{VERSION}|{queue_id}|{message_id}|{field}".encode()


def _seal(aes: AESGCM, aad: bytes, data: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + aes.encrypt(nonce, data, aad)


def _open(aes: AESGCM, aad: bytes, data: bytes) -> bytes:
    return aes.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], aad)


@dataclass(frozen=True)
class _DataKey:
    aes: AESGCM
    envelope: str
    made_ms: int


@dataclass(frozen=True)
class Envelope:
    """A sealed message's envelope: the wrapped data key, what wrapped it, and the queue
    it was sealed for."""

    ref: str
    wrapped: bytes
    queue_id: str

    def text(self) -> str:
        """The form kept in the item."""
        wrapped = base64.b64encode(self.wrapped).decode()
        return f"{VERSION}|{self.ref}|{wrapped}|{self.queue_id}"

    @classmethod
    def parse(cls, text: str) -> Envelope:
        """An envelope from its stored form; KmsInvalidState when it is not one."""
        parts = text.split("|")
        if len(parts) != 4 or parts[0] != VERSION:
            raise KmsError("KmsInvalidState", "The message's data key is unreadable.")
        try:
            wrapped = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KmsError("KmsInvalidState", "The message's data key is unreadable.") from exc
        return cls(parts[1], wrapped, parts[3])


class MessageCipher:
    """Seals messages for their queue and opens them again, with cached data keys."""

    def __init__(self, keys: KeyWrapper, managed_key_id: str, clock: Clock,
                 open_cache: int = OPEN_CACHE) -> None:
        self._keys = keys
        self._managed_key_id = managed_key_id
        self._clock = clock
        self._open_cache = open_cache
        self._lock = threading.Lock()
        self._sealing: dict[tuple[str, str], _DataKey] = {}
        self._opening: OrderedDict[str, tuple[AESGCM, int]] = OrderedDict()
        self.generated = 0  # data keys made (the key service's GenerateDataKey calls)
        self.unwrapped = 0  # data keys unwrapped (its Decrypt calls)

    # -- data keys ----------------------------------------------------------------------
    def _data_key(self, queue: QueueRecord, protection: Protection) -> _DataKey:
        """The queue's current data key; a new one once the reuse period has passed."""
        now = self._clock.now_ms()
        slot = (queue.queue_id, protection.key_id)
        with self._lock:
            current = self._sealing.get(slot)
        if current is not None and now - current.made_ms < protection.reuse_s * 1000:
            return current
        try:
            made = self._keys.generate(protection.key_id)
        except KeyServiceError as exc:
            raise KmsError(exc.code, exc.message) from exc
        envelope = Envelope(made.ref, made.wrapped, queue.queue_id).text()
        fresh = _DataKey(AESGCM(made.plaintext), envelope, now)
        with self._lock:
            self.generated += 1
            self._sealing[slot] = fresh
            self._remember(envelope, fresh.aes, now)
        return fresh

    def _remember(self, envelope: str, aes: AESGCM, now: int) -> None:
        self._opening[envelope] = (aes, now)
        self._opening.move_to_end(envelope)
        while len(self._opening) > self._open_cache:
            self._opening.popitem(last=False)

    def _opener(self, envelope_text: str, reuse_s: int) -> tuple[AESGCM, str]:
        """The data key of an envelope (cached for the reuse period) and its sealing queue."""
        now = self._clock.now_ms()
        envelope = Envelope.parse(envelope_text)
        with self._lock:
            cached = self._opening.get(envelope_text)
            if cached is not None and now - cached[1] < reuse_s * 1000:
                self._opening.move_to_end(envelope_text)
                return cached[0], envelope.queue_id
        try:
            plaintext = self._keys.unwrap(envelope.ref, envelope.wrapped)
        except KeyServiceError as exc:
            raise KmsError(exc.code, exc.message) from exc
        aes = AESGCM(plaintext)
        with self._lock:
            self.unwrapped += 1
            self._remember(envelope_text, aes, now)
        return aes, envelope.queue_id

    # -- messages -----------------------------------------------------------------------
    def seal(self, queue: QueueRecord, message: Message) -> Message:
        """The message as the stores keep it: body and attribute values encrypted (or the
        message unchanged when the queue is not encrypted, or it is sealed already)."""
        protection = protection_of(queue, self._managed_key_id)
        if protection is None or message.envelope:
            return message
        key = self._data_key(queue, protection)
        return _sealed(key.aes, queue.queue_id, message, key.envelope)

    def seal_many(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """`seal` for each message of one queue."""
        return [self.seal(queue, m) for m in messages]

    def open(self, queue: QueueRecord, message: Message) -> Message:
        """The plaintext message; KmsInvalidState when its ciphertext does not open."""
        if not message.envelope:
            return message
        aes, sealed_for = self._opener(message.envelope, reuse_period_s(queue))
        try:
            return _opened(aes, sealed_for, message)
        except (InvalidTag, ValueError, binascii.Error) as exc:
            raise KmsError(
                "KmsInvalidState",
                f"The message {message.message_id} does not decrypt with its data key.",
            ) from exc

    def open_many(self, queue: QueueRecord, messages: list[Message]) -> list[Message]:
        """`open` for each message of one queue."""
        return [self.open(queue, m) for m in messages]

    def reseal(self, source: QueueRecord, target: QueueRecord, message: Message,
               new_id: str) -> Message:
        """A message of `source` as `target` keeps it under a new message id (redrive):
        opened, given its new id, and sealed for the target (or left in clear text when
        the target is not encrypted)."""
        opened = self.open(source, message).with_changes(message_id=new_id, envelope=None)
        return self.seal(target, opened)


def _sealed(aes: AESGCM, queue_id: str, message: Message, envelope: str) -> Message:
    mid = message.message_id
    body = _seal(aes, _aad(queue_id, mid, "body"), message.body.encode("utf-8"))
    return message.with_changes(
        body=base64.b64encode(body).decode(),
        attributes=_seal_values(aes, queue_id, mid, "a", message.attributes),
        system_attributes=_seal_values(aes, queue_id, mid, "s", message.system_attributes),
        envelope=envelope,
    )


def _opened(aes: AESGCM, queue_id: str, message: Message) -> Message:
    mid = message.message_id
    body = _open(aes, _aad(queue_id, mid, "body"), base64.b64decode(message.body, validate=True))
    return message.with_changes(
        body=body.decode("utf-8"),
        attributes=_open_values(aes, queue_id, mid, "a", message.attributes),
        system_attributes=_open_values(aes, queue_id, mid, "s", message.system_attributes),
        envelope=None,
    )


def _seal_values(aes: AESGCM, queue_id: str, message_id: str, kind: str,
                 values: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
    sealed: dict[str, AttributeValue] = {}
    for name, value in values.items():
        aad = _aad(queue_id, message_id, f"{kind}|{name}|{value.data_type}")
        if value.is_binary:
            sealed[name] = AttributeValue(
                value.data_type, binary_value=_seal(aes, aad, value.binary_value or b""))
        else:
            data = _seal(aes, aad, (value.string_value or "").encode("utf-8"))
            sealed[name] = AttributeValue(value.data_type,
                                          string_value=base64.b64encode(data).decode())
    return sealed


def _open_values(aes: AESGCM, queue_id: str, message_id: str, kind: str,
                 values: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
    opened: dict[str, AttributeValue] = {}
    for name, value in values.items():
        aad = _aad(queue_id, message_id, f"{kind}|{name}|{value.data_type}")
        if value.is_binary:
            opened[name] = AttributeValue(
                value.data_type, binary_value=_open(aes, aad, value.binary_value or b""))
        else:
            data = base64.b64decode(value.string_value or "", validate=True)
            opened[name] = AttributeValue(value.data_type,
                                          string_value=_open(aes, aad, data).decode("utf-8"))
    return opened
