"""Who is using the console: HTTP Basic credentials (access key id : secret access key).

`authenticate` is the one place the console checks a credential, through the access keys
DMQ holds (`Identities.check_secret`, docs/security.md): in the open local mode any secret
passes, a 12-digit access key id acting as that account and any other key as the
deployment's account (DMQ_ACCOUNT_ID), whose root is the admin; with DMQ_AUTH=required the
secret must be the key's. The console shows every account's queues, so only an admin may
use it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.service.exceptions import SqsError
from chalicelib.service.identity import Caller

REALM = "DMQ console"
CHALLENGE = f'Basic realm="{REALM}", charset="UTF-8"'


@dataclass(frozen=True)
class ConsoleUser:
    """An authenticated caller of the console."""

    access_key_id: str
    account: str
    admin: bool


def credentials(header: str | None) -> tuple[str, str] | None:
    """(access key id, secret) of an `Authorization: Basic ...` header, None when absent
    or malformed (no scheme, bad base64, no colon, no key id)."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    key_id, colon, secret = decoded.partition(":")
    if not colon or not key_id:
        return None
    return key_id, secret


def authenticate(header: str | None,
                 check_secret: Callable[[str, str], Caller]) -> ConsoleUser | None:
    """The caller named by the Authorization header, or None (answer 401 and ask again):
    an unknown or revoked key and a wrong secret are refused alike."""
    found = credentials(header)
    if found is None:
        return None
    key_id, secret = found
    try:
        caller = check_secret(key_id, secret)
    except SqsError:
        return None
    return ConsoleUser(access_key_id=key_id, account=caller.account, admin=caller.admin)
