"""GIVEN a Query-protocol request with `Accept: application/json` WHEN DMQ answers it THEN
the answer is JSON, as SQS's is (AWS-validated tests record it: a ListQueues GET answers
`{"ListQueuesResponse": ...}`, GetQueueAttributes's attributes are a list of Name and
Value, an error is `{"Error": {"Code": ..., "Message": ...}}`); without that header, or
for a request that names no action, the answer stays XML. A JSON-protocol request is
JSON whatever it accepts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import urlencode

from chalice.test import Client

from chalicelib.frontend.refusals import refusal
from chalicelib.service.exceptions import RequestThrottledError
from tests.functional.test_query_protocol import ACCOUNT, FORM, NS, create

JSON_ACCEPT = {"Accept": "application/json"}


def _post(dmq: Client, path: str = "/", **params: str) -> tuple[int, dict[str, str], Any]:
    body = urlencode({"Version": "2012-11-05", **params})
    result = dmq.http.post(path, headers={**FORM, **JSON_ACCEPT}, body=body)
    assert result.headers["Content-Type"] == "application/json", result.body
    return result.status_code, result.headers, json.loads(result.body)


def _get(dmq: Client, path: str, **params: str) -> tuple[int, dict[str, str], Any]:
    result = dmq.http.get(f"{path}?{urlencode(params)}",
                          headers={"Host": "dmq.test", **JSON_ACCEPT})
    assert result.headers["Content-Type"] == "application/json", result.body
    return result.status_code, result.headers, json.loads(result.body)


def test_a_list_is_answered_in_json(dmq: Client) -> None:
    # GIVEN a queue WHEN ListQueues asks for JSON THEN the XML answer's structure, in JSON
    url = create(dmq, "listed")
    status, headers, doc = _get(dmq, "/", Action="ListQueues", Version="2012-11-05")
    assert status == 200
    assert doc == {"ListQueuesResponse": {
        "ListQueuesResult": {"QueueUrls": [url]},
        "ResponseMetadata": {"RequestId": headers["x-amzn-RequestId"]}}}


def test_attributes_are_a_list_of_names_and_values(dmq: Client) -> None:
    create(dmq, "attrs")
    status, _, doc = _get(dmq, f"/{ACCOUNT}/attrs", Action="GetQueueAttributes",
                          **{"AttributeName.1": "All"})
    assert status == 200
    attributes = doc["GetQueueAttributesResponse"]["GetQueueAttributesResult"]["Attributes"]
    values = {a["Name"]: a["Value"] for a in attributes}
    assert values["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:attrs"
    assert values["VisibilityTimeout"] == "30"


def test_a_received_message_is_answered_in_json(dmq: Client) -> None:
    url = create(dmq, "messages")
    status, _, doc = _post(dmq, Action="SendMessage", QueueUrl=url, MessageBody="hello", **{
        "MessageAttribute.1.Name": "colour", "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "red"})
    assert status == 200
    sent = doc["SendMessageResponse"]["SendMessageResult"]
    status, _, doc = _post(dmq, Action="ReceiveMessage", QueueUrl=url, **{
        "MessageAttributeName.1": "All", "AttributeName.1": "SenderId"})
    assert status == 200
    (message,) = doc["ReceiveMessageResponse"]["ReceiveMessageResult"]["Messages"]
    assert (message["MessageId"], message["Body"]) == (sent["MessageId"], "hello")
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["MessageAttributes"] == [
        {"Name": "colour", "Value": {"DataType": "String", "StringValue": "red"}}]
    assert [a["Name"] for a in message["Attributes"]] == ["SenderId"]


def test_an_action_without_a_result_has_only_metadata(dmq: Client) -> None:
    url = create(dmq, "tagged")
    status, headers, doc = _post(dmq, Action="TagQueue", QueueUrl=url,
                                 **{"Tag.1.Key": "k", "Tag.1.Value": "v"})
    assert status == 200
    assert doc == {"TagQueueResponse": {
        "ResponseMetadata": {"RequestId": headers["x-amzn-RequestId"]}}}


def test_an_error_is_answered_in_json(dmq: Client) -> None:
    # GIVEN a queue WHEN an account action is asked at its URL, in JSON THEN SQS's error
    create(dmq, "q")
    status, headers, doc = _get(dmq, f"/{ACCOUNT}/q", Action="ListQueues")
    assert status == 400
    assert doc == {"Error": {
        "Type": "Sender", "Code": "InvalidAction",
        "Message": "The action ListQueues is not valid for this endpoint."},
        "RequestId": headers["x-amzn-RequestId"]}


def test_an_error_in_json_keeps_the_query_protocols_code_and_words(dmq: Client) -> None:
    status, _, doc = _post(dmq, Action="GetQueueAttributes",
                           QueueUrl=f"http://dmq.test/{ACCOUNT}/absent")
    assert status == 400
    assert (doc["Error"]["Code"], doc["Error"]["Message"]) == (
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist for this wsdl version.")


def test_a_request_naming_no_action_stays_xml(dmq: Client) -> None:
    create(dmq, "q")
    result = dmq.http.get(f"/{ACCOUNT}/q", headers={"Host": "dmq.test", **JSON_ACCEPT})
    assert result.status_code == 404
    assert b"<UnknownOperationException" in result.body


def test_without_the_header_the_answer_stays_xml(dmq: Client) -> None:
    result = dmq.http.get("/?Action=ListQueues&Version=2012-11-05",
                          headers={"Host": "dmq.test"})
    assert result.status_code == 200
    assert ET.fromstring(result.body).tag == f"{NS}ListQueuesResponse"


def test_a_json_protocol_request_stays_json_protocol(dmq: Client, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="json")["QueueUrl"]
    result = dmq.http.post("/", headers={
        "Content-Type": "application/x-amz-json-1.0", "Host": "dmq.test",
        "X-Amz-Target": "AmazonSQS.GetQueueUrl", **JSON_ACCEPT}, body='{"QueueName": "json"}')
    assert result.status_code == 200
    assert result.headers["Content-Type"] == "application/x-amz-json-1.0"
    assert json.loads(result.body) == {"QueueUrl": url}


def test_a_query_request_refused_at_the_door_is_answered_in_json_too() -> None:
    # A refusal before the request is read (throttling, admission) follows the same rule
    answer = refusal(RequestThrottledError("Request is throttled."), "GET",
                     JSON_ACCEPT, {"Action": "ListQueues"})
    assert answer.headers["Content-Type"] == "application/json"
    assert json.loads(answer.body)["Error"]["Message"] == "Request is throttled."
