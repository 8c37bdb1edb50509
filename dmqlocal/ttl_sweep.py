"""DynamoDB's TTL for the local stores, which never delete expired items: request records
(`request#...` in the control table, docs/request-dedup.md) past their `expires_at` are
removed once a minute, as DynamoDB's TTL removes them on AWS. Reads never depend on it:
a record past its window is treated as gone whether or not it is still there.

Background work only, bounded per pass; no request waits on it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chalicelib.dynamo_batches import write_some
from dmqlocal.handlers import ScheduleBinding

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from chalicelib.clock import Clock

logger = logging.getLogger("dmq.local")
PREFIX = "request#"
PERIOD_S = 60.0
MAX_PAGES = 20  # per pass; what is left waits for the next pass


def sweep_expired_records(dynamodb: DynamoDBClient, table: str, now_s: int,
                          max_pages: int = MAX_PAGES) -> int:
    """Delete the request records whose `expires_at` has passed; how many were deleted."""
    deleted = 0
    start: dict[str, Any] | None = None
    for _ in range(max_pages):
        kwargs: dict[str, Any] = {
            "TableName": table, "ProjectionExpression": "#k",
            "FilterExpression": "begins_with(#k, :prefix) AND expires_at < :now",
            "ExpressionAttributeNames": {"#k": "key"},
            "ExpressionAttributeValues": {":prefix": {"S": PREFIX}, ":now": {"N": str(now_s)}},
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = dynamodb.scan(**kwargs)
        keys = [{"key": item["key"]} for item in page.get("Items", [])]
        # What stays unprocessed waits for the next pass: partial on purpose.
        left = write_some(dynamodb, table, [{"DeleteRequest": {"Key": k}} for k in keys])
        deleted += len(keys) - len(left)
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    return deleted


def sweep_binding(region: str, dynamodb: DynamoDBClient, table: str,
                  clock: Clock) -> ScheduleBinding:
    """The local scheduler's once-a-minute sweep of one region's control table."""

    def handler(event: Any, context: Any) -> None:
        deleted = sweep_expired_records(dynamodb, table, clock.now_ms() // 1000)
        if deleted:
            logger.info("removed %d expired request records in %s", deleted, region)

    return ScheduleBinding(f"sweep_request_records_{region}", handler, PERIOD_S)
