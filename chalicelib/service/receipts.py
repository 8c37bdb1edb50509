"""Receipt handles: opaque, HMAC-signed tokens naming a claim on a message."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from chalicelib.domain.messages import MessageRef
from chalicelib.service.exceptions import ReceiptHandleIsInvalidError

_SIG_BYTES = 16
# A leading version byte: 0x01 makes every handle start with "A", so a handle never
# starts with "-" (which the AWS CLI would read as an option), as SQS's never do.
_VERSION = b"\x01"


class ReceiptCodec:
    """Encodes and verifies receipt handles with a secret key."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_SIG_BYTES]

    def encode(self, ref: MessageRef) -> str:
        """An opaque handle for this claim."""
        payload = json.dumps(
            [ref.queue_id, ref.shard, ref.message_id, ref.claim_token], separators=(",", ":")
        ).encode()
        raw = _VERSION + self._sign(payload) + payload
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(self, handle: str, queue_id: str) -> MessageRef:
        """Verify a handle for this queue; a forged or garbled one is ReceiptHandleIsInvalid."""
        invalid = ReceiptHandleIsInvalidError(
            f'The input receipt handle "{handle}" is not a valid receipt handle.'
        )
        try:
            raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4))
            version, raw = raw[:1], raw[1:]
            sig, payload = raw[:_SIG_BYTES], raw[_SIG_BYTES:]
            if version != _VERSION or not hmac.compare_digest(sig, self._sign(payload)):
                raise invalid
            q_id, shard, message_id, token = json.loads(payload)
        except (ValueError, TypeError) as exc:
            raise invalid from exc
        if q_id != queue_id:
            raise invalid
        return MessageRef(str(q_id), int(shard), str(message_id), str(token))
