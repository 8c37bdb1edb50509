"""DMQ on Chalice: the SQS front end and the back-end stream and schedule handlers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from chalice import Chalice, IAMAuthorizer, Rate, Response
from chalice.app import CloudWatchEvent, DynamoDBEvent, Request

from chalicelib import observability
from chalicelib.backend import maintenance
from chalicelib.frontend import (
    admin,
    admin_auth,
    admin_push,
    browser,
    json_protocol,
    query_protocol,
    transport,
)
from chalicelib.frontend import admin_regions as admin_regions_api
from chalicelib.frontend.context import region_from_headers
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.refusals import refusal
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.runtime import Runtime
from chalicelib.service.exceptions import RateThrottledError
from chalicelib.settings import get_settings

app = Chalice(app_name="dmq")
runtime = Runtime()
observability.configure(get_settings().log_format == "json", get_settings().metrics == "emf",
                        get_settings().log_level)
admins = IAMAuthorizer()

SQS_CONTENT_TYPES = [
    json_protocol.CONTENT_TYPE,
    "application/json",
    "application/x-www-form-urlencoded",
    "text/plain",
]


@app.route("/", methods=["POST", "GET"], content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs() -> Response:
    """Every SQS action, in the AWS JSON 1.0 protocol or the Query protocol; a browser's
    bare `GET /` is sent to the console."""
    request = app.current_request
    query = request.query_params if request is not None else None
    pairs = [(k, v) for k in query for v in query.getlist(k)] if query else []
    redirect = browser.console_redirect(request.method, dict(request.headers), pairs) \
        if request is not None else None
    if redirect is not None:
        return Response(body='<a href="console">DMQ console</a>', status_code=302,
                        headers=redirect)
    return _serve_sqs("/")


@app.route("/{account}/{name}", methods=["POST", "GET"], content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs_queue(account: str, name: str) -> Response:
    """SQS actions sent to a queue's URL (the Query protocol's way of naming the queue)."""
    return _serve_sqs(f"/{account}/{name}")


@app.route("/queue/{region}/{account}/{name}", methods=["POST", "GET"],
           content_types=SQS_CONTENT_TYPES)
@observability.flushed
def sqs_queue_path_style(region: str, account: str, name: str) -> Response:
    """SQS actions sent to a queue's URL in LocalStack's path style."""
    return _serve_sqs(f"/queue/{region}/{account}/{name}")


def _serve_sqs(path: str) -> Response:
    request = app.current_request
    assert request is not None
    body = request.raw_body if isinstance(request.raw_body, bytes) else None
    query = request.query_params
    pairs = [(k, v) for k in query for v in query.getlist(k)] if query else []
    is_query = query_protocol.is_query(request.method, request.headers, dict(pairs))
    query_request = query_protocol.QueryRequest(path, pairs, dict(request.headers), body)
    # The request's log lines are named by the protocol adapter, from its one parse.
    with observability.request_scope({"account": runtime.settings.account_id,
                                      "request_id": _request_id()}), \
            contextlib.ExitStack() as admitted:
        signed = _signed_request(path, pairs, body)
        try:  # the front door: verified, and its account's share and rate checked
            ticket = admitted.enter_context(runtime.admission().admitted(
                signed, region_from_headers(signed.headers, "")))
        except RateThrottledError as exc:
            keys = (query_protocol.log_keys(query_request, runtime.settings.account_id)
                    if is_query else observability.request_keys(
                        request.headers, body, runtime.settings.account_id))
            observability.name_request(keys.get("action", ""), keys.get("account", ""),
                                       keys.get("queue"))
            result = refusal(exc, request.method, signed.headers, dict(pairs))
        else:
            connection = _transport()
            if is_query:
                result = query_protocol.handle(runtime.services_for_request, query_request,
                                               runtime.meter(), ticket.authenticate,
                                               connection.secure, connection.host)
            else:
                result = json_protocol.handle(runtime.services_for_request,
                                              dict(request.headers), body, runtime.meter(),
                                              ticket.authenticate, connection.secure,
                                              connection.host)
        observability.request_served(result.status, result.headers.get("x-amzn-RequestId", ""))
    headers: dict[str, str | list[str]] = dict(result.headers)
    return Response(body=result.body, status_code=result.status, headers=headers)


def _transport() -> transport.Transport:
    """What the current request's connection really is (TLS or not, the client's address):
    forwarded headers count only from a trusted proxy (chalicelib/frontend/transport.py)."""
    request = app.current_request
    assert request is not None
    context = request.context if isinstance(request.context, dict) else {}
    settings = runtime.settings
    return transport.transport_of({k.lower(): v for k, v in request.headers.items()}, context,
                                  settings.on_lambda, settings.trusted_proxies)


def _request_id() -> str:
    """API Gateway's id of the request (Lambda's when there is no gateway context)."""
    request = app.current_request
    context = request.context if request is not None else {}
    found = context.get("requestId") if isinstance(context, dict) else None
    lambda_context = getattr(app, "lambda_context", None)
    return str(found or getattr(lambda_context, "aws_request_id", "") or "")


def _admin(call: Any, *args: Any) -> Response:
    try:
        return Response(body=call(runtime.services_for(), *args), status_code=200)
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        error = to_sqs_error(exc)
        return Response(body={"code": error.code, "message": error.message},
                        status_code=404 if error.code == "QueueDoesNotExist" else error.status)


@app.route("/admin/queues", methods=["GET"], authorizer=admins)
def admin_queues() -> Response:
    """Admin: every queue of every account."""
    return _admin(admin.list_queues)


@app.route("/admin/queues/{account}/{name}", methods=["GET"], authorizer=admins)
def admin_queue(account: str, name: str) -> Response:
    """Admin: one queue's record and counts."""
    return _admin(admin.describe_queue, account, name)


