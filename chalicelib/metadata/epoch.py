"""The store's epoch: a random id that names one lifetime of the stored data.

It is the `epoch` item of the control table, created once beside the tables
(conditionally, so concurrent starters agree on one) and kept with the data. A store
that keeps its data across restarts (DynamoDB Local with `-dbPath`, AWS) keeps its
epoch; a store that starts empty (the in-process `memory` store) gets a new one. Stream
sequence numbers, and even stream ARNs, can repeat from one lifetime to the next, so
the audit archive keys every record by epoch, stream ARN and sequence number.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

EPOCH_KEY = "epoch"


def new_epoch_id() -> str:
    """A fresh random epoch id (64 bits, hex)."""
    return uuid.uuid4().hex[:16]


def read_epoch(client: DynamoDBClient, table: str) -> str | None:
    """The control table's epoch, or None when it has none yet."""
    with translate_errors():
        item = client.get_item(TableName=table, Key={"key": {"S": EPOCH_KEY}},
                               ConsistentRead=True).get("Item")
    return str(item["id"]["S"]) if item else None


def ensure_epoch(client: DynamoDBClient, table: str,
                 new_id: Callable[[], str] = new_epoch_id) -> str:
    """The control table's epoch, created first if it has none."""
    found = read_epoch(client, table)
    if found is not None:
        return found
    candidate = new_id()
    with translate_errors():
        if _create(client, table, candidate):
            return candidate
    # Another starter created it between our read and our write: theirs is the epoch.
    return read_epoch(client, table) or candidate


def _create(client: DynamoDBClient, table: str, epoch: str) -> bool:
    """Write the epoch unless one exists; False when one did."""
    try:
        client.put_item(TableName=table, Item={"key": {"S": EPOCH_KEY}, "id": {"S": epoch}},
                        ConditionExpression="attribute_not_exists(#k)",
                        ExpressionAttributeNames={"#k": "key"})
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True
