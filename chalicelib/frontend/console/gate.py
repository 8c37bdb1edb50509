"""The console's door: signing in (with limits on failed attempts), and whether a form post
comes from the console's own pages.

A browser sends the Basic credentials it holds with any request to the site, a forged
cross-site form post included. Three checks stop such a post: the browser's
`Sec-Fetch-Site`, its `Origin` (else its `Referer`), which must be the console's own
origin (the scheme the connection really has, and the Host), and the form's CSRF token.
A request with neither Origin nor Referer is not a browser's form post (curl, scripts):
the token alone decides it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from chalicelib.frontend.console import auth
from chalicelib.service.identity import Caller
from chalicelib.service.sign_in_limits import SignInLimits

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class SignIn:
    """Who signed in (None: nobody), or how long to wait before trying again."""

    user: auth.ConsoleUser | None
    retry_after_s: int = 0


def sign_in(header: str | None, client: str, check_secret: Callable[[str, str], Caller],
            limits: SignInLimits) -> SignIn:
    """The user an Authorization header names, counting failures per key id and client
    address; while either must wait, the attempt is refused unchecked."""
    found = auth.credentials(header)
    if found is None:
        return SignIn(None)
    key_id = found[0]
    wait = limits.retry_after(key_id, client)
    if wait:
        return SignIn(None, wait)
    user = auth.authenticate(header, check_secret)
    if user is None:
        limits.failed(key_id, client)
        wait = limits.retry_after(key_id, client)
        return SignIn(None, wait)
    limits.succeeded(key_id, client)
    return SignIn(user)


def normal_origin(text: str) -> str:
    """`scheme://host[:port]` in lower case, the default port left out ("" if not one)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    shown = "" if port in (None, DEFAULT_PORTS[parts.scheme]) else f":{port}"
    return f"{parts.scheme}://{host}{shown}"


def from_own_origin(headers: Mapping[str, str], own_origin: str) -> bool:
    """True unless the request says it comes from another site (header names in lower
    case; `own_origin` is the console's, `scheme://host`)."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    sent = headers.get("origin")
    if sent is None:
        sent = headers.get("referer")
        if sent is None:
            return True
    mine = normal_origin(own_origin)
    return bool(mine) and normal_origin(sent) == mine