@app.route("/admin/queues/{account}/{name}/messages", methods=["GET"], authorizer=admins)
def admin_messages(account: str, name: str) -> Response:
    """Admin: inspect a queue's oldest messages without receiving them."""
    request = app.current_request
    params = request.query_params if request else None
    limit = (params.get("limit") if params else None) or "10"
    return _admin(admin.peek_messages, account, name, int(limit) if limit.isdigit() else 10)


def _admin_runtime(call: Any, *args: Any) -> Response:
    try:
        return Response(body=call(runtime, *args), status_code=200)
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        error = to_sqs_error(exc)
        return Response(body={"code": error.code, "message": error.message},
                        status_code=error.status)


@app.route("/admin/regions", methods=["GET"], authorizer=admins)
def admin_regions() -> Response:
    """Admin: regions, heartbeats, home queues and replication lag."""
    return _admin_runtime(admin_regions_api.regions_view)


def _body() -> dict[str, Any] | None:
    request = app.current_request
    try:
        body = request.json_body if request else None
    except Exception:  # noqa: BLE001 - a malformed body is reported as a missing field
        return None
    return body if isinstance(body, dict) else None


@app.route("/admin/queues/{account}/{name}/shards", methods=["PUT"], authorizer=admins,
           content_types=["application/json"])
def admin_shards(account: str, name: str) -> Response:
    """Admin (internal cluster manager): scale a queue's shards out or in."""
    return _admin(admin.set_shards, account, name, _body())


@app.route("/admin/queues/{account}/{name}/autoscale", methods=["PUT"], authorizer=admins,
           content_types=["application/json"])
def admin_autoscale(account: str, name: str) -> Response:
    """Admin: pin a queue's shard count, or hand it back to the autoscaler."""
    return _admin(admin.set_autoscale, account, name, _body())


@app.route("/admin/queues/{account}/{name}/split", methods=["POST"], authorizer=admins,
           content_types=["application/json"])
def admin_split(account: str, name: str) -> Response:
    """Admin (external cluster manager): spread a hot queue onto a second cluster."""
    return _admin(admin.split_queue, account, name, _body())


