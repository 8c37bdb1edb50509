"""A request refused at the front door (`admission`), answered in its protocol's error
shape without parsing its body: JSON 1.0 or Query XML (its JSON when the request accepts
`application/json`), as `query_protocol.is_query` tells them apart from the method, the
content type and the query string."""

from __future__ import annotations

from collections.abc import Mapping

from chalicelib.domain.unique_ids import random_uuid
from chalicelib.frontend import json_protocol, query_json, query_protocol
from chalicelib.frontend.json_protocol import HttpResponse
from chalicelib.service.exceptions import SqsError


def refusal(error: SqsError, method: str, headers: Mapping[str, str],
            query: Mapping[str, str]) -> HttpResponse:
    """The SQS error answer to a request refused before it was read."""
    request_id = random_uuid()
    if query_protocol.is_query(method, headers, query):
        as_json = query_json.wants_json({k.lower(): v for k, v in headers.items()})
        return query_protocol.error_response(error, request_id, as_json)
    return json_protocol.error_response(error, request_id)
