"""The stream pump on DynamoDB Local and on the in-memory store: checkpoints, expired
iterators, trimmed data, retries."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from dmqlocal.handlers import StreamBinding
from dmqlocal.pump import StreamPump
from infra import provision
from tests.contract.conftest import REGION, Store

PK = "000000000000/q#0"


class Streams:
    """The Streams client, counting calls and failing the next one of a kind on demand."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail_next: dict[str, str] = {}  # operation -> error code

    def __getattr__(self, operation: str) -> Any:
        method = getattr(self._client, operation)

        def call(**kwargs: Any) -> Any:
            self.calls.append((operation, kwargs))
            code = self.fail_next.pop(operation, None)
            if code is not None:
                raise ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)
            return method(**kwargs)

        return call

    def count(self, operation: str) -> int:
        """Calls of `operation` so far."""
        return sum(1 for name, _ in self.calls if name == operation)


class Recorder:
    """A stream handler that records the message ids it took; it fails `failures` times."""

    def __init__(self, name: str, failures: int = 0) -> None:
        self.__name__ = name
        self.failures = failures
        self.seen: list[str] = []
        self.calls: list[float] = []

    def __call__(self, event: dict[str, Any], context: Any) -> None:
        self.calls.append(time.monotonic())
        if self.failures:
            self.failures -= 1
            raise RuntimeError("handler down")
        self.seen += [r["dynamodb"]["Keys"]["sk"]["S"] for r in event["Records"]]


def _send(store: Store, *ids: str) -> None:
    for sk in ids:
        store.dynamodb.put_item(TableName=store.messages, Item={
            "pk": {"S": PK}, "sk": {"S": sk}, "visible_at": {"N": "1"}})


def _pump(store: Store, streams: Any, handlers: list[Recorder],
          checkpoints: Path | None = None) -> StreamPump:
    return StreamPump(store.dynamodb, streams,
                      [StreamBinding(store.messages, h, 10) for h in handlers], REGION,
                      checkpoint_dir=checkpoints)


def _drain(pump: StreamPump, passes: int = 5) -> int:
    return sum(pump.poll_once() for _ in range(passes))


def test_a_new_pump_resumes_after_the_checkpoint(local_store: Store, tmp_path: Path) -> None:
    # GIVEN a pump that handed m1..m3 to `replicate` while `archive` kept failing
    replicate, archive = Recorder("replicate"), Recorder("archive", failures=1000)
    first = _pump(local_store, local_store.streams, [replicate, archive], tmp_path)
    _send(local_store, "m1", "m2", "m3")
    _drain(first)
    first.stop()
    assert replicate.seen == ["m1", "m2", "m3"] and archive.seen == []
    # WHEN more is written and a new pump starts from the same checkpoints
    _send(local_store, "m4", "m5")
    replicate2, archive2 = Recorder("replicate"), Recorder("archive")
    _drain(_pump(local_store, local_store.streams, [replicate2, archive2], tmp_path))
    # THEN each handler gets exactly what it had not taken: nothing replayed, nothing lost
    assert replicate2.seen == ["m4", "m5"]
    assert archive2.seen == ["m1", "m2", "m3", "m4", "m5"]


def test_an_idle_pass_costs_one_read_per_open_shard(local_store: Store) -> None:
    # GIVEN a pump that has read everything
    streams = Streams(local_store.streams)
    pump = _pump(local_store, streams, [Recorder("replicate")])
    _send(local_store, "m1")
    _drain(pump)
    streams.calls.clear()
    # WHEN it passes over the stream with nothing new
    assert _drain(pump, passes=3) == 0
    # THEN each pass made one GetRecords and nothing else
    shards = local_store.streams.describe_stream(
        StreamArn=local_store.stream_arn(local_store.messages))["StreamDescription"]["Shards"]
    assert [name for name, _ in streams.calls] == ["get_records"] * 3 * len(shards)
    assert {call["Limit"] for _, call in streams.calls} == {1000}


