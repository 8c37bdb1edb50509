"""GIVEN a stream that shows a change some time after it was made (DynamoDB Streams do;
LocalStack's, under load, seconds to tens of seconds after)
WHEN the stop (or a full export) waits for the pump to catch up right after the last write
THEN a pump with a settle time counts as caught up only once the stream has shown nothing
new for that long: the late record reaches the handlers first. Without one (DynamoDB
Local's streams show a change with it) the first pass that finds nothing is enough.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dmqlocal.handlers import StreamBinding
from dmqlocal.pump import StreamPump
from tests.unit.test_stream_pump_lineage import ARN, FakeDynamoDB

SHARD = "shardId-00000000000000000001-aaaaaaaa"
LAG_S = 0.3


class LaggingStreams:
    """One open shard whose records show `LAG_S` after they were written."""

    def __init__(self) -> None:
        self.written: list[tuple[float, str]] = []

    def write(self, seq: str) -> None:
        self.written.append((time.monotonic() + LAG_S, seq))

    def list_streams(self, TableName: str) -> dict[str, Any]:
        return {"Streams": [{"StreamArn": ARN, "TableName": TableName,
                             "StreamLabel": ARN.rsplit("/", 1)[1]}]}

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [
            {"ShardId": SHARD, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str,
                           SequenceNumber: str | None = None) -> dict[str, Any]:
        seqs = [seq for _, seq in self.written]
        start = seqs.index(SequenceNumber) + 1 if SequenceNumber else 0
        return {"ShardIterator": str(start)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        position, now = int(ShardIterator), time.monotonic()
        shown = [seq for at, seq in self.written[position:] if at <= now]
        return {"Records": [{"eventName": "INSERT", "dynamodb": {
            "SequenceNumber": seq, "Keys": {"sk": {"S": f"m{seq}"}}}} for seq in shown],
            "NextShardIterator": str(position + len(shown))}


def _run(settle_s: float, folder: Path) -> tuple[bool, list[str]]:
    """Write a record, then at once wait (up to 2 s) for the running pump to catch up;
    what the wait said and what the handler had been given by then."""
    streams, seen = LaggingStreams(), list[str]()

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    pump = StreamPump(FakeDynamoDB(), streams,  # type: ignore[arg-type]
                      [StreamBinding("dmq-messages", handler, 10)], "us-east-1",
                      interval_s=0.02, checkpoint_dir=folder, settle_s=settle_s)
    pump.start()
    try:
        assert pump.wait_caught_up(time.monotonic(), timeout_s=2.0)  # an empty stream
        streams.write("1")
        caught_up = pump.wait_caught_up(time.monotonic(), timeout_s=2.0)
        return caught_up, list(seen)
    finally:
        pump.stop()


def test_a_pump_with_a_settle_time_waits_for_a_record_the_stream_shows_late(
        tmp_path: Path) -> None:
    # GIVEN a settle time longer than the stream's lag
    # WHEN a record is written and the pump is asked to catch up at once
    caught_up, seen = _run(settle_s=2 * LAG_S, folder=tmp_path)
    # THEN it is caught up only with the late record handed over
    assert caught_up
    assert seen == ["1"]


def test_without_a_settle_time_the_first_quiet_pass_is_enough(tmp_path: Path) -> None:
    # GIVEN no settle time (DynamoDB Local: a change's record is in its stream at once)
    # WHEN the same happens
    started = time.monotonic()
    caught_up, seen = _run(settle_s=0.0, folder=tmp_path)
    # THEN the pump counts as caught up at once, before the lagging record shows
    assert caught_up
    assert seen == []
    assert time.monotonic() - started < LAG_S + 1.0
