"""SQS's Query protocol: `Action=...&Version=2012-11-05`, form-encoded or in the query
string, at `/` or at a queue's URL; answers in XML, or in JSON to a request that accepts
`application/json` (`query_json`), as SQS does.

One more adapter beside `json_protocol`: the form is decoded into the JSON protocol's
parameters (`query_input`), the same action table serves it, and the result or the error
(mapped by `errors.to_sqs_error`, the one place) is written as XML (`query_output`) or
JSON (`query_json`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from botocore.model import OperationModel

from chalicelib import observability
from chalicelib.domain.unique_ids import random_uuid
from chalicelib.frontend import query_input, query_json, query_output
from chalicelib.frontend.context import (
    base_url_from_headers,
    context_from_headers,
    region_from_headers,
)
from chalicelib.frontend.dispatch import dispatch
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.json_protocol import HttpResponse, Meter, meter_request
from chalicelib.frontend.params import Params
from chalicelib.frontend.query_model import operation
from chalicelib.frontend.query_names import QUERY_VERSION
from chalicelib.frontend.queue_urls import (
    QueueTarget,
    named_queue,
    queue_of_request,
    services_for_queue,
    target_of_path,
)
from chalicelib.frontend.routing import route
from chalicelib.frontend.services import Services
from chalicelib.frontend.sts import default_caller, is_sts, sts_response
from chalicelib.service.exceptions import InvalidActionError, SqsError
from chalicelib.service.identity import Caller
from chalicelib.usage.metering import outcome_of, queue_named

CONTENT_TYPE = "text/xml"
FORM_TYPE = "application/x-www-form-urlencoded"
# Actions of the account, not of a queue: SQS refuses them at a queue's URL.
ACCOUNT_ACTIONS = frozenset({"CreateQueue", "ListQueues"})
# The Query protocol words this error as SQS's Query answers do.
_QUERY_MESSAGES = {
    "The specified queue does not exist.":
        "The specified queue does not exist for this wsdl version.",
}


class UnknownOperationError(SqsError):
    """The request names no action: SQS answers 404 `<UnknownOperationException/>`."""

    code = "UnknownOperationException"
    status = 404


class NoSuchVersionError(SqsError):
    """The request names an API version SQS does not have."""

    code = "NoSuchVersion"


class MalformedQueryStringError(SqsError):
    """The form or query string is not percent-encoded UTF-8."""

    code = "MalformedQueryString"


@dataclass(frozen=True)
class QueryRequest:
    """What the Query adapter reads of an HTTP request."""

    path: str
    query: list[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes | None


def is_query(method: str, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """True when a request speaks Query: a GET, a form body, or an Action parameter
    (an AWS JSON request carries none of these)."""
    return method == "GET" or _content_type(headers) == FORM_TYPE or "Action" in query


def _content_type(headers: Mapping[str, str]) -> str:
    lowered = {k.lower(): v for k, v in headers.items()}
    return lowered.get("content-type", "").split(";")[0].strip().lower()


def form_pairs(request: QueryRequest) -> list[tuple[str, str]]:
    """The body's parameters (when it is a form), then the query string's (the first of
    a name wins)."""
    pairs: list[tuple[str, str]] = []
    if request.body and _content_type(request.headers) in (FORM_TYPE, ""):
        try:
            text = request.body.decode("utf-8")
            pairs = parse_qsl(text, keep_blank_values=True, errors="strict")
        except (UnicodeDecodeError, ValueError) as exc:
            raise MalformedQueryStringError(
                "The request body is not percent-encoded UTF-8 form data.") from exc
    return pairs + request.query


def log_keys(request: QueryRequest, default_account: str) -> dict[str, str]:
    """Action, account and queue of a Query request for the request log, read leniently
    (bad input is `handle`'s to reject; here it only leaves a key empty)."""
    text = (request.body or b"").decode("utf-8", "replace")
    form: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=True) + request.query:
        form.setdefault(key, value)
    named = queue_of_request(form.get("QueueUrl") or request.path, form.get("QueueName"),
                             default_account)
    account, _, queue = named.rpartition("/")
    return {"action": form.get("Action", ""), "account": account or default_account,
            "queue": queue}


