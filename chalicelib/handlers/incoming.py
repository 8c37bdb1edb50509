"""What the handlers read of a Chalice request: its query pairs, body, connection and id,
and the request SigV4 verification reads (built here, and only here)."""

from __future__ import annotations

from typing import Any

from chalice.app import Request

from chalicelib.frontend import transport
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.settings import Settings


def query_pairs(request: Request) -> list[tuple[str, str]]:
    """The query string's pairs, every value of a repeated name included."""
    query = request.query_params
    return [(k, v) for k in query for v in query.getlist(k)] if query else []


def raw_body(request: Request) -> bytes | None:
    """The body's bytes, as the client sent them."""
    return request.raw_body if isinstance(request.raw_body, bytes) else None


def headers_of(request: Request) -> dict[str, str]:
    """The headers, their names in lower case."""
    return {k.lower(): v for k, v in request.headers.items()}


def context_of(request: Request) -> dict[str, Any]:
    """API Gateway's request context (empty when there is none)."""
    return request.context if isinstance(request.context, dict) else {}


def signed_request(request: Request, path: str) -> SignedRequest:
    """What SigV4 verification reads of a request: the path as the client sent it (API
    Gateway's full path, stage included, when there is one; else `path`)."""
    sent_path = context_of(request).get("path")
    return SignedRequest(method=request.method,
                         path=sent_path if isinstance(sent_path, str) else path,
                         query=query_pairs(request), headers=headers_of(request),
                         body=raw_body(request) or b"")


def transport_of(request: Request, settings: Settings) -> transport.Transport:
    """What the request's connection really is (TLS or not, the client's address):
    forwarded headers count only from a trusted proxy (chalicelib/frontend/transport.py)."""
    return transport.transport_of(headers_of(request), context_of(request),
                                  settings.on_lambda, settings.trusted_proxies)


def request_id(request: Request, lambda_context: Any) -> str:
    """API Gateway's id of the request (Lambda's when there is no gateway context)."""
    found = context_of(request).get("requestId")
    return str(found or getattr(lambda_context, "aws_request_id", "") or "")


def json_object(request: Request) -> dict[str, Any] | None:
    """The body's JSON object; None when it is absent, malformed or not an object."""
    try:
        body = request.json_body
    except Exception:  # noqa: BLE001 - a malformed body is reported as a missing field
        return None
    return body if isinstance(body, dict) else None
