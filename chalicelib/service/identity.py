"""Who a caller is: access keys, their accounts and principals, and the open local mode.

`Identities` answers for an access key id: in the open mode (the local default) by the
tenant rule (a 12-digit key id acts as that account, any other as the deployment's
account), with no secret; in the required mode from the key store, with the secret the
SigV4 check needs. It also makes, rotates, lists and revokes keys for the admin API.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass

from chalicelib.clock import Clock
from chalicelib.encryption.secret_cipher import SecretCipher
from chalicelib.metadata.access_keys import (
    ACTIVE,
    AccessKeyExistsError,
    AccessKeyRecord,
    AccessKeyRepository,
)
from chalicelib.service.exceptions import (
    InvalidClientTokenIdError,
    InvalidParameterValueError,
    SignatureDoesNotMatchError,
    SqsError,
)

OPEN = "open"
REQUIRED = "required"
_ACCOUNT = re.compile(r"[0-9]{12}")
_USER = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}")
CACHE_LIMIT = 10_000  # cached key ids (known and unknown) per container
_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details.")


@dataclass(frozen=True)
class Caller:
    """An authenticated principal: its account, ARN, access key and admin flag."""

    account: str
    arn: str
    access_key_id: str
    admin: bool


@dataclass(frozen=True)
class AccessKey:
    """A stored key as the admin API shows it (never with its secret)."""

    access_key_id: str
    account: str
    user: str | None
    admin: bool
    status: str
    created_ms: int

    def to_json(self) -> dict[str, object]:
        """The admin API's view of the key."""
        return {"accessKeyId": self.access_key_id, "account": self.account,
                "user": self.user, "admin": self.admin, "status": self.status,
                "created": self.created_ms}


class NoSuchAccessKeyError(SqsError):
    """The admin API names a key DMQ does not hold."""

    code = "NoSuchEntity"
    status = 404


def principal_arn(account: str, user: str | None) -> str:
    """`arn:aws:iam::<account>:root` or `arn:aws:iam::<account>:user/<name>`."""
    return f"arn:aws:iam::{account}:root" if user is None else (
        f"arn:aws:iam::{account}:user/{user}")


def _public(record: AccessKeyRecord) -> AccessKey:
    return AccessKey(record.access_key_id, record.account, record.user, record.admin,
                     record.status, record.created_ms)


def new_access_key_id() -> str:
    """An id shaped as AWS's long-term keys are: AKIA and 16 base32 characters."""
    return "AKIA" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(16))


def new_secret() -> str:
    """40 characters of base64, as AWS's secret access keys are (240 random bits)."""
    return base64.b64encode(secrets.token_bytes(30)).decode()


@dataclass(frozen=True)
class _Known:
    caller: Caller
    secret: str


