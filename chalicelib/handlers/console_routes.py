"""The web console (`/console/...`): HTML pages behind HTTP Basic auth, served by
chalicelib/frontend/console/, which answers its own errors as pages."""

from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.frontend.console import web
from chalicelib.handlers.container import runtime
from chalicelib.handlers.incoming import context_of, headers_of, raw_body, transport_of
from chalicelib.regions import admin_api as admin_regions
from chalicelib.service import bulk_counts

blueprint = Blueprint(__name__)
CONSOLE_FORM = ["application/x-www-form-urlencoded"]

console = web.Console(
    services=runtime.services_for,
    regions=lambda: admin_regions.regions_view(runtime),
    check_secret=lambda key_id, secret: runtime.identities().check_secret(key_id, secret),
    csrf_secret=runtime.console_key,
    clock=lambda: runtime.clock,
    limits=lambda: runtime.sign_in_limits,
    bulk_counts=lambda services, queues: bulk_counts.counts_of(
        queues, runtime.backend(services.region).stores, runtime.clock.now_ms(),
        services.messages.counts, services.messages.purged),
)
# The usage meter counts each request into the console's throughput plots too.
runtime.listen_to_usage(console.count_request)


def _console_request() -> web.WebRequest:
    request = blueprint.current_request
    query = request.query_params
    context = context_of(request)
    stage, path = str(context.get("stage") or ""), str(context.get("path") or "")
    prefix = f"/{stage}" if stage and path.startswith(f"/{stage}/") else ""
    headers = headers_of(request)
    connection = transport_of(request, runtime.settings)
    return web.WebRequest(
        method=request.method, headers=headers,
        query={k: query[k] for k in query} if query else {}, body=raw_body(request) or b"",
        prefix=prefix,
        origin=f"{connection.scheme}://{headers.get('host', '')}", client=connection.client)


def _console_page(page: web.Page) -> Response:
    headers: dict[str, str | list[str]] = dict(page.headers)
    return Response(body=page.body, status_code=page.status, headers=headers)


@blueprint.route("/console", methods=["GET"])
def console_queues() -> Response:
    """Console: every queue with live counts, depth and throughput plots."""
    return _console_page(console.queues(_console_request()))


@blueprint.route("/console/live", methods=["GET"])
def console_queues_live() -> Response:
    """Console: the queue list's live part (counts and plots), for the page's refresh."""
    return _console_page(console.queues(_console_request(), live=True))


@blueprint.route("/console/regions", methods=["GET"])
def console_regions() -> Response:
    """Console: regions, heartbeats and replication lag."""
    return _console_page(console.regions(_console_request()))


@blueprint.route("/console/static/{name}", methods=["GET"])
def console_static(name: str) -> Response:
    """Console: its stylesheet and script."""
    return _console_page(console.static(name))


@blueprint.route("/console/queues/{account}/{name}", methods=["GET"])
def console_queue(account: str, name: str) -> Response:
    """Console: a queue's counts, plots, peeked messages and forms."""
    return _console_page(console.queue(_console_request(), account, name))


@blueprint.route("/console/queues/{account}/{name}/live", methods=["GET"])
def console_queue_live(account: str, name: str) -> Response:
    """Console: a queue page's live part (counts, plots, redrive tasks)."""
    return _console_page(console.queue(_console_request(), account, name, live=True))


@blueprint.route("/console/queues/{account}/{name}/send", methods=["POST"],
                 content_types=CONSOLE_FORM)
def console_send(account: str, name: str) -> Response:
    """Console: send a message (the send form)."""
    return _console_page(console.send(_console_request(), account, name))


@blueprint.route("/console/queues/{account}/{name}/purge", methods=["POST"],
                 content_types=CONSOLE_FORM)
def console_purge(account: str, name: str) -> Response:
    """Console: purge the queue (the confirmed purge form)."""
    return _console_page(console.purge(_console_request(), account, name))


@blueprint.route("/console/queues/{account}/{name}/redrive", methods=["POST"],
                 content_types=CONSOLE_FORM)
def console_redrive(account: str, name: str) -> Response:
    """Console: start a dead-letter redrive (StartMessageMoveTask)."""
    return _console_page(console.redrive(_console_request(), account, name))


@blueprint.route("/console/queues/{account}/{name}/cancel", methods=["POST"],
                 content_types=CONSOLE_FORM)
def console_cancel(account: str, name: str) -> Response:
    """Console: cancel a running redrive (CancelMessageMoveTask)."""
    return _console_page(console.cancel(_console_request(), account, name))
