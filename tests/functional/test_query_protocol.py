"""GIVEN the app on moto WHEN requests speak SQS's Query protocol (form bodies, query
strings, at `/` or at a queue's URL) THEN the same actions serve them as serve JSON, the
answers are SQS's XML, and every failure is an `<ErrorResponse>` with the legacy code,
the fault type and the status SQS gives it."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.domain.exceptions import ConcurrentChangeError
from chalicelib.metadata.repository import QueueRepository

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Host": "dmq.test"}
ACCOUNT = "000000000000"


def post(dmq: Client, path: str = "/", **params: str) -> tuple[int, dict[str, str], Any]:
    body = urlencode({"Version": "2012-11-05", **params})
    result = dmq.http.post(path, headers=FORM, body=body)
    return result.status_code, result.headers, ET.fromstring(result.body)


def get(dmq: Client, path: str, **params: str) -> tuple[int, dict[str, str], Any]:
    result = dmq.http.get(f"{path}?{urlencode(params)}", headers={"Host": "dmq.test"})
    return result.status_code, result.headers, ET.fromstring(result.body)


def error_of(root: Any) -> tuple[str, str, str]:
    assert root.tag == f"{NS}ErrorResponse"
    return (root.findtext(f"{NS}Error/{NS}Type"), root.findtext(f"{NS}Error/{NS}Code"),
            root.findtext(f"{NS}Error/{NS}Message"))


def create(dmq: Client, name: str = "q", **params: str) -> str:
    status, _, root = post(dmq, Action="CreateQueue", QueueName=name, **params)
    assert status == 200, ET.tostring(root)
    url = root.findtext(f"{NS}CreateQueueResult/{NS}QueueUrl")
    assert url == f"http://dmq.test/{ACCOUNT}/{name}"
    return url


def test_query_and_json_reach_the_same_queue(dmq: Client, sqs: Any) -> None:
    # GIVEN a queue created over Query, with attributes and tags in Query's indexed form
    url = create(dmq, "both", **{"Attribute.1.Name": "VisibilityTimeout",
                                 "Attribute.1.Value": "45", "Tag.1.Key": "team",
                                 "Tag.1.Value": "red"})
    # THEN the JSON protocol sees what the Query form set
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"] == {"VisibilityTimeout": "45"}
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "red"}
    # WHEN JSON sends a message with attributes THEN Query receives it with the same digests
    sent = sqs.send_message(QueueUrl=url, MessageBody="b\u00f6dy", MessageAttributes={
        "bin": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        "num": {"DataType": "Number", "StringValue": "1"}})
    status, _, root = post(dmq, f"/{ACCOUNT}/both", Action="ReceiveMessage",
                           **{"MessageAttributeName.1": "All"})
    assert status == 200
    message = root.find(f"{NS}ReceiveMessageResult/{NS}Message")
    assert message.findtext(f"{NS}MessageId") == sent["MessageId"]
    assert message.findtext(f"{NS}MD5OfBody") == sent["MD5OfMessageBody"]
    assert message.findtext(f"{NS}MD5OfMessageAttributes") == sent["MD5OfMessageAttributes"]
    attributes = {a.findtext(f"{NS}Name"): a.find(f"{NS}Value")
                  for a in message.findall(f"{NS}MessageAttribute")}
    assert attributes["bin"].findtext(f"{NS}BinaryValue") == "AP8="  # base64 of 00 ff
    assert attributes["num"].findtext(f"{NS}StringValue") == "1"


def test_a_query_send_has_the_digests_json_computes(dmq: Client, sqs: Any) -> None:
    url = create(dmq, "digests")
    status, _, root = post(dmq, Action="SendMessage", QueueUrl=url, MessageBody="a\r\nb",
                           **{"MessageAttribute.1.Name": "s",
                              "MessageAttribute.1.Value.DataType": "String",
                              "MessageAttribute.1.Value.StringValue": "v"})
    assert status == 200
    result = root.find(f"{NS}SendMessageResult")
    json_sent = sqs.send_message(QueueUrl=url, MessageBody="a\r\nb", MessageAttributes={
        "s": {"DataType": "String", "StringValue": "v"}})
    assert result.findtext(f"{NS}MD5OfMessageBody") == hashlib.md5(b"a\r\nb").hexdigest()
    assert result.findtext(f"{NS}MD5OfMessageAttributes") == json_sent["MD5OfMessageAttributes"]


def test_the_path_names_the_queue_unless_the_form_does(dmq: Client) -> None:
    create(dmq, "by-path")
    other = create(dmq, "by-form")
    status, _, _ = post(dmq, f"/{ACCOUNT}/by-path", Action="SendMessage", MessageBody="p")
    assert status == 200
    status, _, _ = post(dmq, f"/{ACCOUNT}/by-path", Action="SendMessage", MessageBody="f",
                        QueueUrl=other)
    assert status == 200
    counts = {}
    for name in ("by-path", "by-form"):
        _, _, root = get(dmq, f"/{ACCOUNT}/{name}", Action="GetQueueAttributes",
                         **{"AttributeName.1": "ApproximateNumberOfMessages"})
        counts[name] = root.findtext(f"{NS}GetQueueAttributesResult/{NS}Attribute/{NS}Value")
    assert counts == {"by-path": "1", "by-form": "1"}


def test_indexed_lists_follow_their_indices(dmq: Client) -> None:
    url = create(dmq, "order")
    status, _, root = post(dmq, Action="GetQueueAttributes", QueueUrl=url,
                           **{"AttributeName.2": "DelaySeconds",
                              "AttributeName.1": "VisibilityTimeout"})
    assert status == 200
    names = [a.findtext(f"{NS}Name") for a in
             root.findall(f"{NS}GetQueueAttributesResult/{NS}Attribute")]
    assert sorted(names) == ["DelaySeconds", "VisibilityTimeout"]


def test_an_empty_result_is_still_wrapped(dmq: Client) -> None:
    status, headers, root = post(dmq, Action="ListQueues", QueueNamePrefix="nothing-here")
    assert status == 200 and headers["Content-Type"] == "text/xml"
    assert root.tag == f"{NS}ListQueuesResponse"
    result = root.find(f"{NS}ListQueuesResult")
    assert result is not None and list(result) == []
    assert root.findtext(f"{NS}ResponseMetadata/{NS}RequestId") == headers["x-amzn-RequestId"]


def test_an_action_without_a_result_has_only_metadata(dmq: Client) -> None:
    url = create(dmq, "tagged")
    status, _, root = post(dmq, Action="TagQueue", QueueUrl=url,
                           **{"Tag.1.Key": "k", "Tag.1.Value": "v"})
    assert status == 200
    assert [child.tag for child in root] == [f"{NS}ResponseMetadata"]
    _, _, root = post(dmq, Action="ListQueueTags", QueueUrl=url)
    tag = root.find(f"{NS}ListQueueTagsResult/{NS}Tag")
    assert (tag.findtext(f"{NS}Key"), tag.findtext(f"{NS}Value")) == ("k", "v")


def test_signature_and_unknown_parameters_are_ignored(dmq: Client) -> None:
    status, _, _ = post(dmq, Action="ListQueues", AWSAccessKeyId="AKID", Signature="x",
                        SignatureMethod="HmacSHA256", Timestamp="2026-01-01T00:00:00Z",
                        Frob="1")
    assert status == 200


@pytest.mark.parametrize(("params", "code", "message"), [
    ({"Action": "Frob"}, "InvalidAction", "The action Frob is not valid for this endpoint."),
    ({"Action": "DeleteMessage", "QueueUrl": f"http://dmq.test/{ACCOUNT}/q"},
     "MissingParameter", "The request must contain the parameter ReceiptHandle."),
    ({"Action": "GetQueueUrl", "QueueName": "absent"},
     "AWS.SimpleQueueService.NonExistentQueue",
     "The specified queue does not exist for this wsdl version."),
    ({"Action": "ReceiveMessage", "QueueUrl": f"http://dmq.test/{ACCOUNT}/q",
      "WaitTimeSeconds": "21"}, "InvalidParameterValue", None),
    ({"Action": "ReceiveMessage", "QueueUrl": f"http://dmq.test/{ACCOUNT}/q",
      "MaxNumberOfMessages": "ten"}, "InvalidParameterValue", None),
    ({"Action": "CreateQueue", "QueueName": "q", "Attribute.1.Name": "Nope",
      "Attribute.1.Value": "1"}, "InvalidAttributeName", None),
    ({"Action": "DeleteMessageBatch", "QueueUrl": f"http://dmq.test/{ACCOUNT}/q",
      "DeleteMessageBatchRequestEntry.1.Id": "a",
      "DeleteMessageBatchRequestEntry.1.ReceiptHandle": "h",
      "DeleteMessageBatchRequestEntry.2.Id": "a",
      "DeleteMessageBatchRequestEntry.2.ReceiptHandle": "h"},
     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id a repeated."),
    ({"Action": "ChangeMessageVisibilityBatch", "QueueUrl": f"http://dmq.test/{ACCOUNT}/q",
      "ChangeMessageVisibilityBatchRequestEntry.1.Id": "bad id!",
      "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle": "h"},
     "AWS.SimpleQueueService.InvalidBatchEntryId", None),
])
def test_errors_are_sqs_xml_with_legacy_codes(
    dmq: Client, params: dict[str, str], code: str, message: str | None,
) -> None:
    create(dmq, "q")
    result = dmq.http.post("/", headers=FORM, body=urlencode(params))
    assert result.status_code == 400
    assert result.headers["Content-Type"] == "text/xml"
    kind, got_code, got_message = error_of(ET.fromstring(result.body))
    assert (kind, got_code) == ("Sender", code), got_message
    if message is not None:
        assert got_message == message


@pytest.mark.parametrize("path", ["/", f"/{ACCOUNT}/q"])
def test_a_request_without_an_action_is_an_unknown_operation(dmq: Client, path: str) -> None:
    """SQS answers a request naming no action, such as a bare GET of a queue's URL, with
    404 and a bare `<UnknownOperationException/>`."""
    create(dmq, "q")
    for result in (dmq.http.get(path, headers={"Host": "dmq.test"}),
                   dmq.http.post(path, headers=FORM, body="QueueName=q")):
        assert result.status_code == 404
        assert result.headers["Content-Type"] == "text/xml"
        assert result.body == b"<UnknownOperationException/>"


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues"])
def test_account_actions_are_invalid_at_a_queue_url(dmq: Client, action: str) -> None:
    create(dmq, "q")
    status, _, root = get(dmq, f"/{ACCOUNT}/q", Action=action, QueueName="other")
    assert status == 400
    assert error_of(root) == ("Sender", "InvalidAction",
                              f"The action {action} is not valid for this endpoint.")


def test_get_queue_url_works_at_another_queues_url(dmq: Client) -> None:
    create(dmq, "first")
    second = create(dmq, "second")
    status, _, root = get(dmq, f"/{ACCOUNT}/first", Action="GetQueueUrl", QueueName="second")
    assert status == 200
    assert root.findtext(f"{NS}GetQueueUrlResult/{NS}QueueUrl") == second


def test_an_empty_receive_is_an_empty_result_element(dmq: Client) -> None:
    create(dmq, "empty")
    result = dmq.http.get(f"/{ACCOUNT}/empty?Action=ReceiveMessage", headers={"Host": "dmq.test"})
    assert result.status_code == 200
    assert b"<ReceiveMessageResult/>" in result.body


def test_a_body_that_is_not_utf8_is_a_malformed_query_string(dmq: Client) -> None:
    result = dmq.http.post("/", headers=FORM, body=b"Action=ListQueues&QueueNamePrefix=%ff")
    assert result.status_code == 400
    assert error_of(ET.fromstring(result.body))[:2] == ("Sender", "MalformedQueryString")


def test_a_query_string_action_with_a_json_body_reads_only_the_query_string(
    dmq: Client,
) -> None:
    result = dmq.http.post("/?Action=ListQueues&Version=2012-11-05",
                           headers={"Content-Type": "application/json", "Host": "dmq.test"},
                           body=b'{"QueueNamePrefix": "\xff"}')
    assert result.status_code == 200
    assert ET.fromstring(result.body).tag == f"{NS}ListQueuesResponse"


def test_an_unknown_version_is_refused(dmq: Client) -> None:
    result = dmq.http.post("/", headers=FORM, body="Action=ListQueues&Version=2011-10-01")
    assert result.status_code == 400
    assert error_of(ET.fromstring(result.body)) == (
        "Sender", "NoSuchVersion",
        "The requested version (2011-10-01) of service AmazonSQS does not exist.")


def test_a_server_fault_is_a_receiver_error(dmq: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    url = create(dmq, "raced")

    def lost_race(self: QueueRepository, record: Any, count: int = 0, quota: int = 0) -> Any:
        raise ConcurrentChangeError("the conditional request failed")

    monkeypatch.setattr(QueueRepository, "save", lost_race)
    status, _, root = post(dmq, Action="PurgeQueue", QueueUrl=url)
    assert status == 503
    assert error_of(root)[:2] == ("Receiver", "ServiceUnavailable")


def test_json_requests_are_still_json(dmq: Client) -> None:
    result = dmq.http.post("/", headers={"Content-Type": "application/x-amz-json-1.0",
                                         "X-Amz-Target": "AmazonSQS.ListQueues",
                                         "Host": "dmq.test"}, body="{}")
    assert result.status_code == 200
    assert json.loads(result.body) == {}
    assert result.headers["Content-Type"] == "application/x-amz-json-1.0"


def test_a_query_send_takes_the_trace_header_as_json_does(dmq: Client, sqs: Any) -> None:
    # GIVEN a queue, and a Query SendMessage that carries an X-Ray trace header
    url = create(dmq, "traced")
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    body = urlencode({"Version": "2012-11-05", "Action": "SendMessage", "QueueUrl": url,
                      "MessageBody": "t"})
    sent = dmq.http.post("/", headers={**FORM, "X-Amzn-Trace-Id": trace}, body=body)
    assert sent.status_code == 200
    # THEN the message carries it as AWSTraceHeader, as a JSON send would
    got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert got["Messages"][0]["Attributes"] == {"AWSTraceHeader": trace}
