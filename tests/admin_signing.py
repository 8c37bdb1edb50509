"""SigV4 signing for the tests, in one place.

`sign` signs a request as botocore signs it (in its headers, or presigned in its query), for
a real HTTP server or for the in-process app; `admin_call` calls an admin route of
chalice.test.Client signed as `dmq` signs it (SigV4 for execute-api); `client` is boto3's
client with chosen credentials, served in process."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import boto3
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials

HOST = "dmq.test"
ENDPOINT = f"http://{HOST}"
REGION = "us-east-1"
# In the open mode any key that names no other account (12 digits) is the admin.
ADMIN_KEY, ADMIN_SECRET = "admin-key", "admin-secret"


@dataclass(frozen=True)
class Signed:
    """A signed request: its URL (with the signature in its query when presigned) and its
    headers, Host included (the in-process app sees no other host than the one signed)."""

    url: str
    headers: dict[str, str]

    @property
    def target(self) -> str:
        """The path and query, as the request line and chalice.test.Client take them."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def sign(method: str, url: str, body: bytes = b"", headers: Mapping[str, str] | None = None,
         *, key: str = ADMIN_KEY, secret: str = ADMIN_SECRET, service: str = "execute-api",
         region: str = REGION, when: datetime.datetime | None = None,
         presign_s: int | None = None) -> Signed:
    """`method url` with these headers and body, signed with SigV4 by botocore's signer: in
    its headers, or presigned for `presign_s` seconds. Signed at `when` (naive UTC), else
    now; only a given `when` patches botocore's clock, so signing from threads is safe."""
    request = AWSRequest(method=method, url=url, data=body,
                         headers={"Host": urlsplit(url).netloc, **(headers or {})})
    credentials = Credentials(key, secret)
    signer = (SigV4QueryAuth(credentials, service, region, expires=presign_s)
              if presign_s is not None else SigV4Auth(credentials, service, region))
    clock = (mock.patch("botocore.auth.get_current_datetime", return_value=when)
             if when is not None else nullcontext())
    with clock:
        signer.add_auth(request)
    return Signed(str(request.url), {k: v.decode() if isinstance(v, bytes) else v
                                    for k, v in request.headers.items()})


def admin_call(dmq: Any, method: str, path: str, body: bytes = b"", *, key: str = ADMIN_KEY,
               secret: str = ADMIN_SECRET, region: str = REGION) -> Any:
    """Call an admin route of chalice.test.Client signed as `dmq` signs it: SigV4 for
    execute-api, a JSON body (when there is one); by default with a key that is an admin in
    the open mode."""
    signed = sign(method, ENDPOINT + path, body,
                  {"Content-Type": "application/json"} if body else None,
                  key=key, secret=secret, region=region)
    return dmq.http.request(method, path, headers=signed.headers, body=body)


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


def client(dmq: Any, key: str, secret: str, service: str = "sqs") -> Any:
    """boto3's client (no retries) with these credentials, served in process by the app."""
    made = boto3.client(service, endpoint_url=ENDPOINT, region_name=REGION,
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
