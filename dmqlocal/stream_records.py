"""Stream records in the shape Lambda hands them to a function."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chalicelib.domain.unique_ids import random_uuid

Record = dict[str, Any]


class LambdaContext:
    """The smallest Lambda context the handlers may read."""

    function_name = "dmq-local-stream"
    aws_request_id = ""

    def __init__(self) -> None:
        self.aws_request_id = random_uuid()

    def get_remaining_time_in_millis(self) -> int:
        """As much time as Lambda's longest run."""
        return 900_000


def source_arn(stream_arn: str, region: str) -> str:
    """The stream ARN as Lambda names it: DynamoDB Local writes `ddblocal` as the region."""
    parts = stream_arn.split(":")
    if len(parts) > 5:
        parts[3] = region
    return ":".join(parts)


def _value(value: Any) -> Any:
    """An attribute value as DynamoDB writes it: DynamoDB Local's stream images give an
    empty map as `{}` (no type), which no DynamoDB accepts back (replication writes
    images); an empty list keeps its `L`, so `{}` can only be an empty map."""
    if not value:
        return {"M": {}}
    if "M" in value:
        return {"M": _image(value["M"])}
    if "L" in value:
        return {"L": [_value(v) for v in value["L"]]}
    return value


def _image(image: dict[str, Any]) -> dict[str, Any]:
    return {name: _value(value) for name, value in image.items()}


def to_lambda_record(record: Record, stream_arn: str, region: str) -> Record:
    """A GetRecords record in the shape Lambda delivers it."""
    dynamodb = dict(record["dynamodb"])
    for image in ("NewImage", "OldImage"):
        if image in dynamodb:
            dynamodb[image] = _image(dynamodb[image])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": dynamodb, "awsRegion": region,
            "eventSourceARN": source_arn(stream_arn, region)}


def sequence_number(record: Record) -> str:
    """The record's position in its shard (compare them as integers)."""
    return str(record["dynamodb"]["SequenceNumber"])
