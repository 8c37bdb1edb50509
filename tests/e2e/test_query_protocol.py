"""GIVEN the real local server (`python -m dmqlocal`, DynamoDB Local)
WHEN an SQS client that speaks the Query protocol (botocore 1.29, in .venv-query) drives
every action DMQ serves, and raw HTTP requests send Query forms and query strings
THEN every action answers as SQS's Query protocol does: the old client parses each answer
and checks its MD5s; errors are `<ErrorResponse>` documents with SQS's legacy codes,
`Sender` type, `<Detail/>`, the request id, and HTTP 400."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

import pytest

from chalicelib.frontend.dispatch import ACTIONS

ROOT = Path(__file__).resolve().parents[2]
QUERY_PYTHON = ROOT / ".venv-query" / "bin" / "python"
NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
ACCOUNT = "000000000000"
MOVE_TASKS = {"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask"}
PERMISSIONS = {"AddPermission", "RemovePermission"}
Names = Callable[[str], str]


# -- the old client ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def driven(dmq_url: str) -> dict[str, Any]:
    """What the Query client got, driving every action of ACTIONS once."""
    assert QUERY_PYTHON.exists(), "run `make query-client` (make test does) first"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DMQ_"))}
    env.update(AWS_ACCESS_KEY_ID="query-key", AWS_SECRET_ACCESS_KEY="query-secret",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    done = subprocess.run(
        [str(QUERY_PYTHON), "-m", "tests.query_client.drive", "--endpoint", dmq_url,
         "--prefix", f"query-{os.getpid()}", "--actions", ",".join(sorted(ACTIONS))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_client_speaks_query(driven: dict[str, Any]) -> None:
    assert driven["botocore"].startswith("1.29.")
    assert driven["protocol"] == "query"
    assert driven["content_types"] == ["application/x-www-form-urlencoded; charset=utf-8"]


def test_every_served_action_is_driven(driven: dict[str, Any]) -> None:
    # An action added to DMQ must be added to the driver too: this fails until it is.
    assert set(ACTIONS) <= set(driven["model_operations"])
    assert set(ACTIONS) - set(driven["called"]) == set()
    steps = driven["steps"]
    for name, step in steps.items():
        if isinstance(step, dict) and "error" in step:
            assert step["error"] not in ("InvalidAction", "InternalError", "Unreadable"), (
                name, step)


def test_queues(driven: dict[str, Any], dmq_url: str) -> None:
    steps = driven["steps"]
    prefix = steps["create_main"]["QueueUrl"].rsplit("/", 1)[1].removesuffix("-main")
    main_url = f"{dmq_url}/{ACCOUNT}/{prefix}-main"
    assert steps["create_main"] == {"QueueUrl": main_url}
    assert steps["create_dlq_again"] == steps["create_dlq"]
    assert steps["create_conflict"]["error"] == "QueueAlreadyExists"
    assert steps["create_conflict"]["exception"] == "QueueNameExists"
    assert steps["get_url"] == {"QueueUrl": main_url}
    assert steps["list"]["QueueUrls"] == [f"{dmq_url}/{ACCOUNT}/{prefix}-dlq", main_url]
    assert len(steps["list_paged"]["QueueUrls"]) == 1 and steps["list_paged"]["NextToken"]
    attributes = steps["attributes"]["Attributes"]
    assert attributes["VisibilityTimeout"] == "40"
    assert attributes["MaximumMessageSize"] == "262144"
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 5
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{prefix}-main"
    assert steps["set_attributes"] == {}
    assert steps["tags"] == {"Tags": {"team": "query", "owner": "dmq"}}
    assert steps["dead_letter_sources"] == {"queueUrls": [main_url]}
    assert steps["purge"] == {} and steps["delete_queue"] == {}


def test_queue_errors(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    missing = {"error": "AWS.SimpleQueueService.NonExistentQueue", "type": "Sender",
               "message": "The specified queue does not exist for this wsdl version.",
               "exception": "QueueDoesNotExist", "status": 400}
    assert steps["get_url_missing"] == missing
    assert steps["deleted_attributes"] == missing
    assert steps["set_bad_attribute"]["error"] == "InvalidAttributeValue"
    assert steps["bad_attribute_name"]["error"] == "InvalidAttributeName"
    assert steps["purge_again"]["error"] == "AWS.SimpleQueueService.PurgeQueueInProgress"
    assert steps["purge_again"]["exception"] == "PurgeQueueInProgress"


def test_messages_round_trip_with_their_digests(driven: dict[str, Any]) -> None:
    """botocore 1.29 checks MD5OfBody and MD5OfMessageAttributes of every send and
    receive itself: a digest of anything but the exact characters fails the call."""
    steps = driven["steps"]
    received = {m["Body"]: m for m in steps["received"]}
    assert len(received) == 3
    body = "Query \u00e9t\u00e9 \U0001F600 <tag> & \"quotes\"\r\nsecond line\ttab"
    first = received[body]
    assert first["MessageId"] == steps["send"]["MessageId"]
    assert first["MD5OfBody"] == steps["send"]["MD5OfMessageBody"]
    assert first["MD5OfMessageAttributes"] == steps["send"]["MD5OfMessageAttributes"]
    attributes = first["MessageAttributes"]
    assert attributes["blob"] == {"DataType": "Binary", "BinaryValue": {
        "base64": base64.b64encode(bytes(range(256))).decode()}}
    assert attributes["text"] == {"DataType": "String", "StringValue": "v\u00e4lue <&>"}
    assert attributes["number"] == {"DataType": "Number", "StringValue": "12.5"}
    assert attributes["custom"] == {"DataType": "String.custom", "StringValue": "x"}
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(first["Attributes"]["SentTimestamp"]) > 1_600_000_000_000
    assert received["batch two"]["MessageAttributes"] == {
        "n": {"DataType": "Number", "StringValue": "7"}}


def test_batches_and_message_errors(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    sent = steps["send_batch"]
    assert [e["Id"] for e in sent["Successful"]] == ["one", "two"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in sent["Failed"]] == [
        ("bad", "InvalidMessageContents", True)]
    assert steps["send_bad"]["error"] == "InvalidMessageContents"
    assert steps["send_batch_dup"]["error"] == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    assert steps["send_batch_empty"]["error"] == "AWS.SimpleQueueService.EmptyBatchRequest"
    assert steps["receive_bad"]["error"] == "InvalidParameterValue"
    assert steps["change_visibility"] == {}
    for step, ok in (("change_visibility_batch", ["ok"]), ("delete_batch", ["a", "b"])):
        assert [e["Id"] for e in steps[step]["Successful"]] == ok
        assert [(e["Id"], e["Code"]) for e in steps[step]["Failed"]] == [
            ("forged", "ReceiptHandleIsInvalid")]
    assert steps["delete"] == {}
    assert steps["delete_forged"]["error"] == "ReceiptHandleIsInvalid"


def test_permissions(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    assert set(ACTIONS) >= PERMISSIONS
    assert steps["add_permission"] == {} and steps["remove_permission"] == {}
    policy = json.loads(steps["policy"]["Attributes"]["Policy"])
    assert [s["Sid"] for s in policy["Statement"]] == ["QuerySend"]


def test_move_tasks(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    assert set(ACTIONS) >= MOVE_TASKS
    assert isinstance(steps["start_move"]["TaskHandle"], str)
    tasks = steps["list_moves"]["Results"]
    assert tasks and tasks[0]["SourceArn"].endswith("-dlq")
    cancel = steps["cancel_move"]
    # A task that finished first cannot be cancelled: SQS then answers with an error.
    assert "ApproximateNumberOfMessagesMoved" in cancel or cancel["status"] == 400


def test_fifo_queues_over_query(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    assert steps["fifo_create"]["QueueUrl"].endswith("-orders.fifo")
    a1, again = steps["fifo_a1"], steps["fifo_a1_again"]
    # a duplicate (same body, content-based deduplication) is the original message
    assert (again["MessageId"], again["SequenceNumber"]) == (a1["MessageId"],
                                                             a1["SequenceNumber"])
    sequences = [a1["SequenceNumber"], steps["fifo_b1"]["SequenceNumber"],
                 *[e["SequenceNumber"] for e in steps["fifo_batch"]["Successful"]]]
    assert all(len(n) == 20 and n.isdigit() for n in sequences)
    assert sequences == sorted(sequences, key=int) and len(set(sequences)) == 4
    assert steps["fifo_no_group"]["error"] == "MissingParameter"
    assert steps["fifo_delay"]["error"] == "InvalidParameterValue"
    got = steps["fifo_receive"]["Messages"]
    group_a = [m["Body"] for m in got if m["Attributes"]["MessageGroupId"] == "a"]
    assert group_a == ["a1", "a2", "a3"][:len(group_a)] and group_a
    by_body = {m["Body"]: m["Attributes"] for m in got}
    assert by_body["a1"]["SequenceNumber"] == a1["SequenceNumber"]
    assert by_body["a1"]["MessageDeduplicationId"] == hashlib.sha256(b"a1").hexdigest()
    # a retried receive with the same attempt id returns the same messages and handles
    assert steps["fifo_receive_again"]["Messages"] == got
    deleted = steps["fifo_delete"]
    assert len(deleted["Successful"]) == len(got) and not deleted.get("Failed")


def test_fair_queue_tenants_and_trace_headers_over_query(driven: dict[str, Any]) -> None:
    steps = driven["steps"]
    (message,) = steps["fair_receive"]["Messages"]
    assert message["Attributes"] == {
        "MessageGroupId": "tenant-1",
        "AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793"}


# -- raw HTTP ------------------------------------------------------------------------------
def request(url: str, method: str, path: str, body: str | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=30)
    try:
        sent = dict(headers or {})
        if body is not None:
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        conn.request(method, path, body=body.encode() if body is not None else None,
                     headers=sent)
        response = conn.getresponse()
        return (response.status, {k.lower(): v for k, v in response.getheaders()},
                response.read())
    finally:
        conn.close()


def xml_error(status: int, headers: dict[str, str], body: bytes) -> dict[str, str]:
    """The parts of an `<ErrorResponse>`, checked for SQS's shape."""
    assert headers["content-type"].startswith("text/xml")
    root = ET.fromstring(body)
    assert root.tag == f"{NS}ErrorResponse"
    error = root.find(f"{NS}Error")
    assert error is not None
    assert [child.tag for child in error] == [f"{NS}{n}" for n in
                                             ("Type", "Code", "Message", "Detail")]
    request_id = root.findtext(f"{NS}RequestId")
    assert request_id and request_id == headers["x-amzn-requestid"]
    return {"status": str(status), "type": error.findtext(f"{NS}Type") or "",
            "code": error.findtext(f"{NS}Code") or "",
            "message": error.findtext(f"{NS}Message") or ""}


