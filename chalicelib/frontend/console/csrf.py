"""Tokens that prove a console form was served by DMQ to the same signed-in key.

A browser sends Basic credentials with any request to the site, a forged cross-site form
post included; the token in every form stops that. A token is `<issued>.<mac>`, the MAC an
HMAC-SHA256 over the access key id and the issue time, keyed by a key derived from the
console's own random key (`chalicelib/encryption/deployment_keys.py`: `DMQ_CONSOLE_KEY`,
its SSM parameter, or `keys/console.key` in the data folder), never from the receipt key.
It is good for `TOKEN_TTL_S` seconds.
"""

from __future__ import annotations

import hashlib
import hmac

TOKEN_TTL_S = 12 * 3600
_LABEL = b"dmq-console-csrf"


class CsrfTokens:
    """Issues and checks the form tokens of one deployment."""

    def __init__(self, secret: str) -> None:
        self._key = hmac.new(secret.encode("utf-8"), _LABEL, hashlib.sha256).digest()

    def _mac(self, access_key_id: str, issued_s: int) -> str:
        message = f"{access_key_id}|{issued_s}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def issue(self, access_key_id: str, now_s: int) -> str:
        """A token for this key, issued now."""
        return f"{now_s}.{self._mac(access_key_id, now_s)}"

    def valid(self, token: str | None, access_key_id: str, now_s: int) -> bool:
        """True when the token was issued to this key within its lifetime."""
        if not token:
            return False
        issued, _, mac = token.partition(".")
        if not issued.isdigit() or not mac:
            return False
        issued_s = int(issued)
        if not 0 <= now_s - issued_s <= TOKEN_TTL_S:
            return False
        return hmac.compare_digest(mac, self._mac(access_key_id, issued_s))
