"""DMQ on Chalice: the SQS front end and the back-end stream and schedule handlers."""

from __future__ import annotations

from chalice import Chalice, Rate, Response
from chalice.app import CloudWatchEvent, DynamoDBEvent

from chalicelib.backend import maintenance
from chalicelib.frontend import json_protocol
from chalicelib.runtime import Runtime
from chalicelib.settings import get_settings

app = Chalice(app_name="dmq")
runtime = Runtime()

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


@app.on_dynamodb_record(stream_arn=get_settings().messages_stream_arn)
def on_message_change(event: DynamoDBEvent) -> None:
    """Release the S3 bodies of messages that were deleted, purged or expired."""
    backend = runtime.backend()
    maintenance.release_bodies(backend.bodies, ((r.event_name, r.old_image) for r in event))


@app.schedule(Rate(1, unit=Rate.MINUTES))
def sweep_retention(event: CloudWatchEvent) -> None:
    """Remove messages past their retention period."""
    backend = runtime.backend()
    maintenance.sweep_expired(backend.store, backend.repo.scan_active(), backend.clock.now_ms())
