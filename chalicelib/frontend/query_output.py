"""Writing an action's result, and an error, as the XML SQS's Query protocol answers with.

The result is the object the JSON protocol would send; the action's output shape says how
each member is written, as botocore's Query parser reads it back: a structure's members
as elements in the shape's order; a flattened list as repeated elements (the list
member's name when it has one), another list as `<Name><member>..</member></Name>`; a
flattened map as repeated `<Name><Key>k</Key><Value>v</Value></Name>`. Booleans are
`true`/`false`, numbers decimal text, binary values base64 (as JSON carries them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape

from chalicelib.frontend.query_names import XML_NAMESPACE
from chalicelib.service.exceptions import SqsError

DECLARATION = '<?xml version="1.0"?>'
# Text content escapes: markup, and carriage returns, which an XML parser would
# otherwise turn into line feeds (a body's MD5 is of its exact characters).
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})


def escape(text: str) -> str:
    """Text as XML element content."""
    return text.translate(_ESCAPES)


def response(operation: OperationModel, result: dict[str, Any], request_id: str) -> str:
    """`<ActionResponse>`: the result (when the action has one) and the request id."""
    name = operation.name
    body = ""
    shape = operation.output_shape
    if shape is not None:
        wrapper = shape.serialization.get("resultWrapper", f"{name}Result")
        body = _element(wrapper, _members(shape, result))
    metadata = _element("ResponseMetadata", _element("RequestId", escape(request_id)))
    return (f'{DECLARATION}<{name}Response xmlns="{XML_NAMESPACE}">{body}{metadata}'
            f"</{name}Response>")


def error(err: SqsError, message: str, request_id: str) -> str:
    """`<ErrorResponse>`: type (Sender or Receiver), the legacy code, message, request id."""
    fault = "Sender" if err.sender_fault else "Receiver"
    detail = (_element("Type", fault) + _element("Code", escape(err.legacy_code))
              + _element("Message", escape(message)) + "<Detail/>")
    return (f'{DECLARATION}<ErrorResponse xmlns="{XML_NAMESPACE}">{_element("Error", detail)}'
            f'{_element("RequestId", escape(request_id))}</ErrorResponse>')


def _element(name: str, content: str) -> str:
    """`<name>content</name>`, or `<name/>` when empty (as SQS writes an empty result)."""
    return f"<{name}>{content}</{name}>" if content else f"<{name}/>"


def _members(shape: StructureShape, value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    parts = []
    for name, member in shape.members.items():
        if value.get(name) is not None:
            parts.append(_write(member, member.serialization.get("name", name), value[name]))
    return "".join(parts)


def _write(shape: Shape, name: str, value: Any) -> str:
    if isinstance(shape, StructureShape):
        return _element(name, _members(shape, value))
    if isinstance(shape, ListShape):
        items = value if isinstance(value, list) else []
        item_name = shape.member.serialization.get("name")
        if shape.serialization.get("flattened"):
            return "".join(_write(shape.member, item_name or name, item) for item in items)
        return _element(name, "".join(_write(shape.member, item_name or "member", item)
                                      for item in items))
    if isinstance(shape, MapShape):
        return _map(shape, name, value if isinstance(value, dict) else {})
    return _element(name, escape(_text(shape, value)))


def _map(shape: MapShape, name: str, value: dict[str, Any]) -> str:
    key_name = shape.key.serialization.get("name", "key")
    value_name = shape.value.serialization.get("name", "value")
    entries = [_write(shape.key, key_name, key) + _write(shape.value, value_name, item)
               for key, item in value.items()]
    if shape.serialization.get("flattened"):
        return "".join(_element(name, entry) for entry in entries)
    return _element(name, "".join(_element("entry", entry) for entry in entries))


def _text(shape: Shape, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if shape.type_name == "timestamp" and isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, tz=UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return str(value)
