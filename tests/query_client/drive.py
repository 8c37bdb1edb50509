"""Drive DMQ with an SQS client that speaks the Query protocol; print what it got as JSON.

Runs under .venv-query (botocore 1.29.x, the last to speak Query to SQS), not under the
project's venv: `.venv-query/bin/python -m tests.query_client.drive --endpoint URL
--prefix NAME --actions A,B,...`. Every action in --actions is called at least once, on
queues named after --prefix; the printed object holds, per call, the parsed response (or
the error code, message and HTTP status), the actions called, the client's protocol and
the Content-Type of every request it sent. Uses the standard library and botocore only.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from typing import Any

import botocore
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

BODY = "Query \u00e9t\u00e9 \U0001F600 <tag> & \"quotes\"\r\nsecond line\ttab"
BINARY = bytes(range(256))
ATTRIBUTES = {
    "text": {"DataType": "String", "StringValue": "v\u00e4lue <&>"},
    "number": {"DataType": "Number", "StringValue": "12.5"},
    "blob": {"DataType": "Binary", "BinaryValue": BINARY},
    "custom": {"DataType": "String.custom", "StringValue": "x"},
}


class Driver:
    """Calls actions, keeping every answer under a step name."""

    def __init__(self, endpoint: str) -> None:
        session = botocore.session.get_session()
        self.sqs = session.create_client(
            "sqs", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="query-key", aws_secret_access_key="query-secret",
            config=Config(retries={"total_max_attempts": 1}, read_timeout=30))
        self.steps: dict[str, Any] = {}
        self.called: set[str] = set()
        self.content_types: set[str] = set()
        self.sqs.meta.events.register("before-send.sqs", self._record)

    def _record(self, request: Any, **kwargs: Any) -> None:
        value = request.headers.get("Content-Type", b"")
        self.content_types.add(value.decode() if isinstance(value, bytes) else str(value))

    def call(self, step: str, action: str, **params: Any) -> dict[str, Any]:
        """Call `action`; keep and return the response, or an error's code and status."""
        self.called.add(action)
        method = getattr(self.sqs, botocore.xform_name(action))
        try:
            response = method(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            out = {"error": error.get("Code"), "message": error.get("Message"),
                   "type": error.get("Type"), "exception": type(exc).__name__,
                   "status": exc.response["ResponseMetadata"]["HTTPStatusCode"]}
            self.steps[step] = out
            return out
        except (BotoCoreError, ResponseParserError) as exc:  # an answer it could not read
            out = {"error": "Unreadable", "message": str(exc)[:500], "status": None}
            self.steps[step] = out
            return out
        response.pop("ResponseMetadata", None)
        self.steps[step] = response
        return response


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def queues(d: Driver, prefix: str) -> tuple[str, str, str]:
    """A DLQ and a main queue redriving to it; returns (main url, dlq url, dlq arn)."""
    dlq = d.call("create_dlq", "CreateQueue", QueueName=f"{prefix}-dlq")["QueueUrl"]
    d.call("create_dlq_again", "CreateQueue", QueueName=f"{prefix}-dlq")
    dlq_arn = d.call("dlq_arn", "GetQueueAttributes", QueueUrl=dlq,
                     AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})
    main = d.call("create_main", "CreateQueue", QueueName=f"{prefix}-main",
                  Attributes={"VisibilityTimeout": "40", "RedrivePolicy": redrive},
                  tags={"team": "query", "env": "e2e"})["QueueUrl"]
    d.call("create_conflict", "CreateQueue", QueueName=f"{prefix}-main",
           Attributes={"VisibilityTimeout": "41"})
    d.call("get_url", "GetQueueUrl", QueueName=f"{prefix}-main")
    d.call("get_url_missing", "GetQueueUrl", QueueName=f"{prefix}-nope")
    d.call("list", "ListQueues", QueueNamePrefix=prefix)
    d.call("list_paged", "ListQueues", QueueNamePrefix=prefix, MaxResults=1)
    d.call("set_attributes", "SetQueueAttributes", QueueUrl=main,
           Attributes={"DelaySeconds": "0", "MaximumMessageSize": "262144"})
    d.call("set_bad_attribute", "SetQueueAttributes", QueueUrl=main,
           Attributes={"DelaySeconds": "901"})
    d.call("attributes", "GetQueueAttributes", QueueUrl=main, AttributeNames=["All"])
    d.call("bad_attribute_name", "GetQueueAttributes", QueueUrl=main,
           AttributeNames=["NoSuchAttribute"])
    return main, dlq, dlq_arn


