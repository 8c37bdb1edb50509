"""Admin API requests signed as `dmqlocal/admin.py` signs them (SigV4 for execute-api)."""

from __future__ import annotations

from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HOST = "dmq.test"


def admin_headers(method: str, path: str, body: bytes = b"", key: str = "admin-key",
                  secret: str = "admin-secret", host: str = HOST,
                  region: str = "us-east-1") -> dict[str, str]:
    """The headers of a signed admin request (any key acts as the admin in open mode)."""
    request = AWSRequest(method=method, url=f"http://{host}{path}", data=body,
                         headers={"Content-Type": "application/json"} if body else {})
    SigV4Auth(Credentials(key, secret), "execute-api", region).add_auth(request)
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
    headers["Host"] = host
    return headers


def admin_call(dmq: Any, method: str, path: str, body: bytes = b"", **sign: str) -> Any:
    """Call an admin route of chalice.test.Client, signed."""
    return dmq.http.request(method, path, headers=admin_headers(method, path, body, **sign),
                            body=body)
