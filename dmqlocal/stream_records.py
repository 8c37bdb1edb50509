"""Stream records in the shape Lambda hands them to a function."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

Record = dict[str, Any]


class LambdaContext:
    """The smallest Lambda context the handlers may read."""

    function_name = "dmq-local-stream"
    aws_request_id = ""

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        """As much time as Lambda's longest run."""
        return 900_000


def source_arn(stream_arn: str, region: str) -> str:
    """The stream ARN as Lambda names it: DynamoDB Local writes `ddblocal` as the region."""
    parts = stream_arn.split(":")
    if len(parts) > 5:
        parts[3] = region
    return ":".join(parts)


def to_lambda_record(record: Record, stream_arn: str, region: str) -> Record:
    """A GetRecords record in the shape Lambda delivers it."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": dynamodb, "awsRegion": region,
            "eventSourceARN": source_arn(stream_arn, region)}


def sequence_number(record: Record) -> str:
    """The record's position in its shard (compare them as integers)."""
    return str(record["dynamodb"]["SequenceNumber"])
