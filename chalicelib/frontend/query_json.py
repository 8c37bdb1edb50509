"""Writing a Query-protocol answer as JSON, for a request that asks for it with
`Accept: application/json`, as SQS does.

SQS then renders its XML answer's structure in JSON (AWS-validated tests record
`{"ListQueuesResponse": ...}`, and GetQueueAttributes's attributes as a list of
`{"Name": ..., "Value": ...}`): `{"<Action>Response": {"<Action>Result": {...},
"ResponseMetadata": {"RequestId": ...}}}`, and an error as `{"Error": {"Type", "Code",
"Message"}, "RequestId": ...}` with the Query protocol's legacy code. Within the result, a
structure's members keep their model names, a list is a JSON list, and a map is a list of
entries named as the XML names its key and value (`Name`, `Value`); scalars are as the
JSON protocol carries them.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape

from chalicelib.service.exceptions import SqsError

CONTENT_TYPE = "application/json"


def wants_json(headers: dict[str, str]) -> bool:
    """Whether a request's (lower-cased) headers ask for a JSON answer."""
    return "application/json" in headers.get("accept", "").lower()


def response(operation: OperationModel, result: dict[str, Any], request_id: str) -> str:
    """`{"<Action>Response": ...}`: the result (when the action has one) and the request
    id, as the XML answer holds them."""
    name = operation.name
    body: dict[str, Any] = {}
    shape = operation.output_shape
    if shape is not None:
        wrapper = shape.serialization.get("resultWrapper", f"{name}Result")
        body[wrapper] = _members(shape, result)
    body["ResponseMetadata"] = {"RequestId": request_id}
    return json.dumps({f"{name}Response": body})


def error(err: SqsError, message: str, request_id: str) -> str:
    """`{"Error": ...}`: type (Sender or Receiver), the legacy code, message, request id."""
    fault = "Sender" if err.sender_fault else "Receiver"
    return json.dumps({"Error": {"Type": fault, "Code": err.legacy_code, "Message": message},
                       "RequestId": request_id})


def _members(shape: StructureShape, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    return {name: _value(member, value[name]) for name, member in shape.members.items()
            if value.get(name) is not None}


def _value(shape: Shape, value: Any) -> Any:
    if isinstance(shape, StructureShape):
        return _members(shape, value)
    if isinstance(shape, ListShape):
        return [_value(shape.member, item) for item in value] if isinstance(value, list) else []
    if isinstance(shape, MapShape):
        key_name = shape.key.serialization.get("name", "key")
        value_name = shape.value.serialization.get("name", "value")
        items = value.items() if isinstance(value, dict) else ()
        return [{key_name: key, value_name: _value(shape.value, item)} for key, item in items]
    return value
