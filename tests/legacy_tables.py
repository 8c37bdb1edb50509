"""The messages table as earlier versions of DMQ made it.

Their visibility index projects only `expires_ms` and `rc`, and an index's projection
cannot change once the table exists; DMQ reads such a table's claimed messages back with
one batch read (`chalicelib/backend/dynamo_claims.py`).
"""

from __future__ import annotations

from typing import Any

from infra import provision

MESSAGES_TABLE = "dmq-messages"
LEGACY_PROJECTION = {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["expires_ms", "rc"]}


def use_legacy_index(dynamodb: Any) -> None:
    """Make the (empty) messages table again, its index projected as earlier versions did."""
    dynamodb.delete_table(TableName=MESSAGES_TABLE)
    request, _ = provision.table_request(provision.resources()["MessagesTable"]["Properties"])
    (index,) = request["LocalSecondaryIndexes"]
    request["LocalSecondaryIndexes"] = [{**index, "Projection": LEGACY_PROJECTION}]
    dynamodb.create_table(**request)
