"""AWS JSON 1.0: `POST /` with `X-Amz-Target: AmazonSQS.<Action>`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from chalicelib import observability
from chalicelib.domain.unique_ids import random_uuid
from chalicelib.frontend.context import context_from_headers, region_from_headers
from chalicelib.frontend.dispatch import dispatch
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.json_input import decode_object
from chalicelib.frontend.params import Params
from chalicelib.frontend.queue_urls import named_queue, services_for_queue
from chalicelib.frontend.routing import route
from chalicelib.frontend.services import Services
from chalicelib.service.exceptions import InvalidActionError, SqsError
from chalicelib.service.identity import Caller
from chalicelib.usage.metering import OK, outcome_of, payload_bytes, queue_named, queue_of

CONTENT_TYPE = "application/x-amz-json-1.0"
TARGET_PREFIX = "AmazonSQS."

logger = logging.getLogger("dmq.frontend")


@dataclass(frozen=True)
class HttpResponse:
    """What goes back over HTTP."""

    status: int
    headers: dict[str, str]
    body: str


def _headers(request_id: str) -> dict[str, str]:
    return {"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": request_id}


def error_response(error: SqsError, request_id: str) -> HttpResponse:
    """An SQS JSON error, with the legacy code header botocore maps to exception classes."""
    headers = _headers(request_id)
    fault = "Sender" if error.sender_fault else "Receiver"
    headers["x-amzn-query-error"] = f"{error.legacy_code};{fault}"
    body = {"__type": f"com.amazonaws.sqs#{error.type_name}", "message": error.message}
    return HttpResponse(error.status, headers, json.dumps(body))


def _action(headers: Mapping[str, str]) -> str:
    target = headers.get("x-amz-target", "")
    if not target.startswith(TARGET_PREFIX):
        raise InvalidActionError("Missing or invalid X-Amz-Target header.")
    return target[len(TARGET_PREFIX):]


class Meter(Protocol):
    """Counts requests for the usage records."""

    def record(self, account: str, queue: str, action: str, payload_bytes: int,
               outcome: str = OK) -> None: ...


def handle(
    services_for: Callable[[str], Services], headers: Mapping[str, str], body: bytes | None,
    meter: Meter | None = None, authenticate: Callable[[], Caller] | None = None,
    secure: bool = False, host: str = "",
) -> HttpResponse:
    """Serve one request: authenticate, parse, dispatch, serialise; every failure is an
    SQS error. `secure`: the request came over TLS (its transport says so, not a header);
    `host`: the host a trusted proxy says the client used.

    Every request that names an action is metered against the caller's account, failed
    and refused ones included (SQS bills them), with its outcome.
    """
    request_id = random_uuid()
    lowered = {k.lower(): v for k, v in headers.items()}
    action, params, result, account, queue = "", Params({}), None, "", None
    try:
        caller = authenticate() if authenticate is not None else None
        account = caller.account if caller is not None else ""
        action = _action(lowered)
        params = Params(decode_object(body))
        target = named_queue(params.raw("QueueUrl"))  # the one parse of its QueueUrl
        services = services_for_queue(
            services_for, services_for(region_from_headers(lowered, "")), target)
        context = context_from_headers(lowered, services.settings.account_id, services.region,
                                       caller, secure, target, services.settings.public_url,
                                       host, services.settings.region)
        account = context.account
        queue = queue_named(params.data, context.queue_parts_or_none())
        routed, context = route(services_for, services, action, context)
        result = dispatch(action, routed, context, params)
    except Exception as exc:  # noqa: BLE001 - every error becomes an SQS error response
        error = to_sqs_error(exc)
        observability.name_request(action, account, queue)
        meter_request(meter, account, action, params, None, outcome_of(error), queue)
        return error_response(error, request_id)
    observability.name_request(action, account, queue)
    meter_request(meter, account, action, params, result, queue=queue)
    return HttpResponse(200, _headers(request_id), json.dumps(result))


def meter_request(
    meter: Meter | None, caller: str, action: str, params: Params, result: Any,
    outcome: str = OK, queue: str | None = None,
) -> None:
    """Meter a served request; a metering fault is logged, never the request's error.
    Its per-queue metrics are counted too (`result` is None when it failed). `caller` is
    the caller's account: "" when the request was not authenticated, which is in no
    account's usage. `queue`: the queue it names, when the adapter parsed it already."""
    if not action:
        return
    try:
        queue = queue_of(params.data) if queue is None else queue
        observability.record_request(caller, queue, action, result, failed=result is None)
        if meter is not None and caller:
            _record(meter, caller, action, params, result, outcome, queue)
    except Exception:  # usage records must never fail a served request
        logger.exception("usage metering failed for %s; the request is served", action)


def _record(meter: Meter, caller: str, action: str, params: Params, result: Any,
            outcome: str, queue: str) -> None:
    """Count a request against the caller's account, never the account its QueueUrl
    names (a refused call on another account's queue is the caller's usage); the queue is
    the one it named (`<account>/<name>`, a bare name in the caller's account)."""
    if queue and "/" not in queue:
        queue = f"{caller}/{queue}"
    meter.record(caller, queue, action,
                 payload_bytes(action, params.data, result if isinstance(result, dict) else None),
                 outcome)