def test_an_expired_iterator_resumes_after_the_last_record_read(local_store: Store) -> None:
    # GIVEN a pump that has read m1, m2
    streams = Streams(local_store.streams)
    handler = Recorder("replicate")
    pump = _pump(local_store, streams, [handler])
    _send(local_store, "m1", "m2")
    _drain(pump)
    # WHEN its iterator has expired by the time m3, m4 are written
    _send(local_store, "m3", "m4")
    streams.fail_next["get_records"] = "ExpiredIteratorException"
    _drain(pump)
    # THEN it took a fresh iterator after m2 and lost and repeated nothing
    assert handler.seen == ["m1", "m2", "m3", "m4"]
    fresh = [c for name, c in streams.calls if name == "get_shard_iterator"][-1]
    assert fresh["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"


def test_a_trimmed_checkpoint_restarts_at_the_horizon(local_store: Store, tmp_path: Path) -> None:
    # GIVEN checkpoints after m1, m2
    handler = Recorder("replicate")
    _drain(_pump(local_store, local_store.streams, [handler], tmp_path))
    _send(local_store, "m1", "m2")
    _drain(_pump(local_store, local_store.streams, [handler], tmp_path))
    _send(local_store, "m3")
    # WHEN a new pump finds the checkpoint's position trimmed, then its first read trimmed
    streams = Streams(local_store.streams)
    streams.fail_next = {"get_shard_iterator": "TrimmedDataAccessException",
                         "get_records": "TrimmedDataAccessException"}
    resumed = Recorder("replicate")
    _drain(_pump(local_store, streams, [resumed], tmp_path))
    # THEN it read again from the horizon and handed over only what was not handled
    assert handler.seen == ["m1", "m2"]
    assert resumed.seen == ["m3"]
    kinds = [c["ShardIteratorType"] for name, c in streams.calls if name == "get_shard_iterator"]
    assert kinds[:2] == ["AFTER_SEQUENCE_NUMBER", "TRIM_HORIZON"]


def test_a_failing_handler_backs_off_without_holding_the_others(local_store: Store) -> None:
    # GIVEN two handlers of the same stream; `archive` fails twice
    replicate, archive = Recorder("replicate"), Recorder("archive", failures=2)
    pump = _pump(local_store, local_store.streams, [replicate, archive])
    pump.BACKOFF_MIN_S, pump.BACKOFF_MAX_S = 0.05, 0.1
    _send(local_store, "m1", "m2")
    # WHEN the pump passes over the stream for a while
    deadline = time.monotonic() + 2.0
    while len(archive.seen) < 2 and time.monotonic() < deadline:
        pump.poll_once()
        if len(replicate.seen) < 4:
            _send(local_store, f"r{len(replicate.seen)}")
        time.sleep(0.01)
    # THEN `replicate` went on while `archive` was retried after growing pauses
    assert replicate.seen[:2] == ["m1", "m2"] and len(replicate.seen) >= 4
    assert archive.seen[:2] == ["m1", "m2"]
    gaps = [b - a for a, b in zip(archive.calls, archive.calls[1:], strict=False)]
    assert len(archive.calls) >= 3
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1


def test_a_recreated_table_is_followed_on_its_new_stream(local_store: Store,
                                                         tmp_path: Path) -> None:
    # GIVEN a pump that handed over m1 and checkpointed it
    handler = Recorder("replicate")
    pump = _pump(local_store, local_store.streams, [handler], tmp_path)
    _send(local_store, "m1")
    _drain(pump)
    old_stream = local_store.stream_arn(local_store.messages)
    # WHEN, between two passes, the table is deleted and created again, and m2 written
    local_store.dynamodb.delete_table(TableName=local_store.messages)
    props = provision.resources({"MessagesTableName": local_store.messages})
    provision._create_table(local_store.dynamodb, props["MessagesTable"]["Properties"])
    _send(local_store, "m2")
    _drain(pump)
    # THEN the pump found the new stream, read it from its start, and dropped the old
    # stream's checkpoints
    assert local_store.stream_arn(local_store.messages) != old_stream
    assert handler.seen == ["m1", "m2"]
    saved = [json.loads(p.read_text())["streamArn"] for p in tmp_path.glob("*.json")]
    assert saved == [local_store.stream_arn(local_store.messages)]


def _wait_seen(handler: Recorder, sk: str, timeout_s: float = 10.0) -> float:
    """Seconds until `handler` took `sk`."""
    started = time.monotonic()
    while sk not in handler.seen and time.monotonic() - started < timeout_s:
        time.sleep(0.01)
    assert sk in handler.seen, handler.seen
    return time.monotonic() - started


def test_a_quiet_pump_backs_off_to_its_cap_and_speeds_up_when_records_come(
        local_store: Store) -> None:
    # GIVEN a running pump over a stream that has been quiet for a few seconds
    streams = Streams(local_store.streams)
    handler = Recorder("replicate")
    pump = StreamPump(local_store.dynamodb, streams,
                      [StreamBinding(local_store.messages, handler, 10)], REGION,
                      interval_s=0.2, idle_cap_s=1.0)
    pump.start()
    try:
        _send(local_store, "m1")
        _wait_seen(handler, "m1")
        time.sleep(3.0)
        # WHEN nothing is written for 4 s
        before = streams.count("get_records")
        time.sleep(4.0)
        idle_reads = streams.count("get_records") - before
        # THEN it read about once a second per shard (at the fast pace: 20 reads)
        shards = local_store.streams.describe_stream(StreamArn=local_store.stream_arn(
            local_store.messages))["StreamDescription"]["Shards"]
        assert idle_reads <= 6 * len(shards), idle_reads
        # WHEN a record is written by another client THEN the pump sees it within its cap
        _send(local_store, "m2")
        assert _wait_seen(handler, "m2") < 1.0 + 0.5
        # WHEN it is woken (a request reached the server) THEN it reads at once
        time.sleep(3.0)
        _send(local_store, "m3")
        pump.wake()
        assert _wait_seen(handler, "m3") < 0.5
    finally:
        pump.stop()
