"""GIVEN botocore's SQS model with the Query names laid over it
WHEN Query forms are decoded and results written as XML
THEN names, indices, maps, scalars and escapes follow botocore's Query serialiser and
parser, and the kept names are those of botocore's last Query model."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from chalicelib.frontend.dispatch import ACTIONS
from chalicelib.frontend.query_input import decode, form_tree
from chalicelib.frontend.query_model import operation, service_model
from chalicelib.frontend.query_names import RESULT_WRAPPERS, SHAPES
from chalicelib.frontend.query_output import escape, response

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def params(action: str, form: dict[str, str]) -> dict[str, object]:
    model = operation(action)
    assert model is not None
    return decode(model.input_shape, form_tree(form.items()))


def test_the_kept_names_are_botocore_1_29s() -> None:
    generated = subprocess.run(
        [str(ROOT / ".venv-query/bin/python"), "-m", "tests.query_client.query_names"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    assert generated == (ROOT / "chalicelib/frontend/query_names.py").read_text()


def test_every_kept_name_and_served_action_is_in_todays_model() -> None:
    model = service_model()
    assert set(SHAPES) <= set(model.shape_names)
    assert set(RESULT_WRAPPERS) <= set(model.operation_names)
    assert set(ACTIONS) <= set(model.operation_names)


def test_batch_entries_with_nested_attributes() -> None:
    got = params("SendMessageBatch", {
        "QueueUrl": "u",
        "SendMessageBatchRequestEntry.2.Id": "b",
        "SendMessageBatchRequestEntry.2.DelaySeconds": "5",
        "SendMessageBatchRequestEntry.1.Id": "a",
        "SendMessageBatchRequestEntry.1.MessageBody": "x",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "n",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "String",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "v",
    })
    assert got == {"QueueUrl": "u", "Entries": [
        {"Id": "a", "MessageBody": "x",
         "MessageAttributes": {"n": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "b", "DelaySeconds": 5}]}


def test_maps_lists_and_the_json_names() -> None:
    assert params("CreateQueue", {"QueueName": "q", "Attribute.1.Name": "DelaySeconds",
                                  "Attribute.1.Value": "3", "Tag.1.Key": "k",
                                  "Tag.1.Value": "v"}) == {
        "QueueName": "q", "Attributes": {"DelaySeconds": "3"}, "tags": {"k": "v"}}
    assert params("UntagQueue", {"QueueUrl": "u", "TagKey.1": "a", "TagKey.2": "b"}) == {
        "QueueUrl": "u", "TagKeys": ["a", "b"]}
    # a member newer than the Query model arrives under its JSON name
    assert params("ReceiveMessage", {"QueueUrl": "u", "MessageSystemAttributeNames.1": "All",
                                     "MaxNumberOfMessages": "4"}) == {
        "QueueUrl": "u", "MessageSystemAttributeNames": ["All"], "MaxNumberOfMessages": 4}


def test_scalars_that_do_not_read_as_their_type_are_left_to_the_action() -> None:
    assert params("ReceiveMessage", {"QueueUrl": "u", "WaitTimeSeconds": "soon"}) == {
        "QueueUrl": "u", "WaitTimeSeconds": "soon"}
    assert params("GetQueueUrl", {"QueueName": "q", "QueueName.1": "x"}) == {"QueueName": "q"}


def test_the_first_of_a_repeated_name_wins() -> None:
    assert form_tree([("A", "1"), ("A", "2"), ("B.1", "x"), ("B", "y")]) == {
        "A": "1", "B": {"1": "x"}}


def test_xml_escapes_markup_and_carriage_returns() -> None:
    assert escape("a<b>&c\r\n") == "a&lt;b&gt;&amp;c&#xD;\n"


def test_a_result_is_written_by_its_shape() -> None:
    model = operation("ReceiveMessage")
    assert model is not None
    text = response(model, {"Messages": [{
        "MessageId": "m", "Body": "x\r\ny", "Attributes": {"SentTimestamp": "1"},
        "MessageAttributes": {"l": {"DataType": "String", "StringListValues": ["a", "b"]}},
        "NotInTheShape": "dropped"}]}, "rid")
    root = ET.fromstring(text)
    message = root.find(f"{NS}ReceiveMessageResult/{NS}Message")
    assert message is not None
    assert message.findtext(f"{NS}Body") == "x\r\ny"
    assert message.findtext(f"{NS}Attribute/{NS}Name") == "SentTimestamp"
    assert [e.text for e in message.findall(
        f"{NS}MessageAttribute/{NS}Value/{NS}StringListValue")] == ["a", "b"]
    assert message.find(f"{NS}NotInTheShape") is None
    assert root.findtext(f"{NS}ResponseMetadata/{NS}RequestId") == "rid"


def test_booleans_are_lowercase_text() -> None:
    model = operation("DeleteMessageBatch")
    assert model is not None
    root = ET.fromstring(response(model, {"Successful": [], "Failed": [
        {"Id": "a", "SenderFault": False, "Code": "C", "Message": "M"}]}, "r"))
    assert root.findtext(
        f"{NS}DeleteMessageBatchResult/{NS}BatchResultErrorEntry/{NS}SenderFault") == "false"


def _old_botocore(*args: str, stdin: str | None = None) -> Any:
    done = subprocess.run(
        [str(ROOT / ".venv-query/bin/python"), "-m", "tests.query_client.roundtrip", *args],
        cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_every_operation_round_trips_through_botocore_1_29() -> None:
    """GIVEN, for each of SQS's operations, a sample with every member set (lists and maps
    of two, text with markup, a non-ASCII letter and a CRLF, binary values)
    WHEN botocore 1.29 serialises the input as a Query form, DMQ decodes it, DMQ writes the
    output as XML and botocore 1.29 parses it back
    THEN DMQ reads exactly the input, and botocore reads exactly the output."""
    samples = _old_botocore("samples")
    assert set(ACTIONS) <= set(samples)
    documents = {}
    for name, case in samples.items():
        model = operation(name)
        assert model is not None, name
        form = {k: str(v) for k, v in case["form"].items()}
        assert form.pop("Action") == name and form.pop("Version") == "2012-11-05"
        assert decode(model.input_shape, form_tree(form.items())) == case["input"], name
        if case["output"] is not None:
            documents[name] = response(model, case["output"], "rid")
    parsed = _old_botocore("parse", stdin=json.dumps(documents))
    assert parsed == {name: samples[name]["output"] for name in documents}