def handle(
    services_for: Callable[[str], Services], request: QueryRequest, meter: Meter | None = None,
    authenticate: Callable[[], Caller] | None = None, secure: bool = False, host: str = "",
) -> HttpResponse:
    """Serve one Query request: decode, dispatch, write XML; every failure is an SQS
    error in XML. Metered as the JSON protocol meters; `secure` as it takes it."""
    request_id = random_uuid()
    lowered = {k.lower(): v for k, v in request.headers.items()}
    as_json = query_json.wants_json(lowered)
    action, params, account, queue = "", Params({}), "", None
    try:
        caller = authenticate() if authenticate is not None else None
        account = caller.account if caller is not None else ""
        pairs = form_pairs(request)
        signed_region = region_from_headers(lowered, "", dict(request.query))
        if is_sts(pairs):  # STS GetCallerIdentity, answered on the same endpoint
            services = services_for(signed_region)
            caller = caller or default_caller(services.settings.account_id)
            return sts_response(pairs, caller, request_id)
        action, model, params, target = _parse(
            pairs, base_url_from_headers(lowered, secure, host), request.path)
        services = services_for_queue(
            services_for, services_for(signed_region), target)
        context = context_from_headers(lowered, services.settings.account_id, services.region,
                                       caller, secure, target, services.settings.public_url,
                                       host, services.settings.region)
        account = context.account
        queue = queue_named(params.data, context.queue_parts_or_none())
        routed, context = route(services_for, services, action, context)
        result = dispatch(action, routed, context, params)
        writer = query_json if as_json else query_output
        body = writer.response(model, result, request_id)
    except Exception as exc:  # noqa: BLE001 - every error becomes an SQS error response
        error = to_sqs_error(exc)
        observability.name_request(action, account, queue)
        meter_request(meter, account, action, params, None, outcome_of(error), queue)
        return error_response(error, request_id, as_json)
    observability.name_request(action, account, queue)
    meter_request(meter, account, action, params, result, queue=queue)
    return HttpResponse(200, _headers(request_id, as_json), body)


def _parse(
    pairs: list[tuple[str, str]], base_url: str, path: str,
) -> tuple[str, OperationModel, Params, QueueTarget | None]:
    """The action, its model, its parameters and the queue its QueueUrl names (parsed
    once), the queue URL taken from the path when the form names none. An action SQS
    does not have, or one of the account's at a queue's URL, is InvalidAction (an action
    SQS has but DMQ does not serve is refused by the action table, with the same error)."""
    tree = query_input.form_tree(pairs)
    action = tree.get("Action")
    if not isinstance(action, str) or not action:
        raise UnknownOperationError("The request names no Action.")
    version = tree.get("Version")
    if isinstance(version, str) and version != QUERY_VERSION:
        raise NoSuchVersionError(
            f"The requested version ({version}) of service AmazonSQS does not exist.")
    at_queue = target_of_path(path)  # a request sent to a queue's URL
    model = operation(action)
    if model is None or (at_queue is not None and action in ACCOUNT_ACTIONS):
        raise InvalidActionError(f"The action {action} is not valid for this endpoint.")
    data = query_input.decode(model.input_shape, tree)
    if (at_queue is not None and model.input_shape is not None
            and "QueueUrl" in model.input_shape.members and data.get("QueueUrl") is None):
        data["QueueUrl"] = f"{base_url}/{path.split('?', 1)[0].strip('/')}"
        # read as a QueueUrl parameter is: a host naming a region names it here too
        return action, model, Params(data), named_queue(data["QueueUrl"]) or at_queue
    return action, model, Params(data), named_queue(data.get("QueueUrl"))


def _headers(request_id: str, as_json: bool = False) -> dict[str, str]:
    content_type = query_json.CONTENT_TYPE if as_json else CONTENT_TYPE
    return {"Content-Type": content_type, "x-amzn-RequestId": request_id}


def error_response(error: SqsError, request_id: str, as_json: bool = False) -> HttpResponse:
    """An SQS Query error: `<ErrorResponse>` (or its JSON, `as_json`) with the legacy code,
    at the error's status (a request without an action gets SQS's bare
    `<UnknownOperationException/>`, in XML whatever it accepts, as SQS answers it)."""
    if isinstance(error, UnknownOperationError):
        return HttpResponse(error.status, _headers(request_id), "<UnknownOperationException/>")
    message = _QUERY_MESSAGES.get(error.message, error.message)
    writer = query_json if as_json else query_output
    return HttpResponse(error.status, _headers(request_id, as_json),
                        writer.error(error, message, request_id))