def form(**params: str) -> str:
    return urlencode({"Version": "2012-11-05", **params})


@pytest.mark.parametrize(("method", "path", "body", "code", "message"), [
    ("POST", "/", form(Action="Frobnicate"), "InvalidAction",
     "The action Frobnicate is not valid for this endpoint."),
    ("GET", "/?Action=Frobnicate&Version=2012-11-05", None, "InvalidAction",
     "The action Frobnicate is not valid for this endpoint."),
    ("GET", f"/{ACCOUNT}/some-queue?Action=CreateQueue&QueueName=q", None, "InvalidAction",
     "The action CreateQueue is not valid for this endpoint."),
    ("POST", "/", form(Action="CreateQueue"), "MissingParameter",
     "The request must contain the parameter QueueName."),
    ("POST", "/", form(Action="GetQueueUrl", QueueName="no-such-queue-anywhere"),
     "AWS.SimpleQueueService.NonExistentQueue",
     "The specified queue does not exist for this wsdl version."),
    ("POST", f"/{ACCOUNT}/no-such-queue-anywhere", form(Action="SendMessage", MessageBody="x"),
     "AWS.SimpleQueueService.NonExistentQueue",
     "The specified queue does not exist for this wsdl version."),
    ("POST", "/", form(Action="ListQueues", MaxResults="1001"), "InvalidParameterValue", ""),
    ("POST", "/", urlencode({"Action": "ListQueues", "Version": "2008-01-01"}),
     "NoSuchVersion", "The requested version (2008-01-01) of service AmazonSQS does not exist."),
])
def test_query_errors_are_sqs_xml(dmq_url: str, method: str, path: str, body: str | None,
                                  code: str, message: str) -> None:
    got = xml_error(*request(dmq_url, method, path, body))
    assert (got["status"], got["type"], got["code"]) == ("400", "Sender", code)
    if message:
        assert got["message"] == message


