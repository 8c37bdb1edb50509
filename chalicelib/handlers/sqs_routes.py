"""The SQS protocol routes: every action, in the AWS JSON 1.0 protocol or the Query
protocol, sent to `/` or to a queue's URL. Each protocol answers its errors itself
(`json_protocol.error_response`, `query_protocol.error_response`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from chalice import Blueprint, Response
from chalice.app import Request

from chalicelib import observability
from chalicelib.frontend import browser, json_protocol, query_protocol
from chalicelib.frontend.context import region_from_headers
from chalicelib.frontend.json_protocol import HttpResponse
from chalicelib.frontend.refusals import refusal
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.handlers.container import runtime
from chalicelib.handlers.incoming import (
    query_pairs,
    raw_body,
    request_id,
    signed_request,
    transport_of,
)
from chalicelib.service.exceptions import RateThrottledError
from chalicelib.service.identity import Caller

blueprint = Blueprint(__name__)

SQS_CONTENT_TYPES = [
    json_protocol.CONTENT_TYPE,
    "application/json",
    "application/x-www-form-urlencoded",
    "text/plain",
]


@blueprint.route("/", methods=["POST", "GET"], content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs() -> Response:
    """Every SQS action, in the AWS JSON 1.0 protocol or the Query protocol; a browser's
    bare `GET /` is sent to the console."""
    request = blueprint.current_request
    redirect = browser.console_redirect(request.method, dict(request.headers),
                                        query_pairs(request))
    if redirect is not None:
        return Response(body='<a href="console">DMQ console</a>', status_code=302,
                        headers=redirect)
    return _serve_sqs("/")


@blueprint.route("/{account}/{name}", methods=["POST", "GET"], content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs_queue(account: str, name: str) -> Response:
    """SQS actions sent to a queue's URL (the Query protocol's way of naming the queue)."""
    return _serve_sqs(f"/{account}/{name}")


@blueprint.route("/queue/{region}/{account}/{name}", methods=["POST", "GET"],
                 content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs_queue_path_style(region: str, account: str, name: str) -> Response:
    """SQS actions sent to a queue's URL in LocalStack's path style."""
    return _serve_sqs(f"/queue/{region}/{account}/{name}")


def _serve_sqs(path: str) -> Response:
    request = blueprint.current_request
    query_request = _query_request(request, path)
    # The request's log lines are named by the protocol adapter, from its one parse.
    with observability.request_scope({"account": runtime.settings.account_id,
                                      "request_id": request_id(request,
                                                               blueprint.lambda_context)}), \
            contextlib.ExitStack() as admitted:
        signed = signed_request(request, path)
        try:  # the front door: verified, and its account's share and rate checked
            ticket = admitted.enter_context(runtime.admission().admitted(
                signed, region_from_headers(signed.headers, "")))
        except RateThrottledError as exc:
            result = _refused(request, query_request, signed, exc)
        else:
            result = _served(request, query_request, ticket.authenticate)
        observability.request_served(result.status, result.headers.get("x-amzn-RequestId", ""))
    headers: dict[str, str | list[str]] = dict(result.headers)
    return Response(body=result.body, status_code=result.status, headers=headers)


def _query_request(request: Request, path: str) -> query_protocol.QueryRequest | None:
    """The request as the Query protocol reads it; None for a JSON 1.0 request."""
    pairs = query_pairs(request)
    if not query_protocol.is_query(request.method, request.headers, dict(pairs)):
        return None
    return query_protocol.QueryRequest(path, pairs, dict(request.headers), raw_body(request))


def _refused(request: Request, query_request: query_protocol.QueryRequest | None,
             signed: SignedRequest, exc: RateThrottledError) -> HttpResponse:
    """A request the front door throttled, answered in its protocol's error shape."""
    account = runtime.settings.account_id
    keys = (query_protocol.log_keys(query_request, account) if query_request is not None
            else observability.request_keys(request.headers, raw_body(request), account))
    observability.name_request(keys.get("action", ""), keys.get("account", ""),
                               keys.get("queue"))
    return refusal(exc, request.method, signed.headers, dict(signed.query))


def _served(request: Request, query_request: query_protocol.QueryRequest | None,
            authenticate: Callable[[], Caller]) -> HttpResponse:
    """An admitted request, served by its protocol's adapter."""
    connection = transport_of(request, runtime.settings)
    if query_request is not None:
        return query_protocol.handle(runtime.services_for_request, query_request,
                                     runtime.meter(), authenticate, connection.secure,
                                     connection.host)
    return json_protocol.handle(runtime.services_for_request, dict(request.headers),
                                raw_body(request), runtime.meter(), authenticate,
                                connection.secure, connection.host)
