"""The stream pump is caught up only once every handler has taken what was read: a
handler waiting out the backoff of a failed batch still has records to take."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chalicelib.regions import RegionDownError
from dmqlocal.handlers import StreamBinding
from dmqlocal.pump import StreamPump
from tests.unit.test_stream_pump_lineage import FakeDynamoDB, FakeStreams


def _pump(handler: Any, folder: Path) -> StreamPump:
    pump = StreamPump(FakeDynamoDB(), FakeStreams(),  # type: ignore[arg-type]
                      [StreamBinding("dmq-messages", handler, 10)], "us-east-1",
                      checkpoint_dir=folder)
    pump.BACKOFF_MIN_S = 0.05
    return pump


def _poll_until_quiet(pump: StreamPump, passes: int = 20) -> None:
    for _ in range(passes):
        if not pump.poll_once():
            return


def test_a_failed_batch_keeps_the_pump_from_being_caught_up(tmp_path: Path) -> None:
    # GIVEN a handler whose first batch fails (as an archive write to S3 sometimes does)
    seen: list[str] = []
    failures = [1]

    def handler(event: dict[str, Any], context: Any) -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError("injected")
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    pump = _pump(handler, tmp_path)
    since = time.monotonic()
    # WHEN a pass reads records and the handler fails on them
    assert pump.poll_once() == 0
    # THEN the pump is not caught up while the batch waits for its retry
    assert not pump.wait_caught_up(since, timeout_s=0)
    # AND once the retry is due, the records are taken and then the pump is caught up
    time.sleep(0.1)
    _poll_until_quiet(pump)
    assert pump.wait_caught_up(since, timeout_s=0)
    assert seen[:2] == ["1", "2"]


def test_a_handler_waiting_for_a_down_region_does_not_hold_up_catching_up(
        tmp_path: Path) -> None:
    # GIVEN a handler whose region is down (replication, say)
    def handler(event: dict[str, Any], context: Any) -> None:
        raise RegionDownError("Region us-west-2 is unavailable.")

    pump = _pump(handler, tmp_path)
    since = time.monotonic()
    # WHEN a pass reads records the handler cannot take
    _poll_until_quiet(pump)
    # THEN the pump counts as caught up: those records wait for the region, not a retry
    assert pump.wait_caught_up(since, timeout_s=0)
