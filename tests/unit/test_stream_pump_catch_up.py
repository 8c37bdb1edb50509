"""The stream pump is caught up only once every handler has taken what was read: a
handler waiting out the backoff of a failed batch still has records to take."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chalicelib.regions.reachability import RegionDownError
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


def _windowed(seen: list[str], window_s: float, folder: Path) -> StreamPump:
    """A pump whose one handler (batch size 10, batching window `window_s`) notes the
    sequence numbers it is handed into `seen`."""

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    return StreamPump(FakeDynamoDB(), FakeStreams(),  # type: ignore[arg-type]
                      [StreamBinding("dmq-messages", handler, 10, window_s=window_s)],
                      "us-east-1", checkpoint_dir=folder)


def test_a_batching_window_holds_records_until_it_ends_or_a_flush(tmp_path: Path) -> None:
    # GIVEN a handler with a batching window of 0.3 s and a batch size of 10 (as the
    # counting handler has 1 s and 500), over a stream that holds 4 records
    seen: list[str] = []
    pump = _windowed(seen, 0.3, tmp_path)
    # WHEN the pump's own loop reads them THEN they wait
    for _ in range(4):
        pump.poll_once(flush=False)
    assert seen == []
    # WHEN the window ends THEN the next pass hands them all over, in order
    time.sleep(0.35)
    for _ in range(4):
        pump.poll_once(flush=False)
    assert seen == ["1", "2", "3", "4"]


def test_a_direct_pass_hands_over_what_a_window_holds(tmp_path: Path) -> None:
    seen: list[str] = []
    pump = _windowed(seen, 60, tmp_path)
    since = time.monotonic()
    pump.poll_once(flush=False)
    assert seen == []
    # records held in a window keep the pump from being caught up (the archive's final
    # export waits for it), and the wait itself makes the next pass hand them over
    assert not pump.wait_caught_up(since, timeout_s=0)
    _poll_until_quiet(pump)  # a caller's pass (a count read, a test) flushes
    assert seen == ["1", "2", "3", "4"]


def _idle_pump(folder: Path) -> StreamPump:
    """A pump whose last pass found its streams read to the end (no thread runs it)."""
    pump = _pump(lambda event, context: None, folder)
    _poll_until_quiet(pump)
    assert pump.poll_once() == 0
    return pump


def test_a_count_read_waits_for_no_pass_when_nothing_was_written_since_the_last_idle_one(
        tmp_path: Path) -> None:
    # GIVEN a pump whose last pass was idle, and a last write before that pass began
    written = time.monotonic()
    time.sleep(0.01)
    pump = _idle_pump(tmp_path)
    # WHEN a count read catches up (no thread would make another pass: timeout 0)
    # THEN it is caught up at once
    assert pump.catch_up(0, written_at=written)


def test_a_count_read_waits_for_a_pass_after_a_later_write_or_an_unknown_one(
        tmp_path: Path) -> None:
    # GIVEN a pump whose last pass was idle
    pump = _idle_pump(tmp_path)
    # WHEN this process wrote after that pass began, or does not know when it wrote
    # THEN a count read needs a new pass (none comes within the timeout here)
    assert not pump.catch_up(0, written_at=time.monotonic())
    assert not pump.catch_up(0)


def test_an_idle_pass_older_than_the_idle_pace_does_not_count(tmp_path: Path) -> None:
    # GIVEN a pump whose last idle pass began longer ago than its idle pace allows
    pump = _idle_pump(tmp_path)
    pump._idle_cap = 0.02
    time.sleep(0.05)
    # WHEN a count read catches up with nothing written THEN it still needs a new pass:
    # another process sharing the store may have written since
    assert not pump.catch_up(0, written_at=float("-inf"))
