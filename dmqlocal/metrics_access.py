"""`GET /metrics` and who may read it: every tenant's account ids and queue names are in it.

- Open mode (`DMQ_AUTH=open`, the local default) without `DMQ_METRICS_TOKEN`: anyone, as
  any request is served in that mode.
- Otherwise a credential: `Authorization: Bearer <DMQ_METRICS_TOKEN>` (compared in
  constant time), or, in the required mode, an admin's access key, either HTTP Basic
  (key id and secret, as the console signs in) or SigV4 for `execute-api` (as the admin
  API is signed). Failed Basic and bearer attempts count towards the sign-in limits
  (`chalicelib/service/sign_in_limits.py`), per key (or token) and client address.

Refusals: 401 `NotAuthorized` (with `WWW-Authenticate`), 403 `AccessDenied` (a key that
is not an admin's), 429 `TooManyRequests` (with `Retry-After`). The route is added to the
app by the local runner only: a deployed stage has no `/metrics`.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from chalice import Chalice, Response
from chalice.app import Request

from chalicelib.frontend import admin_auth, transport
from chalicelib.frontend.console import gate
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.runtime import Runtime
from dmqlocal.metrics import PATH, MetricsEndpoint

CHALLENGE = 'Basic realm="DMQ metrics", charset="UTF-8", Bearer realm="DMQ metrics"'
TOKEN_KEY = "(metrics bearer token)"  # the name bearer failures are counted under


class _Target:
    """What the route serves (the latest runner's; one app serves one runner)."""

    runtime: Runtime | None = None
    endpoint: MetricsEndpoint | None = None


def _refusal(status: int, code: str, message: str,
             headers: Mapping[str, str] | None = None) -> Response:
    return Response(body={"code": code, "message": message}, status_code=status,
                    headers={"Content-Type": "application/json", **(headers or {})})


def _unauthorized(retry_after_s: int = 0) -> Response:
    if retry_after_s:
        return _refusal(429, "TooManyRequests", "Too many failed attempts with this "
                        f"credential or from this address: try again in {retry_after_s} s.",
                        {"Retry-After": str(retry_after_s)})
    return _refusal(401, "NotAuthorized", "GET /metrics needs a credential: "
                    "Authorization: Bearer <DMQ_METRICS_TOKEN>, or an admin access key "
                    "(HTTP Basic, or SigV4 for execute-api).", {"WWW-Authenticate": CHALLENGE})


def _bearer(runtime: Runtime, given: str, client: str) -> Response | None:
    token = runtime.settings.metrics_token
    limits = runtime.sign_in_limits
    wait = limits.retry_after(TOKEN_KEY, client)
    if wait:
        return _unauthorized(wait)
    if token and hmac.compare_digest(given.strip().encode(), token.encode()):
        limits.succeeded(TOKEN_KEY, client)
        return None
    limits.failed(TOKEN_KEY, client)
    return _unauthorized(limits.retry_after(TOKEN_KEY, client))


def _basic(runtime: Runtime, header: str, client: str) -> Response | None:
    signed = gate.sign_in(header, client, runtime.identities().check_secret,
                          runtime.sign_in_limits)
    if signed.user is None:
        return _unauthorized(signed.retry_after_s)
    if not signed.user.admin:
        return _refusal(403, "AccessDenied", f"The key {signed.user.access_key_id} is not "
                        "an admin's: the metrics name every account's queues.")
    return None


def _sigv4(runtime: Runtime, request: Request) -> Response | None:
    query = request.query_params
    pairs = [(k, v) for k in query for v in query.getlist(k)] if query else []
    body = request.raw_body if isinstance(request.raw_body, bytes) else b""
    signed = SignedRequest(request.method, PATH, pairs,
                           {k.lower(): v for k, v in request.headers.items()}, body)
    try:
        admin_auth.authenticate_admin(runtime.identities(), signed)
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        error = to_sqs_error(exc)
        return _refusal(error.status, error.code, error.message)
    return None


def refusal(runtime: Runtime, request: Request) -> Response | None:
    """None when the request may read the metrics, else the answer that refuses it."""
    settings = runtime.settings
    if settings.auth != "required" and not settings.metrics_token:
        return None
    headers = {k.lower(): v for k, v in request.headers.items()}
    context = request.context if isinstance(request.context, dict) else {}
    client = transport.transport_of(headers, context, settings.on_lambda,
                                    settings.trusted_proxies).client
    header = headers.get("authorization", "")
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() == "bearer":
        return _bearer(runtime, rest, client)
    if settings.auth != "required":  # open mode: only the token counts
        return _unauthorized()
    if scheme.lower() == "basic":
        return _basic(runtime, header, client)
    if header or "x-amz-signature" in {k.lower() for k in (request.query_params or {})}:
        return _sigv4(runtime, request)
    return _unauthorized()


def serve(request: Request) -> Response:
    """The route: refused, or the exposition."""
    runtime, endpoint = _Target.runtime, _Target.endpoint
    assert runtime is not None and endpoint is not None
    refused = refusal(runtime, request)
    if refused is not None:
        return refused
    accepted = {k.lower(): v for k, v in request.headers.items()}.get("accept-encoding", "")
    if "gzip" in accepted.lower():  # bytes: the local server sends them as they are
        status, headers, body = endpoint.respond(gzipped=True)
        return Response(body=body, status_code=status, headers=dict(headers))
    status, headers, body = endpoint.respond()
    return Response(body=body.decode("utf-8"), status_code=status, headers=dict(headers))


def install(app: Chalice, runtime: Runtime) -> MetricsEndpoint:
    """Add `GET /metrics` to the app (once; later calls only retarget it)."""
    _Target.runtime, _Target.endpoint = runtime, MetricsEndpoint(runtime)
    if "GET" not in app.routes.get(PATH, {}):

        def metrics() -> Response:
            """The local server's metrics, in the Prometheus text format."""
            request = app.current_request
            assert request is not None
            return serve(request)

        app.route(PATH, methods=["GET"])(metrics)
    return _Target.endpoint
