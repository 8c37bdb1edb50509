"""GIVEN requests metered in memory WHEN flushes are due THEN usage lands in batches,
with 64 KB billing chunks counted as SQS bills them."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from chalicelib.usage.metering import payload_bytes, queue_of
from chalicelib.usage.records import BILLING_CHUNK_BYTES, UsageMeter, billing_units
from tests.clocks import FakeClock


class MemorySink:
    def __init__(self, fail: bool = False) -> None:
        self.objects: dict[str, bytes] = {}
        self.fail = fail

    def put(self, key: str, data: bytes) -> None:
        if self.fail:
            raise OSError("disk full")
        self.objects[key] = data

    def rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for data in self.objects.values()
                for line in gzip.decompress(data).decode().splitlines()]


@pytest.mark.parametrize(("size", "units"), [
    (0, 1), (1, 1), (BILLING_CHUNK_BYTES, 1), (BILLING_CHUNK_BYTES + 1, 2),
    (256 * 1024, 4), (1024 * 1024, 16),
])
def test_each_started_64_kb_chunk_is_one_billed_request(size: int, units: int) -> None:
    assert billing_units(size) == units


def test_requests_are_aggregated_per_minute_and_flushed_when_due() -> None:
    sink, clock = MemorySink(), FakeClock(start_ms=1_800_000_000_000)
    meter = UsageMeter(sink, clock, flush_interval_s=60)
    for _ in range(100):
        meter.record("111", "111/a", "SendMessage", 70_000)
    meter.record("111", "111/a", "ReceiveMessage", 0)
    # THEN nothing is written per request
    assert sink.objects == {} and meter.pending() == 2
    # WHEN a minute passes THEN the next request flushes everything in one object
    clock.advance(60)
    meter.record("111", "111/b", "SendMessage", 10)
    assert len(sink.objects) == 1 and meter.pending() == 0
    by_action = {(r["queue"], r["action"]): r for r in sink.rows()}
    assert by_action[("111/a", "SendMessage")] == {
        "account": "111", "queue": "111/a", "action": "SendMessage",
        "minute": by_action[("111/a", "SendMessage")]["minute"], "outcome": "ok",
        "requests": 100, "bytes": 7_000_000, "billing_units": 200}
    assert by_action[("111/a", "ReceiveMessage")]["billing_units"] == 1
    assert by_action[("111/b", "SendMessage")]["minute"] != by_action[
        ("111/a", "SendMessage")]["minute"]


def test_a_failed_flush_keeps_the_counts_for_the_next_one() -> None:
    sink, clock = MemorySink(fail=True), FakeClock()
    meter = UsageMeter(sink, clock)
    meter.record("111", "111/a", "SendMessage", 5)
    with pytest.raises(OSError):
        meter.flush()
    sink.fail = False
    meter.record("111", "111/a", "SendMessage", 5)
    meter.flush()
    assert [r["requests"] for r in sink.rows()] == [2]


def test_payload_bytes_count_bodies_and_attributes() -> None:
    attributes = {"n": {"DataType": "String", "StringValue": "xyz"},
                  "b": {"DataType": "Binary", "BinaryValue": "AAEC"}}
    assert payload_bytes("SendMessage", {"MessageBody": "héllo"}, None) == 6
    assert payload_bytes("SendMessage", {"MessageBody": "a", "MessageAttributes": attributes},
                         None) == 1 + (1 + 6 + 3) + (1 + 6 + 3)
    batch = {"Entries": [{"MessageBody": "ab"}, {"MessageBody": "cde"}]}
    assert payload_bytes("SendMessageBatch", batch, None) == 5
    assert payload_bytes("ReceiveMessage", {}, {"Messages": [{"Body": "1234"}]}) == 4
    assert payload_bytes("DeleteMessage", {}, {}) == 0


def test_the_queue_of_a_request() -> None:
    assert queue_of({"QueueUrl": "http://h:1/111/orders"}) == "111/orders"
    assert queue_of({"QueueName": "orders"}) == "orders"
    assert queue_of({}) == ""


def test_a_failing_sink_never_fails_a_request_and_is_not_retried_on_every_one() -> None:
    sink, clock = MemorySink(fail=True), FakeClock()
    attempts = [0]
    put = sink.put

    def counted_put(key: str, data: bytes) -> None:
        attempts[0] += 1
        put(key, data)

    sink.put = counted_put  # type: ignore[method-assign]
    meter = UsageMeter(sink, clock, flush_interval_s=60, max_keys=2)
    # WHEN the counts are due but the sink fails THEN the requests are still counted
    for queue in ("111/a", "111/b", "111/c", "111/d"):
        meter.record("111", queue, "SendMessage", 5)
    assert attempts[0] == 1 and meter.pending() == 4
    # AND after another interval, with the sink back, one flush carries them all
    sink.fail = False
    clock.advance(60)
    meter.record("111", "111/a", "SendMessage", 5)
    assert attempts[0] == 2 and meter.pending() == 0
    assert sum(r["requests"] for r in sink.rows()) == 5


def test_two_server_runs_flushing_the_same_second_never_overwrite_each_other() -> None:
    # GIVEN two runs of the server (a restart: two lifetimes of the store) share a sink
    # and flush the same counts at the same moment
    sink, clock = MemorySink(), FakeClock(start_ms=1_800_000_000_000)
    for _ in range(2):
        meter = UsageMeter(sink, clock, flush_interval_s=60)
        meter.record("111", "111/a", "SendMessage", 10)
        meter.flush()
    # THEN each flush is its own object, so the report adds both runs' requests
    assert len(sink.objects) == 2
    assert sum(r["requests"] for r in sink.rows()) == 2
