"""Message actions: parse parameters, call the message service, shape the response."""

from __future__ import annotations

import base64
from typing import Any

from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.actions_queues import queue_of
from chalicelib.frontend.batches import batch_entries, batch_result
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services
from chalicelib.service.checksums import md5_of_attributes
from chalicelib.service.exceptions import InvalidParameterValueError
from chalicelib.service.messages import EntryFailure, HandleEntry, Received, SendRequest
from chalicelib.service.request_dedup import SendCall

Response = dict[str, Any]
# The message system attributes ReceiveMessage can return (botocore's
# MessageSystemAttributeName). SequenceNumber, MessageDeduplicationId and MessageGroupId
# are those of FIFO queues: a message without them leaves them out.
SYSTEM_NAMES = (
    "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)

# The MessageAttributeNames that select every attribute of a message.
ALL_ATTRIBUTES = frozenset({"All", "*", ".*"})


def _send_request(p: Params, entry_id: str = "", trace_header: str | None = None) -> SendRequest:
    return SendRequest(
        entry_id=entry_id,
        body=p.optional_str("MessageBody"),
        delay_seconds=p.optional_int("DelaySeconds"),
        attributes=p.message_attributes("MessageAttributes"),
        system_attributes=p.message_attributes("MessageSystemAttributes"),
        trace_header=trace_header,
        message_group_id=p.optional_str("MessageGroupId"),
        deduplication_id=p.optional_str("MessageDeduplicationId"),
    )


def _sent(message: Message) -> Response:
    result: Response = {"MessageId": message.message_id, "MD5OfMessageBody": message.body_md5}
    if message.attributes_md5:
        result["MD5OfMessageAttributes"] = message.attributes_md5
    if message.system_attributes_md5:
        result["MD5OfMessageSystemAttributes"] = message.system_attributes_md5
    if message.sequence_number:
        result["SequenceNumber"] = message.sequence_number
    return result


def _call(svc: Services, ctx: RequestContext, queue: QueueRecord, action: str) -> SendCall | None:
    """The send as a call to deduplicate (docs/request-dedup.md): its messages' ids and
    places follow from the request, so an SDK retry finds them stored. None when off."""
    if svc.request_dedup is None:
        return None
    return svc.request_dedup.call(queue, ctx.account, action, ctx.invocation_id)


def send_message(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """SendMessage."""
    queue = queue_of(svc, ctx, p)
    if p.raw("MessageBody") is None:
        p.required_str("MessageBody")
    request = _send_request(p, trace_header=ctx.trace_header)
    return _sent(svc.messages.send(queue, request, _call(svc, ctx, queue, "SendMessage")))


def send_message_batch(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """SendMessageBatch."""
    queue = queue_of(svc, ctx, p)
    entries = batch_entries(p, "SendMessageBatchRequestEntry")
    requests = [_send_request(e, e.required_str("Id"), ctx.trace_header) for e in entries]
    sent, failures = svc.messages.send_batch(
        queue, requests, _call(svc, ctx, queue, "SendMessageBatch"))
    return batch_result([{"Id": entry_id, **_sent(m)} for entry_id, m in sent], failures)


def _bounded(p: Params, name: str, low: int, high: int) -> int | None:
    """A ReceiveMessage number in its range, refused in SQS's words (which differ by name)."""
    value = p.optional_int(name)
    if value is not None and not low <= value <= high:
        bounds = (f"between {low} and {high}" if name == "MaxNumberOfMessages"
                  else f">= {low} and <= {high}")
        raise InvalidParameterValueError(
            f"Value {value} for parameter {name} is invalid. Reason: Must be {bounds}, if "
            "provided."
        )
    return value


def receive_message(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ReceiveMessage."""
    queue = queue_of(svc, ctx, p)
    max_messages = _bounded(p, "MaxNumberOfMessages", 1, 10) or 1
    visibility = _bounded(p, "VisibilityTimeout", 0, 43_200)
    wait = _bounded(p, "WaitTimeSeconds", 0, 20)
    attempt_id = p.optional_str("ReceiveRequestAttemptId")
    received = svc.messages.receive(queue, max_messages, visibility, wait, attempt_id)
    if not received:
        return {}
    # MessageSystemAttributeNames replaces the older AttributeNames: when both are given,
    # the newer one decides. Names are read without surrounding whitespace.
    system = {n.strip() for n in
              p.str_list("MessageSystemAttributeNames") or p.str_list("AttributeNames")}
    wanted = p.str_list("MessageAttributeNames")
    return {"Messages": [_received(r, system, wanted) for r in received]}


def _system_attributes(message: Message, names: set[str]) -> dict[str, str]:
    """The system attributes asked for (`All`: every one the message has)."""
    values = message.system_values()
    every = "All" in names
    return {k: values[k] for k in SYSTEM_NAMES if k in values and (every or k in names)}


def _selected(message: Message, wanted: list[str]) -> dict[str, AttributeValue]:
    """The message attributes MessageAttributeNames selects: `All`, `*` or `.*` every one,
    `Name.*` those whose names start with `Name`, others by their exact names."""
    if not wanted:
        return {}
    if ALL_ATTRIBUTES.intersection(wanted):
        return dict(message.attributes)
    prefixes = tuple(w[:-2] for w in wanted if w.endswith(".*"))
    return {
        k: v for k, v in message.attributes.items()
        if k in wanted or (prefixes and k.startswith(prefixes))
    }


def _attribute_json(value: AttributeValue) -> Response:
    if value.is_binary:
        encoded = base64.b64encode(value.binary_value or b"").decode()
        return {"DataType": value.data_type, "BinaryValue": encoded}
    return {"DataType": value.data_type, "StringValue": value.string_value}


def _received(received: Received, system: set[str], wanted: list[str]) -> Response:
    message = received.message
    result: Response = {
        "MessageId": message.message_id,
        "ReceiptHandle": received.receipt_handle,
        "MD5OfBody": message.body_md5,
        "Body": message.body,
    }
    attributes = _system_attributes(message, system)
    if attributes:
        result["Attributes"] = attributes
    selected = _selected(message, wanted)
    if selected:
        result["MessageAttributes"] = {k: _attribute_json(v) for k, v in selected.items()}
        result["MD5OfMessageAttributes"] = md5_of_attributes(selected)
    return result


def delete_message(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """DeleteMessage."""
    queue = queue_of(svc, ctx, p)
    _, failures = svc.messages.delete(queue, [HandleEntry("", p.required_str("ReceiptHandle"))])
    _raise_single(failures)
    return {}


def delete_message_batch(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """DeleteMessageBatch."""
    queue = queue_of(svc, ctx, p)
    entries = [
        HandleEntry(e.required_str("Id"), e.required_str("ReceiptHandle"))
        for e in batch_entries(p, "DeleteMessageBatchRequestEntry")
    ]
    done, failures = svc.messages.delete(queue, entries)
    return batch_result([{"Id": i} for i in done], failures)


def _visibility_timeout(p: Params) -> int:
    value = p.optional_int("VisibilityTimeout")
    if value is None:
        p.required_str("VisibilityTimeout")
    return int(value or 0)


def change_message_visibility(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ChangeMessageVisibility."""
    queue = queue_of(svc, ctx, p)
    entry = HandleEntry("", p.required_str("ReceiptHandle"), _visibility_timeout(p))
    _, failures = svc.messages.change_visibility(queue, [entry])
    _raise_single(failures)
    return {}


def change_message_visibility_batch(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ChangeMessageVisibilityBatch."""
    queue = queue_of(svc, ctx, p)
    entries = [
        HandleEntry(e.required_str("Id"), e.required_str("ReceiptHandle"), _visibility_timeout(e))
        for e in batch_entries(p, "ChangeMessageVisibilityBatchRequestEntry")
    ]
    done, failures = svc.messages.change_visibility(queue, entries)
    return batch_result([{"Id": i} for i in done], failures)


def _raise_single(failures: list[EntryFailure]) -> None:
    if failures:
        raise failures[0].error
