"""Signed requests for the in-process app: admin API requests signed as `dmqlocal/admin.py`
signs them (SigV4 for execute-api), and boto3 clients with chosen credentials."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials

ENDPOINT = "http://dmq.test"

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


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Any:
        yield self._body


def client(dmq: Any, key: str, secret: str, service: str = "sqs") -> Any:
    """boto3's client (no retries) with these credentials, served in process by the app."""
    made = boto3.client(service, endpoint_url=ENDPOINT, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=Config(retries={"total_max_attempts": 1}))

    def serve(request: Any, **kwargs: Any) -> AWSResponse:
        path = request.url[len(ENDPOINT):] or "/"
        headers = {k: v.decode() if isinstance(v, bytes) else v
                   for k, v in request.headers.items()}
        headers["Host"] = HOST
        result = dmq.http.request(request.method, path, headers=headers,
                                  body=request.body or b"")
        return AWSResponse(request.url, result.status_code, result.headers, _Raw(result.body))

    made.meta.events.register_first(f"before-send.{service}", serve)
    return made


class SignedHttp:
    """`chalice.test.Client.http` for admin routes: each request signed as `dmq` signs it
    (SigV4 for execute-api, a key that is an admin in open mode)."""

    def __init__(self, dmq: Any) -> None:
        self._dmq = dmq

    def request(self, method: str, path: str, body: bytes | str = b"",
                headers: dict[str, str] | None = None) -> Any:
        data = body.encode() if isinstance(body, str) else body
        return self._dmq.http.request(
            method, path, body=data, headers={**admin_headers(method, path, data),
                                              **(headers or {})})

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)