@app.route("/admin/clusters", methods=["GET"], authorizer=admins)
def admin_clusters() -> Response:
    """Admin: every cluster with its capacity, utilization and queues."""
    return _admin(admin.list_clusters)


@app.route("/admin/clusters/{cluster}", methods=["PUT"], authorizer=admins,
           content_types=["application/json"])
def admin_cluster(cluster: str) -> Response:
    """Admin: set a cluster's capacity."""
    return _admin(admin.set_cluster_capacity, cluster, _body())


def _messages_changed(event: DynamoDBEvent) -> None:
    """Replicate the changes to the queues' replica regions; release the S3 bodies of
    messages that were deleted, purged or expired."""
    records = list(event.to_dict().get("Records", []))
    observability.add_count("StreamRecords", len(records))
    runtime.replicator().on_records(records)
    region = records[0].get("awsRegion", "") if records else ""
    backend = runtime.backend(region)
    maintenance.release_bodies(backend.bodies, ((r.event_name, r.old_image) for r in event))


@app.on_dynamodb_record(stream_arn=get_settings().messages_stream_arn)
@observability.flushed
def on_message_change(event: DynamoDBEvent) -> None:
    """The default cluster's messages stream."""
    _messages_changed(event)


def _cluster_handler(name: str) -> Any:
    """A stream handler for another cluster's messages table, named for Lambda."""

    def handler(event: DynamoDBEvent) -> None:
        _messages_changed(event)

    handler.__name__ = handler.__qualname__ = name
    return observability.flushed(handler)


def _cluster_stream_arn(cluster: str) -> str:
    settings = get_settings()
    return settings.messages_stream_arn.replace(
        f"table/{settings.messages_table}/", f"table/{settings.cluster_table(cluster)}/")


# One handler per further cluster (each table has its own stream and event source).
for _cluster in get_settings().clusters[1:]:
    _name = f"on_message_change_{_cluster.replace('-', '_')}"
    globals()[_name] = app.on_dynamodb_record(
        stream_arn=_cluster_stream_arn(_cluster))(_cluster_handler(_name))


def _archive(event: DynamoDBEvent) -> None:
    """Count the batch into its shards' message counts, then write it to the audit
    archive. A failure raises, so the batch is retried: the counts take each record once,
    and a retried batch overwrites its own archive object."""
    records = list(event.to_dict().get("Records", []))
    if records:
        runtime.backend(records[0].get("awsRegion", "")).counters.apply_records(records)
    archiver = runtime.archiver()
    if archiver is not None:
        archiver.write_batch(records)


def _archive_handler(name: str) -> Any:
    def handler(event: DynamoDBEvent) -> None:
        _archive(event)

    handler.__name__ = handler.__qualname__ = name
    return observability.flushed(handler)


# The counts and the archive read each messages stream as a second consumer, apart from
# replication, so that a replica region that is down holds back neither.
# Records wait up to a second for a batch of 500: one count update per queue shard per
# second at most, however busy the queue.
COUNT_WINDOW_S = 1
for _cluster in get_settings().clusters:
    _name = f"archive_messages_{_cluster.replace('-', '_')}"
    globals()[_name] = app.on_dynamodb_record(
        stream_arn=_cluster_stream_arn(_cluster), batch_size=500,
        maximum_batching_window_in_seconds=COUNT_WINDOW_S)(_archive_handler(_name))


@app.on_dynamodb_record(stream_arn=get_settings().queues_stream_arn)
@observability.flushed
def on_queue_change(event: DynamoDBEvent) -> None:
    """Replicate queue records (metadata) to their replica regions."""
    runtime.replicator().on_records(list(event.to_dict().get("Records", [])))


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def region_heartbeat(event: CloudWatchEvent) -> None:
    """The internal cluster manager of each region: heartbeat, failover and rejoin."""
    for region in runtime.settings.local_regions:
        runtime.failover(region).tick()


