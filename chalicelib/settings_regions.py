"""The settings of regions and queue URLs, read from the environment (docs/compatibility.md,
"Regions and queue URLs").

- `DMQ_ANY_REGION` (`on` or `off`): serve a request signed for any region, each region a
  namespace of its own, made on first use. Unset, the local server turns it on and
  everything else leaves it off; on Lambda it is always off (a deployed stage serves the
  regions of its deployment, as AWS's endpoints serve theirs).
- `DMQ_PUBLIC_URL`: the fixed form of the queue URLs DMQ returns, `http(s)://host[:port]`
  with an optional path, where `{region}` stands for the queue's region
  (`http://sqs.{region}.localhost.localstack.cloud:4566`,
  `http://localhost:4566/queue/{region}`). Unset, they point at the host and port the
  client used. Either way a queue outside the server's own region gets
  `/queue/<region>/<account>/<name>` on that base, unless the base names its region
  (`chalicelib/frontend/context.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

_ON = ("1", "true", "on", "yes")
_OFF = ("0", "false", "off", "no")
# What may follow the host: a path of plain segments, `{region}` among them.
_PATH = re.compile(r"(?:/(?:[A-Za-z0-9._~-]|\{region\})+)*/?")


def regional_settings(env: Mapping[str, str], on_lambda: bool) -> dict[str, Any]:
    """`any_region` and `public_url` of the settings; ValueError says what is wrong."""
    return {"any_region": _any_region(env.get("DMQ_ANY_REGION", ""), on_lambda),
            "public_url": public_url(env.get("DMQ_PUBLIC_URL", ""))}


def _any_region(text: str, on_lambda: bool) -> bool | None:
    value = text.strip().lower()
    if on_lambda:
        return False
    if not value:
        return None  # the local server decides (on)
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"DMQ_ANY_REGION is {text!r}: it is on or off.")


def public_url(text: str) -> str | None:
    """A DMQ_PUBLIC_URL checked and without its trailing slash; None when unset."""
    value = text.strip()
    if not value:
        return None
    try:
        parsed = urlparse(value.replace("{region}", "region"))
        port = parsed.port
    except ValueError as exc:
        raise ValueError(f"DMQ_PUBLIC_URL: {value!r} is not a URL.") from exc
    path = urlparse(value).path
    if (parsed.scheme not in ("http", "https") or not parsed.hostname
            or parsed.query or parsed.fragment or parsed.username or parsed.password
            or (port is not None and not 0 < port < 65536) or not _PATH.fullmatch(path)):
        raise ValueError(
            f"DMQ_PUBLIC_URL: {value!r} is not http(s)://host[:port][/path] (a path of "
            "plain segments, {region} for the queue's region, no query).")
    return value.rstrip("/")