def tags(d: Driver, main: str) -> None:
    d.call("tag", "TagQueue", QueueUrl=main, Tags={"owner": "dmq"})
    d.call("untag", "UntagQueue", QueueUrl=main, TagKeys=["env"])
    d.call("tags", "ListQueueTags", QueueUrl=main)


def messages(d: Driver, main: str) -> None:
    d.call("send", "SendMessage", QueueUrl=main, MessageBody=BODY, MessageAttributes=ATTRIBUTES)
    d.call("send_bad", "SendMessage", QueueUrl=main, MessageBody="bad \u0000 body")
    d.call("send_batch", "SendMessageBatch", QueueUrl=main, Entries=[
        {"Id": "one", "MessageBody": "batch one", "DelaySeconds": 0},
        {"Id": "two", "MessageBody": "batch two",
         "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "7"}}},
        {"Id": "bad", "MessageBody": "bad \u0000 entry"},
    ])
    d.call("send_batch_dup", "SendMessageBatch", QueueUrl=main, Entries=[
        {"Id": "x", "MessageBody": "a"}, {"Id": "x", "MessageBody": "b"}])
    d.call("send_batch_empty", "SendMessageBatch", QueueUrl=main, Entries=[])
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    for _ in range(10):
        if len(got) >= 3 or time.monotonic() > deadline:
            break
        response = d.call("receive", "ReceiveMessage", QueueUrl=main, AttributeNames=["All"],
                          MessageAttributeNames=["All"], MaxNumberOfMessages=10,
                          WaitTimeSeconds=1, VisibilityTimeout=60)
        got += response.get("Messages", [])
    d.steps["received"] = got
    d.call("receive_bad", "ReceiveMessage", QueueUrl=main, MaxNumberOfMessages=11)
    handles = [m["ReceiptHandle"] for m in got]
    if len(handles) >= 3:
        d.call("change_visibility", "ChangeMessageVisibility", QueueUrl=main,
               ReceiptHandle=handles[0], VisibilityTimeout=120)
        d.call("change_visibility_batch", "ChangeMessageVisibilityBatch", QueueUrl=main,
               Entries=[{"Id": "ok", "ReceiptHandle": handles[1], "VisibilityTimeout": 90},
                        {"Id": "forged", "ReceiptHandle": "not-a-handle",
                         "VisibilityTimeout": 90}])
        d.call("delete", "DeleteMessage", QueueUrl=main, ReceiptHandle=handles[0])
        d.call("delete_batch", "DeleteMessageBatch", QueueUrl=main,
               Entries=[{"Id": "a", "ReceiptHandle": handles[1]},
                        {"Id": "b", "ReceiptHandle": handles[2]},
                        {"Id": "forged", "ReceiptHandle": "not-a-handle"}])
    d.call("delete_forged", "DeleteMessage", QueueUrl=main, ReceiptHandle="not-a-handle")


def permissions(d: Driver, main: str) -> None:
    d.call("add_permission", "AddPermission", QueueUrl=main, Label="QuerySend",
           AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    d.call("policy", "GetQueueAttributes", QueueUrl=main, AttributeNames=["Policy"])
    d.call("remove_permission", "RemovePermission", QueueUrl=main, Label="QuerySend")


def move_tasks(d: Driver, main: str, dlq: str, dlq_arn: str) -> None:
    main_arn = d.call("main_arn", "GetQueueAttributes", QueueUrl=main,
                      AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    d.call("dlq_send", "SendMessage", QueueUrl=dlq, MessageBody="to move")
    started = d.call("start_move", "StartMessageMoveTask", SourceArn=dlq_arn,
                     DestinationArn=main_arn, MaxNumberOfMessagesPerSecond=1)
    d.call("list_moves", "ListMessageMoveTasks", SourceArn=dlq_arn, MaxResults=10)
    d.call("cancel_move", "CancelMessageMoveTask",
           TaskHandle=started.get("TaskHandle", "no-task-was-started"))


def fifo(d: Driver, prefix: str) -> None:
    """A FIFO queue over Query: groups, content-based deduplication, sequence numbers,
    receive attempts and FIFO errors."""
    url = d.call("fifo_create", "CreateQueue", QueueName=f"{prefix}-orders.fifo",
                 Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})[
                     "QueueUrl"]
    d.call("fifo_a1", "SendMessage", QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    d.call("fifo_b1", "SendMessage", QueueUrl=url, MessageBody="b1", MessageGroupId="b")
    d.call("fifo_a1_again", "SendMessage", QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    d.call("fifo_batch", "SendMessageBatch", QueueUrl=url, Entries=[
        {"Id": "a2", "MessageBody": "a2", "MessageGroupId": "a"},
        {"Id": "a3", "MessageBody": "a3", "MessageGroupId": "a",
         "MessageDeduplicationId": "explicit-a3"}])
    d.call("fifo_no_group", "SendMessage", QueueUrl=url, MessageBody="x")
    d.call("fifo_delay", "SendMessage", QueueUrl=url, MessageBody="d", MessageGroupId="a",
           DelaySeconds=5)
    first = d.call("fifo_receive", "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10,
                   AttributeNames=["All"], ReceiveRequestAttemptId="query-attempt-1")
    d.call("fifo_receive_again", "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10,
           AttributeNames=["All"], ReceiveRequestAttemptId="query-attempt-1")
    handles = [m["ReceiptHandle"] for m in first.get("Messages", [])]
    if handles:
        d.call("fifo_delete", "DeleteMessageBatch", QueueUrl=url, Entries=[
            {"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(handles)])
    d.call("fifo_delete_queue", "DeleteQueue", QueueUrl=url)


def tenants(d: Driver, prefix: str) -> None:
    """A standard queue with a fair-queue tenant and a trace header over Query."""
    url = d.call("fair_create", "CreateQueue", QueueName=f"{prefix}-tenants")["QueueUrl"]
    d.call("fair_send", "SendMessage", QueueUrl=url, MessageBody="t", MessageGroupId="tenant-1",
           MessageSystemAttributes={"AWSTraceHeader": {
               "DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"}})
    d.call("fair_receive", "ReceiveMessage", QueueUrl=url, WaitTimeSeconds=5,
           AttributeNames=["MessageGroupId", "AWSTraceHeader"])
    d.call("fair_delete_queue", "DeleteQueue", QueueUrl=url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--actions", required=True, help="comma-separated: what DMQ serves")
    args = parser.parse_args()
    served = set(args.actions.split(","))
    d = Driver(args.endpoint)
    main_url, dlq, dlq_arn = queues(d, args.prefix)
    tags(d, main_url)
    messages(d, main_url)
    if {"AddPermission", "RemovePermission"} & served:
        permissions(d, main_url)
    if {"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask"} & served:
        move_tasks(d, main_url, dlq, dlq_arn)
    fifo(d, args.prefix)
    tenants(d, args.prefix)
    d.call("dead_letter_sources", "ListDeadLetterSourceQueues", QueueUrl=dlq)
    d.call("purge", "PurgeQueue", QueueUrl=main_url)
    d.call("purge_again", "PurgeQueue", QueueUrl=main_url)
    d.call("delete_queue", "DeleteQueue", QueueUrl=main_url)
    d.call("delete_dlq", "DeleteQueue", QueueUrl=dlq)
    d.call("deleted_attributes", "GetQueueAttributes", QueueUrl=dlq)
    json.dump(_jsonable({
        "botocore": botocore.__version__,
        "protocol": d.sqs.meta.service_model.protocol,
        "model_operations": sorted(d.sqs.meta.service_model.operation_names),
        "content_types": sorted(d.content_types),
        "called": sorted(d.called),
        "steps": d.steps,
    }), sys.stdout)


if __name__ == "__main__":
    main()
