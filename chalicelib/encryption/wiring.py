"""The runtime's keys: which key wrapper seals messages at rest, which cipher seals the
access keys' secrets, and the identities built over them (docs/encryption.md,
docs/security.md). On AWS these are KMS when a key is configured; locally, key files.

A key file is made at random on first use only by the local runtime (its `LocalParts`,
`dmqlocal/key_files.py`). Without it (on Lambda) a named key file must already exist: it
is read, never made, since each container would otherwise make a key of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from chalicelib.aws import Clients, new_session, store_config
from chalicelib.clock import Clock
from chalicelib.encryption.deployment_keys import SecretFile, console_key, receipt_key
from chalicelib.encryption.keys import KeyWrapper, KmsKeys, LocalKeys
from chalicelib.encryption.secret_cipher import KmsCipher, LocalCipher, SecretCipher
from chalicelib.metadata.access_keys import AccessKeyRepository
from chalicelib.runtime_types import LocalParts
from chalicelib.service.identity import Identities
from chalicelib.settings import ConfigurationError, Settings

KEY_BYTES = 32


def key_file(path: str, setting: str, local: LocalParts | None) -> Callable[[], bytes]:
    """What reads the 256-bit key in `path`: the local runtime's key files (made on first
    use), else the file as it is, which must exist (named by `setting`)."""
    if local is not None:
        return lambda: local.key(path, KEY_BYTES)

    def existing() -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise ConfigurationError(
                f"{setting} names {path}, which cannot be read ({exc.strerror}): outside the "
                "local server a key file is never made, so give every function the same "
                "existing file.") from exc
    return existing


def key_wrapper(settings: Settings, local: LocalParts | None) -> KeyWrapper:
    """The key-encryption keys of encryption at rest: KMS, or the local key file's."""
    if settings.sse_keys == "kms":
        return KmsKeys(settings.region, settings.kms_endpoint, store_config(settings))
    path = settings.sse_key_path
    return LocalKeys(key_file(path, "DMQ_SSE_KEY_FILE", local) if path else None)


def secret_cipher(settings: Settings, receipt_key: Callable[[], str],
                  local: LocalParts | None) -> SecretCipher:
    """What seals the access keys' secrets: KMS with a key id; else AES under a key file,
    the data folder's by default. With a key file the secrets are sealed under that
    file's own key, whatever the receipt key is; only a container without one (Lambda
    without KMS) derives the key from the deployment's secret receipt key."""
    if settings.keys_kms_key_id:
        kms = new_session().client("kms", region_name=settings.region,
                                   config=store_config(settings))
        return KmsCipher(kms, settings.keys_kms_key_id)
    path = settings.keys_key_file or (
        f"{settings.data_dir}/access-keys.key" if settings.data_dir else None)
    if path:
        return LocalCipher(key_file(path, "DMQ_KEYS_KEY_FILE", local))
    return LocalCipher(None, receipt_key())


def identities(settings: Settings, clock: Clock, receipt_key: Callable[[], str],
               local: LocalParts | None) -> Identities:
    """Access keys and callers, over the default region's control table."""
    root = (settings.root_access_key_id, settings.root_secret_access_key)
    return Identities(
        AccessKeyRepository(Clients(settings).dynamodb, settings.control_table),
        secret_cipher(settings, receipt_key, local), clock, settings.auth,
        settings.account_id, (root[0], root[1]) if root[0] and root[1] else None,
        settings.metadata_cache_seconds)


class ContainerKeys:
    """The container's keys, each fetched or made once: the receipt key (it may come
    from SSM), the console's form-token key and the key wrapper of encryption at rest
    (every region's services share it, and with it a key file's master key). A key file
    is made only by the local runtime's parts (`local`), when they are given."""

    def __init__(self, settings: Callable[[], Settings],
                 local: Callable[[], LocalParts | None]) -> None:
        self._settings = settings
        self._local = local
        self._lock = threading.Lock()
        self._receipt: str | None = None
        self._console: str | None = None
        self._wrapper: KeyWrapper | None = None

    def _secret_file(self) -> SecretFile | None:
        local = self._local()
        return local.secret if local is not None else None

    def receipt(self) -> str:
        """The key that signs this deployment's receipt handles."""
        with self._lock:
            if self._receipt is None:
                self._receipt = receipt_key(self._settings(), secret_file=self._secret_file())
            return self._receipt

    def console(self) -> str:
        """The web console's form-token key."""
        with self._lock:
            if self._console is None:
                self._console = console_key(self._settings(), secret_file=self._secret_file())
            return self._console

    def wrapper(self) -> KeyWrapper:
        """The key-encryption keys of encryption at rest."""
        with self._lock:
            if self._wrapper is None:
                self._wrapper = key_wrapper(self._settings(), self._local())
            return self._wrapper

    def identities(self, clock: Clock) -> Identities:
        """Access keys and callers, their secrets sealed by this container's cipher."""
        return identities(self._settings(), clock, self.receipt, self._local())
