"""botocore 1.29's own Query serialiser and parser, for the round-trip test of DMQ's codec.

Run under .venv-query. `samples` prints, for every SQS operation, a sample input (every
member filled), the form botocore 1.29 sends for it, and a sample output. `parse` reads
`{operation: xml}` on stdin and prints what botocore 1.29 parses from each document.
Binary values travel as base64 text, as in the JSON protocol.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import botocore.session
from botocore.model import Shape
from botocore.parsers import QueryParser
from botocore.serialize import QuerySerializer

TEXT = "v <&> \u00e9\r\nend"  # markup, a non-ASCII letter and a CRLF, to test escaping


def sample(shape: Shape, name: str) -> Any:
    """A value of the shape with every member set, lists and maps of two."""
    kind = shape.type_name
    if kind == "structure":
        return {m: sample(member, m) for m, member in shape.members.items()}
    if kind == "list":
        return [sample(shape.member, f"{name}1"), sample(shape.member, f"{name}2")]
    if kind == "map":
        keys = list(shape.key.enum[:2]) if shape.key.enum else [f"{name}-a", f"{name}-b"]
        return {key: sample(shape.value, key) for key in keys}
    if kind in ("integer", "long"):
        return 7
    if kind == "boolean":
        return True
    if kind == "blob":
        return b"\x00\xffbin"
    return shape.enum[0] if shape.enum else f"{name} {TEXT}"


def jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


def samples() -> dict[str, Any]:
    model = botocore.session.get_session().get_service_model("sqs")
    out: dict[str, Any] = {}
    for name in model.operation_names:
        op = model.operation_model(name)
        params = sample(op.input_shape, name) if op.input_shape is not None else {}
        form = QuerySerializer().serialize_to_request(params, op)["body"]
        output = sample(op.output_shape, name) if op.output_shape is not None else None
        out[name] = {"input": jsonable(params), "form": form, "output": jsonable(output)}
    return out


def parse(documents: dict[str, str]) -> dict[str, Any]:
    model = botocore.session.get_session().get_service_model("sqs")
    out: dict[str, Any] = {}
    for name, xml in documents.items():
        op = model.operation_model(name)
        response = {"body": xml.encode(), "headers": {}, "status_code": 200}
        out[name] = jsonable(QueryParser().parse(response, op.output_shape))
    return out


if __name__ == "__main__":
    if sys.argv[1] == "samples":
        json.dump(samples(), sys.stdout)
    else:
        json.dump(parse(json.load(sys.stdin)), sys.stdout)
