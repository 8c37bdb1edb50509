"""The stream pump: polls DynamoDB Streams and invokes the stream handlers as Lambda would."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chalicelib.local.handlers import StreamBinding
from chalicelib.regions import RegionDownError, RegionHealth

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.pump")


class _Lambda:
    """The smallest Lambda context the handlers may read."""

    function_name = "dmq-local-stream"
    aws_request_id = ""

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def to_lambda_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record in the shape Lambda delivers it."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {
        **record,
        "dynamodb": dynamodb,
        "awsRegion": record.get("awsRegion", region),
        "eventSourceARN": stream_arn,
    }


class StreamPump:
    """Polls each bound table's stream shards and hands batches to the handlers."""

    def __init__(
        self, dynamodb: DynamoDBClient, streams: DynamoDBStreamsClient,
        bindings: list[StreamBinding], region: str, interval_s: float = 0.2,
        health: RegionHealth | None = None,
    ) -> None:
        self._health = health or RegionHealth()
        self._dynamodb = dynamodb
        self._streams = streams
        self._bindings = bindings
        self._region = region
        self._interval = interval_s
        self._iterators: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def start(self) -> None:
        """Poll in a background thread."""
        self._thread = threading.Thread(target=self._run, name=f"dmq-pump-{self._region}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling after the current batch."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                moved = self.poll_once()
            except RegionDownError as exc:
                logger.debug("stream records of %s wait: %s", self._region, exc)
                moved = 0
            except Exception:
                logger.exception("stream poll failed")
                moved = 0
            if not moved:
                self._stop.wait(self._interval)

    def poll_once(self) -> int:
        """One pass over every shard of every bound stream; return records delivered.

        A region marked down has no reachable stream: nothing is read until it is back.
        """
        if not self._health.up(self._region):
            return 0
        moved = 0
        for binding in self._bindings:
            arn = self._dynamodb.describe_table(TableName=binding.table)["Table"].get(
                "LatestStreamArn"
            )
            if arn:
                moved += self._poll_stream(binding, arn)
        return moved

    def _poll_stream(self, binding: StreamBinding, arn: str) -> int:
        moved = 0
        shards = self._streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            key = (arn, shard["ShardId"])
            if key not in self._iterators:
                self._iterators[key] = self._streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            result = self._streams.get_records(
                ShardIterator=self._iterators[key], Limit=binding.batch_size
            )
            records = result.get("Records", [])
            if records:
                event = {"Records": [to_lambda_record(dict(r), arn, self._region)
                                     for r in records]}
                binding.handler(event, _Lambda())  # a failure leaves the iterator: retried
                moved += len(records)
            self._iterators[key] = result.get("NextShardIterator") or self._iterators[key]
        self.delivered += moved
        return moved