class Identities:
    """Access keys and the callers they stand for."""

    def __init__(
        self, repo: AccessKeyRepository, cipher: SecretCipher, clock: Clock, mode: str,
        default_account: str, root: tuple[str, str] | None = None,
        cache_seconds: float = 5.0,
    ) -> None:
        self._repo = repo
        self._cipher = cipher
        self._clock = clock
        self.mode = mode
        self._account = default_account
        self._root = root
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, _Known | None]] = {}
        self._lock = threading.Lock()
        self._root_seeded = False

    @property
    def default_account(self) -> str:
        """The deployment's account (DMQ_ACCOUNT_ID)."""
        return self._account

    @property
    def required(self) -> bool:
        """True when every request must be signed by a stored key."""
        return self.mode == REQUIRED

    # -- callers ---------------------------------------------------------------------------
    def open_caller(self, access_key_id: str | None) -> Caller:
        """The open mode's tenant rule: a 12-digit key id is that account's root, any other
        key (or none) the deployment account's root. That account's root is the admin."""
        key = access_key_id or ""
        account = key if _ACCOUNT.fullmatch(key) else self._account
        return Caller(account, principal_arn(account, None), key, account == self._account)

    def lookup(self, access_key_id: str) -> tuple[Caller, str]:
        """The caller and the secret of a stored, active key; InvalidClientTokenId else."""
        if self._root is not None and hmac.compare_digest(access_key_id.encode(),
                                                          self._root[0].encode()):
            caller = Caller(self._account, principal_arn(self._account, None),
                            access_key_id, True)
            return caller, self._root[1]
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(access_key_id)
        if cached is not None and now < cached[0]:
            known = cached[1]
        else:
            known = self._load(access_key_id)
            with self._lock:
                if len(self._cache) >= CACHE_LIMIT:  # a flood of forged ids cannot grow it
                    self._cache.clear()
                self._cache[access_key_id] = (now + self._cache_seconds, known)
        if known is None:
            raise InvalidClientTokenIdError()
        return known.caller, known.secret

    def _load(self, access_key_id: str) -> _Known | None:
        record = self._repo.get(access_key_id)
        if record is None or record.status != ACTIVE:
            return None
        secret = self._cipher.decrypt(record.secret_blob, access_key_id).decode()
        caller = Caller(record.account, principal_arn(record.account, record.user),
                        access_key_id, record.admin)
        return _Known(caller, secret)

    def check_secret(self, access_key_id: str, secret: str) -> Caller:
        """The caller of a key id and secret pair (HTTP Basic, for example). Open mode: any
        secret passes and the tenant rule applies; required: the secret must match."""
        if not self.required:
            return self.open_caller(access_key_id)
        caller, expected = self.lookup(access_key_id)
        if not hmac.compare_digest(expected.encode(), secret.encode()):
            raise SignatureDoesNotMatchError(SIGNATURE_MISMATCH)
        return caller

    # -- keys (the admin API) --------------------------------------------------------------
    def create_key(self, account: str, user: str | None, admin: bool) -> tuple[AccessKey, str]:
        """A new active key for the account's root (user None) or a named user; the secret
        is returned once and stored encrypted."""
        if not isinstance(account, str) or not _ACCOUNT.fullmatch(account):
            raise InvalidParameterValueError(
                f"Value {account} for parameter account is invalid. Reason: an account id "
                "is 12 digits.")
        if user is not None and (not isinstance(user, str) or not _USER.fullmatch(user)):
            raise InvalidParameterValueError(
                f"Value {user} for parameter user is invalid. Reason: 1 to 64 of "
                "A-Za-z0-9+=,.@_-.")
        if not isinstance(admin, bool):
            raise InvalidParameterValueError(
                f"Value {admin} for parameter admin is invalid. Reason: true or false.")
        for _ in range(3):  # ids are random; a clash is retried with a fresh one
            key_id, secret = new_access_key_id(), new_secret()
            record = AccessKeyRecord(key_id, account, user, admin, ACTIVE, self._clock.now_ms(),
                                     self._cipher.encrypt(secret.encode(), key_id))
            try:
                self._repo.add(record)
            except AccessKeyExistsError:
                continue
            self._forget(key_id)
            return _public(record), secret
        raise InvalidParameterValueError("Could not allocate a unique access key id.")

    def rotate(self, access_key_id: str) -> tuple[AccessKey, str]:
        """A new key for the same principal; the old one stays active until revoked."""
        record = self._stored(access_key_id)
        return self.create_key(record.account, record.user, record.admin)

    def revoke(self, access_key_id: str) -> AccessKey:
        """Delete a key: from then on it is InvalidClientTokenId (other containers within
        their cache time)."""
        if self._root is not None and access_key_id == self._root[0]:
            raise InvalidParameterValueError(
                f"Value {access_key_id} for parameter accessKeyId is invalid. Reason: the "
                "root key set by DMQ_ROOT_ACCESS_KEY_ID is configuration; unset it instead.")
        record = self._stored(access_key_id)
        if not self._repo.remove(access_key_id):
            raise NoSuchAccessKeyError(f"The access key {access_key_id} does not exist.")
        self._forget(access_key_id)
        return AccessKey(record.access_key_id, record.account, record.user, record.admin,
                         "Revoked", record.created_ms)

    def list_keys(self) -> list[AccessKey]:
        """Every stored key (the configured root key included, seeded on first listing)."""
        self._seed_root()
        return [_public(r) for r in self._repo.all()]

    def _stored(self, access_key_id: str) -> AccessKeyRecord:
        record = self._repo.get(access_key_id) if access_key_id else None
        if record is None:
            raise NoSuchAccessKeyError(f"The access key {access_key_id} does not exist.")
        return record

    def _seed_root(self) -> None:
        """Write the configured root key into the store once, so it is listed (it is served
        from the configuration, whatever the store holds)."""
        if self._root is None or self._root_seeded or not self.required:
            return
        key_id, secret = self._root
        record = AccessKeyRecord(key_id, self._account, None, True, ACTIVE,
                                 self._clock.now_ms(),
                                 self._cipher.encrypt(secret.encode(), key_id))
        with contextlib.suppress(AccessKeyExistsError):  # seeded before: listed already
            self._repo.add(record)
        self._root_seeded = True

    def _forget(self, access_key_id: str) -> None:
        with self._lock:
            self._cache.pop(access_key_id, None)