def test_a_get_without_a_query_is_an_unknown_operation(dmq_url: str, unique_name: Names) -> None:
    """As SQS answers a bare GET of a queue's URL: 404 `<UnknownOperationException/>`, in
    XML even when the client asks for JSON."""
    name = unique_name()
    status, _, _ = request(dmq_url, "POST", "/", form(Action="CreateQueue", QueueName=name))
    assert status == 200
    status, headers, body = request(dmq_url, "GET", f"/{ACCOUNT}/{name}",
                                    headers={"Accept": "application/json"})
    assert (status, body) == (404, b"<UnknownOperationException/>")
    assert headers["content-type"].startswith("text/xml")
    # AND an action missing a parameter there is MissingParameter, worded as SQS words it
    got = xml_error(*request(dmq_url, "GET", f"/{ACCOUNT}/{name}?Action=SendMessage"))
    assert got == {"status": "400", "type": "Sender", "code": "MissingParameter",
                   "message": "The request must contain the parameter MessageBody."}


def test_batch_limits_are_sqs_xml(dmq_url: str, unique_name: Names) -> None:
    name = unique_name()
    status, _, _ = request(dmq_url, "POST", "/", form(Action="CreateQueue", QueueName=name))
    assert status == 200
    entries = {f"SendMessageBatchRequestEntry.{i}.{k}": v for i in range(1, 12)
               for k, v in (("Id", f"e{i}"), ("MessageBody", "x"))}
    got = xml_error(*request(dmq_url, "POST", f"/{ACCOUNT}/{name}",
                             form(Action="SendMessageBatch", **entries)))
    assert got["code"] == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
    assert got["message"] == "Maximum number of entries per request are 10. You have sent 11."
    got = xml_error(*request(dmq_url, "POST", f"/{ACCOUNT}/{name}",
                             form(Action="DeleteMessageBatch")))
    assert got["code"] == "AWS.SimpleQueueService.EmptyBatchRequest"


