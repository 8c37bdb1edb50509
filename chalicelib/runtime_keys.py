"""The runtime's keys: which key wrapper seals messages at rest, which cipher seals the
access keys' secrets, and the identities built over them (docs/encryption.md,
docs/security.md). On AWS these are KMS when a key is configured; locally, key files."""

from __future__ import annotations

from collections.abc import Callable

from chalicelib.aws import Clients, new_session, store_config
from chalicelib.backend.keys import KeyWrapper, KmsKeys, LocalKeys
from chalicelib.clock import Clock
from chalicelib.metadata.access_keys import AccessKeyRepository
from chalicelib.metadata.secret_cipher import KmsCipher, LocalCipher, SecretCipher
from chalicelib.service.identity import Identities
from chalicelib.settings import Settings


def key_wrapper(settings: Settings) -> KeyWrapper:
    """The key-encryption keys of encryption at rest: KMS, or the local key file's."""
    if settings.sse_keys == "kms":
        return KmsKeys(settings.region, settings.kms_endpoint, store_config(settings))
    return LocalKeys(settings.sse_key_path)


def secret_cipher(settings: Settings, receipt_key: Callable[[], str]) -> SecretCipher:
    """What seals the access keys' secrets: KMS with a key id; else AES under a key file,
    the data folder's by default. With a key file the secrets are sealed under that
    file's own key, whatever the receipt key is; only a container without one (Lambda
    without KMS) derives the key from the deployment's secret receipt key."""
    if settings.keys_kms_key_id:
        kms = new_session().client("kms", region_name=settings.region,
                                   config=store_config(settings))
        return KmsCipher(kms, settings.keys_kms_key_id)
    key_file = settings.keys_key_file or (
        f"{settings.data_dir}/access-keys.key" if settings.data_dir else None)
    return LocalCipher(key_file, None if key_file else receipt_key())


def identities(settings: Settings, clock: Clock, receipt_key: Callable[[], str]) -> Identities:
    """Access keys and callers, over the default region's control table."""
    root = (settings.root_access_key_id, settings.root_secret_access_key)
    return Identities(
        AccessKeyRepository(Clients(settings).dynamodb, settings.control_table),
        secret_cipher(settings, receipt_key), clock, settings.auth, settings.account_id,
        (root[0], root[1]) if root[0] and root[1] else None, settings.metadata_cache_seconds)
