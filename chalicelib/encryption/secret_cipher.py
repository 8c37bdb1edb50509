"""Encryption of access-key secrets at rest: KMS on AWS, AES-256-GCM with a key file locally
(read by a loader the runtime hands in).

Without a key file (a Lambda container without a KMS key) the AES key is derived (HKDF) from
the deployment's receipt key, a secret every container already shares. Both bind the
ciphertext to the access key id (KMS encryption context, GCM additional
data), so a secret copied onto another key's item does not decrypt.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from chalicelib.dynamo_errors import translate_errors

_VERSION = b"\x01"
_NONCE_BYTES = 12
KEY_BYTES = 32
CONTEXT_KEY = "dmq:accessKeyId"


class SecretCipher(Protocol):
    """Encrypts and decrypts one access key's secret."""

    def encrypt(self, plaintext: bytes, access_key_id: str) -> bytes: ...

    def decrypt(self, blob: bytes, access_key_id: str) -> bytes: ...


class LocalCipher:
    """AES-256-GCM under a 32-byte key: what `key` reads (a file), else one derived from
    `derive_from`, else one for this process.

    A blob is version (1 byte) + nonce (12 bytes) + ciphertext and tag; the access key id
    is the additional data."""

    def __init__(self, key: Callable[[], bytes] | None, derive_from: str | None = None) -> None:
        self._load = key
        self._derive_from = derive_from
        self._lock = threading.Lock()
        self._aead: AESGCM | None = None

    def _cipher(self) -> AESGCM:
        with self._lock:
            if self._aead is None:
                self._aead = AESGCM(self._load_key())
            return self._aead

    def _load_key(self) -> bytes:
        if self._load is None and self._derive_from:
            # No key file (a Lambda container): every container derives the same key from
            # the deployment's secret receipt key.
            return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                        info=b"dmq access-key secrets").derive(self._derive_from.encode())
        if self._load is None:  # nothing to derive from (the in-memory store): per process
            return AESGCM.generate_key(bit_length=256)
        key = self._load()
        if len(key) != KEY_BYTES:
            raise ValueError(f"The access keys' key file does not hold a {KEY_BYTES}-byte key.")
        return key

    def encrypt(self, plaintext: bytes, access_key_id: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._cipher().encrypt(nonce, plaintext, access_key_id.encode())
        return _VERSION + nonce + sealed

    def decrypt(self, blob: bytes, access_key_id: str) -> bytes:
        if blob[:1] != _VERSION:
            raise ValueError("Unknown secret format.")
        nonce, sealed = blob[1:1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES:]
        return self._cipher().decrypt(nonce, sealed, access_key_id.encode())


class KmsCipher:
    """KMS Encrypt/Decrypt of the secret itself (it is 40 bytes, far under KMS's 4 KB),
    with the access key id as encryption context."""

    def __init__(self, kms: Any, key_id: str) -> None:
        self._kms = kms
        self._key_id = key_id

    def encrypt(self, plaintext: bytes, access_key_id: str) -> bytes:
        with translate_errors():
            response = self._kms.encrypt(KeyId=self._key_id, Plaintext=plaintext,
                                         EncryptionContext={CONTEXT_KEY: access_key_id})
        return bytes(response["CiphertextBlob"])

    def decrypt(self, blob: bytes, access_key_id: str) -> bytes:
        with translate_errors():
            response = self._kms.decrypt(CiphertextBlob=blob, KeyId=self._key_id,
                                         EncryptionContext={CONTEXT_KEY: access_key_id})
        return bytes(response["Plaintext"])