def test_a_get_at_the_queue_url_sends_and_receives(dmq_url: str, unique_name: Names) -> None:
    """GIVEN a queue WHEN SendMessage and ReceiveMessage are query strings at its URL
    (no QueueUrl parameter) THEN the queue is the path's, and the XML carries the message."""
    name = unique_name()
    status, headers, body = request(dmq_url, "GET", "/?" + form(Action="CreateQueue",
                                                               QueueName=name))
    assert status == 200 and headers["content-type"].startswith("text/xml")
    root = ET.fromstring(body)
    assert root.tag == f"{NS}CreateQueueResponse"
    assert root.findtext(f"{NS}CreateQueueResult/{NS}QueueUrl") == f"{dmq_url}/{ACCOUNT}/{name}"
    assert root.findtext(f"{NS}ResponseMetadata/{NS}RequestId") == headers["x-amzn-requestid"]
    status, _, body = request(dmq_url, "GET", f"/{ACCOUNT}/{name}?" + form(
        Action="SendMessage", MessageBody="hello\r\nworld"))
    assert status == 200
    sent = ET.fromstring(body)
    assert sent.findtext(f"{NS}SendMessageResult/{NS}MD5OfMessageBody") == (
        hashlib.md5(b"hello\r\nworld").hexdigest())
    status, _, body = request(dmq_url, "GET", f"/{ACCOUNT}/{name}?" + form(
        Action="ReceiveMessage", WaitTimeSeconds="2", **{"AttributeName.1": "All"}))
    assert status == 200
    message = ET.fromstring(body).find(f"{NS}ReceiveMessageResult/{NS}Message")
    assert message is not None
    assert message.findtext(f"{NS}Body") == "hello\r\nworld"  # the CR survives the XML
    names = [a.findtext(f"{NS}Name") for a in message.findall(f"{NS}Attribute")]
    assert {"SentTimestamp", "ApproximateReceiveCount", "SenderId"} <= set(names)


def test_the_largest_message_fits_in_a_form(dmq_url: str, unique_name: Names) -> None:
    """GIVEN a message of 1 MiB of two-byte characters (3 MiB once percent-encoded)
    THEN it is sent and received whole; one byte more is refused as too long."""
    name = unique_name()
    assert request(dmq_url, "POST", "/", form(Action="CreateQueue", QueueName=name))[0] == 200
    body = "\u00e9" * (1_048_576 // 2)
    status, _, sent = request(dmq_url, "POST", f"/{ACCOUNT}/{name}",
                              form(Action="SendMessage", MessageBody=body))
    assert status == 200, sent[:300]
    digest = hashlib.md5(body.encode()).hexdigest()
    assert ET.fromstring(sent).findtext(f"{NS}SendMessageResult/{NS}MD5OfMessageBody") == digest
    status, _, received = request(dmq_url, "POST", f"/{ACCOUNT}/{name}",
                                  form(Action="ReceiveMessage", WaitTimeSeconds="2"))
    message = ET.fromstring(received).find(f"{NS}ReceiveMessageResult/{NS}Message")
    assert status == 200 and message is not None
    assert message.findtext(f"{NS}Body") == body
    assert message.findtext(f"{NS}MD5OfBody") == digest
    got = xml_error(*request(dmq_url, "POST", f"/{ACCOUNT}/{name}",
                             form(Action="SendMessage", MessageBody=body + "x")))
    assert (got["status"], got["code"]) == ("400", "InvalidParameterValue")
