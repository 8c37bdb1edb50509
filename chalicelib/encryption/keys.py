"""Key-encryption keys for encryption at rest: they make and unwrap data keys.

Two implementations of one small interface, chosen by settings (`DMQ_SSE_KEYS`):

- `LocalKeys`: a 256-bit master key, read by a loader the runtime hands in (locally a
  file under the data folder, made on first use and readable by its owner only). Each
  KMS key id a queue names gets its own key-encryption key, derived from the master key
  with HKDF-SHA256, so two queues with different `KmsMasterKeyId`s never share one. A
  data key is wrapped with AES-256-GCM under it, the key id bound as additional data.
- `KmsKeys`: AWS KMS `GenerateDataKey` (AES_256) and `Decrypt`. The wrapped key is KMS's
  ciphertext blob; the reference kept with it is the key's ARN, whose region is where
  `Decrypt` is called, so a replica in another region can still open the message.

A wrapped data key is opaque bytes plus `ref`, the key-encryption key that wrapped it;
both travel with every encrypted item.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from chalicelib.aws import new_session

KEY_BYTES = 32
NONCE_BYTES = 12
LOCAL_PREFIX = "local:"
KMS_PREFIX = "kms:"
# Bound into every KMS call, so a blob DMQ made cannot be opened as something else.
KMS_CONTEXT = {"service": "dmq-sse"}


class KeyServiceError(Exception):
    """The key service refused or failed; `code` is the SQS error it maps to
    (KmsNotFound, KmsAccessDenied, KmsDisabled, KmsInvalidState, KmsThrottled,
    KmsInvalidKeyUsage, KmsOptInRequired)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class DataKey:
    """A fresh data key: the plaintext (kept in memory only) and its wrapped form."""

    plaintext: bytes
    wrapped: bytes
    ref: str


class KeyWrapper(Protocol):
    """Makes data keys under a key-encryption key, and unwraps them again."""

    def generate(self, key_id: str) -> DataKey:
        """A new 256-bit data key wrapped under `key_id`'s key-encryption key."""
        ...

    def unwrap(self, ref: str, wrapped: bytes) -> bytes:
        """The plaintext of a wrapped data key; KeyServiceError when it cannot be opened."""
        ...


# Reads the master key, wherever it is kept (`encryption.wiring` chooses).
KeyLoader = Callable[[], bytes]


def _master_key(load: KeyLoader) -> bytes:
    data = load()
    if len(data) != KEY_BYTES:
        raise KeyServiceError("KmsInvalidState", "the master key file is not a 256-bit key")
    return data


# The master key of a process without a key file: one per process, so that rebuilding the
# runtime (tests, a store that came back) still opens what the process sealed before.
_PROCESS_MASTER = os.urandom(KEY_BYTES)


class LocalKeys:
    """Key-encryption keys derived from one master key: what `master` reads, or (none)
    one made in memory for this process, which suits stores that keep nothing past it."""

    def __init__(self, master: KeyLoader | None) -> None:
        self._load = master
        self._master: bytes | None = None
        self._keks: dict[str, AESGCM] = {}
        self._lock = threading.Lock()

    def _kek(self, key_id: str) -> AESGCM:
        with self._lock:
            found = self._keks.get(key_id)
            if found is None:
                if self._master is None:
                    self._master = (_master_key(self._load) if self._load
                                    else _PROCESS_MASTER)
                derived = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                               info=b"dmq-kek|" + key_id.encode("utf-8")).derive(self._master)
                found = self._keks[key_id] = AESGCM(derived)
            return found

    def generate(self, key_id: str) -> DataKey:
        plaintext = AESGCM.generate_key(bit_length=256)
        nonce = os.urandom(NONCE_BYTES)
        wrapped = nonce + self._kek(key_id).encrypt(nonce, plaintext, key_id.encode("utf-8"))
        return DataKey(plaintext, wrapped, LOCAL_PREFIX + key_id)

    def unwrap(self, ref: str, wrapped: bytes) -> bytes:
        if not ref.startswith(LOCAL_PREFIX):
            raise KeyServiceError("KmsInvalidState", f"not a local key reference: {ref}")
        key_id = ref[len(LOCAL_PREFIX):]
        try:
            return self._kek(key_id).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:],
                                             key_id.encode("utf-8"))
        except InvalidTag as exc:
            raise KeyServiceError(
                "KmsInvalidState", "The data key does not open under this key file: every "
                "process over one store must share one (DMQ_SSE_KEY_FILE).") from exc


# KMS's error codes and the SQS errors that report them.
_KMS_ERRORS = {
    "NotFoundException": "KmsNotFound",
    "AccessDeniedException": "KmsAccessDenied",
    "DisabledException": "KmsDisabled",
    "KMSInvalidStateException": "KmsInvalidState",
    "InvalidKeyUsageException": "KmsInvalidKeyUsage",
    "IncorrectKeyException": "KmsInvalidKeyUsage",
    "InvalidCiphertextException": "KmsInvalidState",
    "ThrottlingException": "KmsThrottled",
    "LimitExceededException": "KmsThrottled",
    "KMSOptInRequired": "KmsOptInRequired",
    "OptInRequired": "KmsOptInRequired",
}


class KmsKeys:
    """AWS KMS: GenerateDataKey in the deployment's region, Decrypt in the key's region."""

    def __init__(self, region: str, endpoint: str | None = None,
                 config: Config | None = None) -> None:
        self._region = region
        self._endpoint = endpoint
        self._config = config
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _client(self, region: str) -> Any:
        with self._lock:
            if region not in self._clients:
                self._clients[region] = new_session().client(
                    "kms", region_name=region, endpoint_url=self._endpoint, config=self._config)
            return self._clients[region]

    @staticmethod
    def _failed(exc: Exception) -> KeyServiceError:
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            message = str(exc.response.get("Error", {}).get("Message", code))
            return KeyServiceError(_KMS_ERRORS.get(code, "KmsInvalidState"), message)
        return KeyServiceError("KmsThrottled", f"KMS did not answer: {exc}")

    def generate(self, key_id: str) -> DataKey:
        try:
            found = self._client(self._region).generate_data_key(
                KeyId=key_id, KeySpec="AES_256", EncryptionContext=KMS_CONTEXT)
        except (ClientError, BotoCoreError) as exc:
            raise self._failed(exc) from exc
        return DataKey(bytes(found["Plaintext"]), bytes(found["CiphertextBlob"]),
                       KMS_PREFIX + str(found["KeyId"]))

    def unwrap(self, ref: str, wrapped: bytes) -> bytes:
        if not ref.startswith(KMS_PREFIX):
            raise KeyServiceError("KmsInvalidState", f"not a KMS key reference: {ref}")
        arn = ref[len(KMS_PREFIX):]
        parts = arn.split(":")
        region = parts[3] if arn.startswith("arn:") and len(parts) > 3 else self._region
        try:
            found = self._client(region).decrypt(
                CiphertextBlob=wrapped, KeyId=arn, EncryptionContext=KMS_CONTEXT)
        except (ClientError, BotoCoreError) as exc:
            raise self._failed(exc) from exc
        return bytes(found["Plaintext"])
