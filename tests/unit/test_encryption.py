"""Envelope encryption of messages: round trips, what the additional data binds, the data
key reuse period, and the local key file."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.encryption.envelope import (
    Envelope,
    MessageCipher,
    protection_of,
)
from chalicelib.encryption.keys import DataKey, KeyServiceError, KmsKeys, LocalKeys
from chalicelib.service.exceptions import KmsError
from tests.clocks import FakeClock
from tests.key_loaders import file_key

MANAGED = "dmq/sse-sqs"
BODY = "the secret plaintext body ü"
ATTRIBUTES = {
    "name": AttributeValue("String", string_value="secret attribute value"),
    "count": AttributeValue("Number.int", string_value="12345"),
    "blob": AttributeValue("Binary", binary_value=b"\x00secret binary\xff"),
}


class CountingKeys(LocalKeys):
    """LocalKeys that count what they are asked (the key service's calls)."""

    def __init__(self, key_file: Path | None = None) -> None:
        super().__init__(key_file)
        self.generates = 0
        self.unwraps = 0

    def generate(self, key_id: str) -> DataKey:
        self.generates += 1
        return super().generate(key_id)

    def unwrap(self, ref: str, wrapped: bytes) -> bytes:
        self.unwraps += 1
        return super().unwrap(ref, wrapped)


def _queue(name: str = "q", **attributes: str) -> QueueRecord:
    return QueueRecord(account="000000000000", name=name, region="us-east-1",
                       attributes={"SqsManagedSseEnabled": "true", **attributes})


def _message(message_id: str = "m-1", body: str = BODY) -> Message:
    return Message(message_id=message_id, body=body, body_md5="md5", sent_ms=1, visible_at=1,
                   expires_ms=10**13, attributes=dict(ATTRIBUTES),
                   system_attributes={"AWSTraceHeader": AttributeValue(
                       "String", string_value="Root=1-secret-trace")})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def keys() -> CountingKeys:
    return CountingKeys()


@pytest.fixture
def cipher(keys: CountingKeys, clock: FakeClock) -> MessageCipher:
    return MessageCipher(keys, MANAGED, clock)


def _text_of(message: Message) -> str:
    """Everything a store would keep of the message's content, as text."""
    parts = [message.body, message.envelope or ""]
    for value in [*message.attributes.values(), *message.system_attributes.values()]:
        parts.append(value.string_value or "")
        parts.append((value.binary_value or b"").decode("latin-1"))
    return "\n".join(parts)


def test_sealed_message_holds_no_plaintext_and_opens_to_the_original(
    cipher: MessageCipher,
) -> None:
    # GIVEN a message with body, attributes of every type and a system attribute
    queue, message = _queue(), _message()
    # WHEN it is sealed
    sealed = cipher.seal(queue, message)
    # THEN no plaintext is left in it, names and data types stay, and an envelope is set
    stored = _text_of(sealed)
    for secret in ("secret", "12345", "Root=1"):
        assert secret not in stored
    assert sealed.envelope and sealed.envelope.startswith("1|local:dmq/sse-sqs|")
    assert {n: v.data_type for n, v in sealed.attributes.items()} == {
        n: v.data_type for n, v in ATTRIBUTES.items()}
    # AND opening it gives back exactly the message that was sealed
    assert cipher.open(queue, sealed) == message


def test_every_field_gets_its_own_nonce(cipher: MessageCipher) -> None:
    # GIVEN two messages with the same body under the same data key
    queue = _queue()
    first = cipher.seal(queue, _message("m-1"))
    second = cipher.seal(queue, _message("m-2"))
    # THEN they share the envelope but not the ciphertext (fresh random nonces)
    assert first.envelope == second.envelope
    assert first.body != second.body
    assert base64.b64decode(first.body)[:12] != base64.b64decode(second.body)[:12]


def test_ciphertext_moved_to_another_message_id_does_not_open(cipher: MessageCipher) -> None:
    # GIVEN two sealed messages of one queue
    queue = _queue()
    victim = cipher.seal(queue, _message("m-victim"))
    other = cipher.seal(queue, _message("m-other", body="other"))
    # WHEN the victim's body is swapped into the other message (same data key)
    swapped = other.with_changes(body=victim.body)
    # THEN it fails to open: the additional data binds the message id
    with pytest.raises(KmsError) as raised:
        cipher.open(queue, swapped)
    assert raised.value.code == "KmsInvalidState"
    assert raised.value.legacy_code == "KMS.InvalidStateException"


def test_ciphertext_moved_to_another_field_or_queue_does_not_open(
    cipher: MessageCipher,
) -> None:
    queue = _queue()
    sealed = cipher.seal(queue, _message())
    # An attribute value moved under another attribute's name does not open
    swapped_attr = dict(sealed.attributes)
    swapped_attr["count"] = AttributeValue("Number.int",
                                           string_value=sealed.attributes["name"].string_value)
    with pytest.raises(KmsError):
        cipher.open(queue, sealed.with_changes(attributes=swapped_attr))
    # The body moved into an attribute does not open
    as_attr = {**sealed.attributes, "name": AttributeValue("String", string_value=sealed.body)}
    with pytest.raises(KmsError):
        cipher.open(queue, sealed.with_changes(attributes=as_attr))
    # An envelope rewritten to claim another queue does not open
    envelope = Envelope.parse(sealed.envelope or "")
    forged = Envelope(envelope.ref, envelope.wrapped, "000000000000/other").text()
    with pytest.raises(KmsError):
        cipher.open(queue, sealed.with_changes(envelope=forged))


def test_a_tampered_ciphertext_or_envelope_does_not_open(cipher: MessageCipher) -> None:
    queue = _queue()
    sealed = cipher.seal(queue, _message())
    raw = bytearray(base64.b64decode(sealed.body))
    raw[-1] ^= 1
    with pytest.raises(KmsError):
        cipher.open(queue, sealed.with_changes(body=base64.b64encode(bytes(raw)).decode()))
    with pytest.raises(KmsError):
        cipher.open(queue, sealed.with_changes(envelope="garbage"))
    envelope = Envelope.parse(sealed.envelope or "")
    flipped = bytes([envelope.wrapped[0] ^ 1]) + envelope.wrapped[1:]
    with pytest.raises(KmsError):  # a wrapped data key altered does not unwrap
        cipher.open(queue, sealed.with_changes(
            envelope=Envelope(envelope.ref, flipped, envelope.queue_id).text()))


def test_data_key_is_reused_for_the_reuse_period_then_replaced(
    cipher: MessageCipher, keys: CountingKeys, clock: FakeClock,
) -> None:
    # GIVEN a queue whose data keys live 60 seconds
    queue = _queue(KmsDataKeyReusePeriodSeconds="60")
    first = cipher.seal(queue, _message("m-1"))
    # WHEN messages are sealed within the period THEN one data key serves them all
    clock.advance(59.9)
    assert cipher.seal(queue, _message("m-2")).envelope == first.envelope
    assert keys.generates == 1
    # WHEN the period has passed THEN a new data key is made
    clock.advance(0.1)
    third = cipher.seal(queue, _message("m-3"))
    assert third.envelope != first.envelope
    assert keys.generates == 2
    # AND messages under either key still open
    assert cipher.open(queue, first).body == BODY
    assert cipher.open(queue, third).body == BODY


def test_default_reuse_period_is_300_seconds(
    cipher: MessageCipher, keys: CountingKeys, clock: FakeClock,
) -> None:
    queue = _queue()
    first = cipher.seal(queue, _message("m-1"))
    clock.advance(299)
    assert cipher.seal(queue, _message("m-2")).envelope == first.envelope
    clock.advance(1)
    assert cipher.seal(queue, _message("m-3")).envelope != first.envelope
    assert keys.generates == 2


def test_opening_reuses_unwrapped_keys(keys: CountingKeys, clock: FakeClock) -> None:
    # GIVEN messages sealed by one process and read by another (its own caches)
    queue = _queue()
    writer = MessageCipher(keys, MANAGED, clock)
    reader = MessageCipher(keys, MANAGED, clock)
    sealed = [writer.seal(queue, _message(f"m-{i}")) for i in range(20)]
    # WHEN the reader opens them all THEN the data key is unwrapped once
    assert [reader.open(queue, m).body for m in sealed] == [BODY] * 20
    assert keys.unwraps == 1
    # AND again once the reuse period has passed
    clock.advance(300)
    reader.open(queue, sealed[0])
    assert keys.unwraps == 2


def test_kms_key_queues_and_managed_queues_use_their_own_keys(cipher: MessageCipher) -> None:
    kms = _queue("kms", KmsMasterKeyId="alias/orders", SqsManagedSseEnabled="false")
    managed = _queue("managed")
    assert (cipher.seal(kms, _message()).envelope or "").startswith("1|local:alias/orders|")
    assert (cipher.seal(managed, _message()).envelope or "").startswith("1|local:dmq/sse-sqs|")


def test_protection_follows_the_queue_attributes() -> None:
    assert protection_of(_queue(), MANAGED) is not None
    assert protection_of(_queue(SqsManagedSseEnabled="false"), MANAGED) is None
    kms = protection_of(_queue(KmsMasterKeyId="k", SqsManagedSseEnabled="false",
                               KmsDataKeyReusePeriodSeconds="86400"), MANAGED)
    assert kms is not None and (kms.key_id, kms.reuse_s) == ("k", 86400)


def test_unencrypted_queue_stores_messages_as_sent(cipher: MessageCipher) -> None:
    queue = _queue(SqsManagedSseEnabled="false")
    message = _message()
    assert cipher.seal(queue, message) == message
    # and a message stored in clear text (before encryption was on) reads as it is
    assert cipher.open(_queue(), message) == message


def test_key_file_is_created_once_private_and_shared(tmp_path: Path, clock: FakeClock) -> None:
    # GIVEN two processes' key wrappers over one key file that does not exist yet
    path = tmp_path / "keys" / "sse.key"
    first, second = LocalKeys(file_key(path)), LocalKeys(file_key(path))
    queue = _queue()
    sealed = MessageCipher(first, MANAGED, clock).seal(queue, _message())
    # THEN the file holds a 256-bit key readable by its owner only
    assert len(path.read_bytes()) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # AND the other process (and a restarted one) opens what the first sealed
    assert MessageCipher(second, MANAGED, clock).open(queue, sealed).body == BODY
    assert MessageCipher(LocalKeys(file_key(path)), MANAGED, clock).open(queue, sealed).body == BODY
    # AND a different key file does not
    with pytest.raises(KmsError):
        other = LocalKeys(file_key(tmp_path / "other.key"))
        MessageCipher(other, MANAGED, clock).open(queue, sealed)


def test_a_damaged_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sse.key"
    path.write_bytes(b"short")
    with pytest.raises(KeyServiceError) as raised:
        LocalKeys(file_key(path)).generate(MANAGED)
    assert raised.value.code == "KmsInvalidState"


@pytest.mark.parametrize(("kms_code", "sqs_code"), [
    ("NotFoundException", "KmsNotFound"), ("DisabledException", "KmsDisabled"),
    ("AccessDeniedException", "KmsAccessDenied"), ("KMSInvalidStateException", "KmsInvalidState"),
    ("ThrottlingException", "KmsThrottled"), ("InvalidKeyUsageException", "KmsInvalidKeyUsage"),
    ("KMSOptInRequired", "KmsOptInRequired"),
])
def test_kms_refusals_map_to_the_sqs_kms_errors(kms_code: str, sqs_code: str) -> None:
    class Refusing:
        def generate_data_key(self, **kwargs: object) -> None:
            raise ClientError({"Error": {"Code": kms_code, "Message": "no"}}, "GenerateDataKey")

    keys = KmsKeys("us-east-1")
    keys._clients["us-east-1"] = Refusing()
    with pytest.raises(KeyServiceError) as raised:
        keys.generate("alias/k")
    assert raised.value.code == sqs_code
    error = KmsError(raised.value.code, raised.value.message)
    assert (error.code, error.status) == (sqs_code, 400)
    assert error.legacy_code.startswith("KMS.")
