"""Every error the local HTTP server sends, in the SQS JSON error shape.

Errors the app itself answers (SQS actions) already have that shape; this module gives it
to the others: the server's own (framing, timeouts, sizes) and those of Chalice's local
gateway (unknown path or method, media type, authorizers, a failing view). Codes follow
AWS's common errors: the HTTP-level ones of AWS JSON services, SQS's where it has one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chalicelib.domain.unique_ids import random_uuid
from chalicelib.frontend.json_protocol import error_response
from chalicelib.service.exceptions import SqsError

MALFORMED = "MalformedHttpRequestException"
# status -> the code of an error that carries no SQS code of its own.
CODES: dict[int, str] = {
    400: MALFORMED,
    401: "NotAuthorized",
    403: "AccessDeniedException",
    404: "UnknownOperationException",
    405: "InvalidAction",
    408: "RequestTimeoutException",
    413: "RequestEntityTooLargeException",
    414: MALFORMED,
    415: "UnsupportedMediaTypeException",
    431: "RequestHeaderFieldsTooLargeException",
    500: "InternalError",
}
Reply = tuple[int, dict[str, str], bytes]


class HttpError(Exception):
    """A request the server refuses before the app sees it; the connection then closes."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or code_for(status)


def code_for(status: int) -> str:
    """The code of an error of this status that names none."""
    return CODES.get(status, MALFORMED if status < 500 else "InternalError")


def sqs_error(status: int, message: str, code: str | None = None) -> Reply:
    """An SQS JSON error: `__type` and `message`, `x-amzn-query-error: <code>;<fault>`."""
    error = SqsError(message)
    error.code = code or code_for(status)
    error.status = status
    error.sender_fault = status < 500
    response = error_response(error, random_uuid())
    return response.status, response.headers, response.body.encode("utf-8")


def is_sqs_error(headers: Mapping[str, Any]) -> bool:
    """True when the response already carries an SQS error shape: the JSON protocol's
    (with its legacy code header) or the Query protocol's XML `<ErrorResponse>`."""
    return any(k.lower() == "x-amzn-query-error"
               or (k.lower() == "content-type" and str(v).startswith("text/xml"))
               for k, v in headers.items())


def reshaped(status: int, headers: Mapping[str, Any], payload: bytes) -> Reply:
    """An error response from the gateway or an admin route, in the SQS shape: its code
    and message are kept when it has them, other headers (such as Allow) too."""
    code, message = _code_and_message(payload)
    out_status, out_headers, body = sqs_error(status, message or _default_message(status),
                                              code)
    kept = {k: str(v) for k, v in headers.items()
            if k.lower() not in ("content-type", "content-length", "x-amzn-errortype")}
    return out_status, {**kept, **out_headers}, body


def _code_and_message(payload: bytes) -> tuple[str | None, str]:
    try:
        data = json.loads(payload) if payload else None
    except ValueError:
        return None, ""
    if not isinstance(data, dict):
        return None, ""
    code = data.get("code")
    message = data.get("message", data.get("Message", ""))
    return (code if isinstance(code, str) and code.isidentifier() else None,
            message if isinstance(message, str) else "")


def _default_message(status: int) -> str:
    return {
        404: "No SQS operation at this path: SQS requests are POST /.",
        405: "This method is not allowed here: SQS requests are POST /.",
    }.get(status, "The request could not be served.")
