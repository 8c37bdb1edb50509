"""DMQ on Chalice: the SQS front end and the back-end stream and schedule handlers."""

from __future__ import annotations

from typing import Any

from chalice import Chalice, IAMAuthorizer, Rate, Response
from chalice.app import CloudWatchEvent, DynamoDBEvent

from chalicelib.backend import maintenance
from chalicelib.frontend import admin, json_protocol
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.runtime import Runtime
from chalicelib.settings import get_settings

app = Chalice(app_name="dmq")
runtime = Runtime()
admins = IAMAuthorizer()

SQS_CONTENT_TYPES = [
    json_protocol.CONTENT_TYPE,
    "application/json",
    "application/x-www-form-urlencoded",
    "text/plain",
]


@app.route("/", methods=["POST"], content_types=SQS_CONTENT_TYPES)
def sqs() -> Response:
    """Every SQS action, in the AWS JSON 1.0 protocol."""
    request = app.current_request
    assert request is not None
    body = request.raw_body
    result = json_protocol.handle(
        runtime.services_for, dict(request.headers), body if isinstance(body, bytes) else None
    )
    headers: dict[str, str | list[str]] = dict(result.headers)
    return Response(body=result.body, status_code=result.status, headers=headers)


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


@app.on_dynamodb_record(stream_arn=get_settings().messages_stream_arn)
def on_message_change(event: DynamoDBEvent) -> None:
    """Release the S3 bodies of messages that were deleted, purged or expired."""
    backend = runtime.backend()
    maintenance.release_bodies(backend.bodies, ((r.event_name, r.old_image) for r in event))


@app.schedule(Rate(1, unit=Rate.MINUTES))
def manage_shards(event: CloudWatchEvent) -> None:
    """The internal cluster manager: forget scaled-in shards once they have drained."""
    queues = runtime.services_for().queues
    for queue in queues.draining_queues():
        queues.forget_drained(queue)


@app.schedule(Rate(1, unit=Rate.MINUTES))
def sweep_retention(event: CloudWatchEvent) -> None:
    """Remove messages past their retention period."""
    backend = runtime.backend()
    maintenance.sweep_expired(backend.stores, backend.repo.scan_active(), backend.clock.now_ms())