def _live_local_regions() -> list[str]:
    """The regions this process runs back-end work for (client regions opened by the
    local server included), less those marked down."""
    return [r for r in runtime.served_regions() if runtime.health.up(r)]


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def manage_shards(event: CloudWatchEvent) -> None:
    """The internal cluster manager: forget scaled-in shards once they have drained."""
    for region in _live_local_regions():
        queues = runtime.services_for(region).queues
        for queue in queues.draining_queues():
            if queue.home == region:  # replicas follow the home's metadata
                queues.forget_drained(queue)


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def autoscale_shards(event: CloudWatchEvent) -> None:
    """The external cluster manager: split busy standard queues, merge quiet ones
    (docs/autoscaling.md; the local server runs it every DMQ_AUTOSCALE_INTERVAL_S)."""
    for region in _live_local_regions():
        autoscaler = runtime.services_for(region).autoscaler
        if autoscaler is not None:
            autoscaler.check(region)


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def manage_clusters(event: CloudWatchEvent) -> None:
    """The external cluster manager: record each cluster's utilization (active shards)."""
    for region in _live_local_regions():
        services = runtime.services_for(region)
        services.clusters.record_utilization(services.queues.all_queues())


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def flush_usage(event: CloudWatchEvent) -> None:
    """Write the usage counts held in memory (requests flush them too, when due)."""
    meter = runtime.meter()
    if meter is not None:
        meter.flush()


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def sweep_retention(event: CloudWatchEvent) -> None:
    """Remove messages past their retention period."""
    for region in _live_local_regions():
        backend = runtime.backend(region)
        homed = [q for q in backend.repo.scan_active() if q.home == region]
        maintenance.sweep_expired(backend.stores, homed, backend.clock.now_ms())


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def advance_move_tasks(event: CloudWatchEvent) -> None:
    """Run the message move tasks (dead-letter redrive) a bounded step at a time."""
    for region in _live_local_regions():
        runtime.services_for(region).move_tasks.advance(runtime.settings.move_task_run_s)


# -- Authentication: SigV4 on SQS requests, admin credentials, access keys ------------------
def _signed_request(path: str, pairs: list[tuple[str, str]], body: bytes | None) -> SignedRequest:
    """What SigV4 verification reads of the current request (the path as the client sent
    it: API Gateway's full path, stage included, when there is one)."""
    request = app.current_request
    assert request is not None
    context = request.context if isinstance(request.context, dict) else {}
    sent_path = context.get("path")
    return SignedRequest(
        method=request.method, path=sent_path if isinstance(sent_path, str) else path,
        query=pairs, headers={k.lower(): v for k, v in request.headers.items()},
        body=body or b"")


def _admin_error(exc: Exception) -> Response:
    """A refused admin request: `{"code", "message"}` with API Gateway's error-type header
    (and the legacy code header, so the local server passes the body on as it is)."""
    error = to_sqs_error(exc)
    return Response(body={"code": error.code, "message": error.message},
                    status_code=error.status,
                    headers={"Content-Type": "application/json",
                             "x-amzn-ErrorType": error.code,
                             "x-amzn-query-error": f"{error.code};Sender"})


@app.middleware("http")
def admin_credentials(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """The admin API (`/admin/...`) needs an admin credential, SigV4 for execute-api. A
    deployed stage leaves that to API Gateway's IAM authorizer."""
    if not event.path.startswith("/admin") or runtime.settings.admin_iam_gateway:
        return get_response(event)
    query = event.query_params
    pairs = [(k, v) for k in query for v in query.getlist(k)] if query else []
    sent_path = event.context.get("path") if isinstance(event.context, dict) else None
    body = event.raw_body if isinstance(event.raw_body, bytes) else b""
    signed = SignedRequest(event.method, sent_path if isinstance(sent_path, str) else event.path,
                           pairs, {k.lower(): v for k, v in event.headers.items()}, body)
    try:
        admin_auth.authenticate_admin(runtime.identities(), signed)
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        return _admin_error(exc)
    return get_response(event)


@app.route("/admin/keys", methods=["GET"], authorizer=admins)
def admin_list_keys() -> Response:
    """Admin: every access key (never a secret)."""
    return _admin_runtime(lambda rt: admin_auth.list_keys(rt.identities()))


@app.route("/admin/keys", methods=["POST"], authorizer=admins, content_types=["application/json"])
def admin_create_key() -> Response:
    """Admin: a new access key for an account's root or a named user; the secret is shown
    once."""
    body = _body()
    return _admin_runtime(lambda rt: admin_auth.create_key(rt.identities(), body))


@app.route("/admin/keys/{key_id}/rotate", methods=["POST"], authorizer=admins,
           content_types=["application/json"])
def admin_rotate_key(key_id: str) -> Response:
    """Admin: a new key pair for the same principal (the old key stays until revoked)."""
    return _admin_runtime(lambda rt: admin_auth.rotate_key(rt.identities(), key_id))


@app.route("/admin/keys/{key_id}", methods=["DELETE"], authorizer=admins)
def admin_revoke_key(key_id: str) -> Response:
    """Admin: revoke an access key."""
    return _admin_runtime(lambda rt: admin_auth.revoke_key(rt.identities(), key_id))


# -- Queue metrics: each queue's gauges as CloudWatch metrics (EMF), once a minute -----
@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def emit_queue_gauges(event: CloudWatchEvent) -> None:
    """Visible, in-flight and delayed messages, the oldest message's age and, for
    dead-letter queues, their depth: what the dashboard and alarms in infra/ read."""
    from chalicelib.frontend import queue_metrics

    if not observability.emitting():
        return
    for region in _live_local_regions():
        now_ms = runtime.backend(region).clock.now_ms()
        for g in queue_metrics.read(runtime.services_for(region), region, now_ms):
            gauges = {"ApproximateNumberOfMessagesVisible": g.visible,
                      "ApproximateNumberOfMessagesNotVisible": g.in_flight,
                      "ApproximateNumberOfMessagesDelayed": g.delayed}
            if g.dead_letter_queue:
                gauges["DeadLetterQueueDepth"] = g.visible + g.in_flight + g.delayed
            observability.queue_gauges(g.account, g.queue, gauges, g.oldest_age_s)


# push delivery (docs/push.md): subscriptions through the admin API, delivery by a schedule
# handler on AWS (locally by the local server's delivery loop).
def _push_admin(call: Any, *args: Any) -> Response:
    def with_subscriptions(services: Any, *rest: Any) -> Any:
        return call(runtime.subscriptions(services.region), services, *rest)

    return _admin(with_subscriptions, *args)


@app.route("/admin/queues/{account}/{name}/subscriptions", methods=["GET"], authorizer=admins)
def admin_subscriptions(account: str, name: str) -> Response:
    """Admin: a queue's push subscriptions."""
    return _push_admin(admin_push.list_subscriptions, account, name)


@app.route("/admin/queues/{account}/{name}/subscriptions", methods=["POST"], authorizer=admins,
           content_types=["application/json"])
def admin_subscribe(account: str, name: str) -> Response:
    """Admin: subscribe an HTTP(S) endpoint or a function of the deployment to a queue."""
    return _push_admin(admin_push.create_subscription, account, name, _body())


@app.route("/admin/queues/{account}/{name}/subscriptions/{sub_id}", methods=["DELETE"],
           authorizer=admins)
def admin_unsubscribe(account: str, name: str, sub_id: str) -> Response:
    """Admin: delete a push subscription."""
    return _push_admin(admin_push.delete_subscription, account, name, sub_id)


@app.schedule(Rate(1, unit=Rate.MINUTES))
@observability.flushed
def deliver_push(event: CloudWatchEvent) -> None:
    """Deliver subscribed queues' messages for DMQ_PUSH_RUN_S (0: the local loop does)."""
    regions = _live_local_regions() if runtime.settings.push_run_s > 0 else []
    for region in regions:  # one region per deployment region: they share the run
        runtime.push(region).run(runtime.settings.push_run_s / len(regions))


# console: the web console (HTML behind HTTP Basic auth; chalicelib/frontend/console/)
from chalicelib.frontend.console import web as console_web  # noqa: E402
from chalicelib.service import usage as console_usage  # noqa: E402

console = console_web.Console(
    services=runtime.services_for,
    regions=lambda: admin_regions_api.regions_view(runtime),
    check_secret=lambda key_id, secret: runtime.identities().check_secret(key_id, secret),
    csrf_secret=runtime.console_key,
    clock=lambda: runtime.clock,
    limits=lambda: runtime.sign_in_limits,
)
console_usage.RECORD_HOOKS.append(console.count_request)
CONSOLE_FORM = ["application/x-www-form-urlencoded"]


def _console_request() -> console_web.WebRequest:
    request = app.current_request
    assert request is not None
    query = request.query_params
    context = request.context if isinstance(request.context, dict) else {}
    stage, path = str(context.get("stage") or ""), str(context.get("path") or "")
    prefix = f"/{stage}" if stage and path.startswith(f"/{stage}/") else ""
    body = request.raw_body if isinstance(request.raw_body, bytes) else b""
    headers = {k.lower(): v for k, v in request.headers.items()}
    connection = _transport()
    return console_web.WebRequest(
        method=request.method, headers=headers,
        query={k: query[k] for k in query} if query else {}, body=body, prefix=prefix,
        origin=f"{connection.scheme}://{headers.get('host', '')}", client=connection.client)


def _console_page(page: console_web.Page) -> Response:
    headers: dict[str, str | list[str]] = dict(page.headers)
    return Response(body=page.body, status_code=page.status, headers=headers)


@app.route("/console", methods=["GET"])
def console_queues() -> Response:
    """Console: every queue with live counts, depth and throughput plots."""
    return _console_page(console.queues(_console_request()))


@app.route("/console/live", methods=["GET"])
def console_queues_live() -> Response:
    """Console: the queue list's live part (counts and plots), for the page's refresh."""
    return _console_page(console.queues(_console_request(), live=True))


@app.route("/console/regions", methods=["GET"])
def console_regions() -> Response:
    """Console: regions, heartbeats and replication lag."""
    return _console_page(console.regions(_console_request()))


@app.route("/console/static/{name}", methods=["GET"])
def console_static(name: str) -> Response:
    """Console: its stylesheet and script."""
    return _console_page(console.static(name))


@app.route("/console/queues/{account}/{name}", methods=["GET"])
def console_queue(account: str, name: str) -> Response:
    """Console: a queue's counts, plots, peeked messages and forms."""
    return _console_page(console.queue(_console_request(), account, name))


@app.route("/console/queues/{account}/{name}/live", methods=["GET"])
def console_queue_live(account: str, name: str) -> Response:
    """Console: a queue page's live part (counts, plots, redrive tasks)."""
    return _console_page(console.queue(_console_request(), account, name, live=True))


@app.route("/console/queues/{account}/{name}/send", methods=["POST"], content_types=CONSOLE_FORM)
def console_send(account: str, name: str) -> Response:
    """Console: send a message (the send form)."""
    return _console_page(console.send(_console_request(), account, name))


@app.route("/console/queues/{account}/{name}/purge", methods=["POST"],
           content_types=CONSOLE_FORM)
def console_purge(account: str, name: str) -> Response:
    """Console: purge the queue (the confirmed purge form)."""
    return _console_page(console.purge(_console_request(), account, name))


@app.route("/console/queues/{account}/{name}/redrive", methods=["POST"],
           content_types=CONSOLE_FORM)
def console_redrive(account: str, name: str) -> Response:
    """Console: start a dead-letter redrive (StartMessageMoveTask)."""
    return _console_page(console.redrive(_console_request(), account, name))


@app.route("/console/queues/{account}/{name}/cancel", methods=["POST"],
           content_types=CONSOLE_FORM)
def console_cancel(account: str, name: str) -> Response:
    """Console: cancel a running redrive (CancelMessageMoveTask)."""
    return _console_page(console.cancel(_console_request(), account, name))
