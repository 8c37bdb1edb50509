"""Table exports in DynamoDB's export format, so that the audits can see what is still live.

On AWS, `ExportTableToPointInTime` writes these. The local server writes its own under
`<data dir>/exports/<table>/<region>/AWSDynamoDB/<export id>/` (`export_folders`):

- *full* exports of every messages table and the queues table of every region
  (`TableExporter`): a scan, one `{"Item": {...}}` per line, in DynamoDB JSON, message
  content replaced by its SHA-256 and size, as in the stream archive. A scan's cost
  grows with the messages held, so they run in the background, paced by their own
  duration, and never at stop; at start only when the newest one shows another
  lifetime of the store (or there is none); a periodic one is skipped while nothing
  changed since the last (no stream record handed over, no queue record written);
- *incremental* exports, written from the streams (`export_increments`) every few
  seconds and at stop. The audits apply them, in order, after the newest full export.

Each summary adds three fields to DynamoDB's own: `dmqRegion`, `dmqStreamArn` (the
table's stream) and `dmqEpoch` (the store's epoch, `chalicelib.metadata.epoch`: which
lifetime of the stored data the export shows). After a scan, the exporter waits until
the stream archive has caught up with every change made before the scan ended, so that
the archive covers the export.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chalicelib.backend.archive import JsonLinesGz, redact_image
from chalicelib.metadata.epoch import ensure_epoch
from chalicelib.metadata.repository import CATALOGUE_KEY
from dmqlocal import export_folders as folders
from dmqlocal.export_increments import IncrementalExporter
from dmqlocal.folders import DirectorySink
from dmqlocal.loops import PeriodicLoop
from dmqlocal.shards import latest_stream_arn
from dmqlocal.stream_records import source_arn

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.exports")

KEEP_EXPORTS = 3
ITEMS_PER_PART = 10_000
# Items per Scan page. DynamoDB Local reads a page's every candidate row before it cuts
# the page at 1 MB: a Scan without a Limit over 200,000 messages ran it out of heap (its
# HTTP threads died, and the server stopped answering).
SCAN_PAGE = 1_000
# A periodic full export pauses after each page for PACE times as long as the page took
# (its read and its writing): it holds DynamoDB Local's one SQLite thread and DMQ's
# interpreter for about half of the time it runs, not all of it, so that the requests
# served meanwhile wait behind it at most a page at a time.
PACE = 1.0
CATCH_UP_S = 30.0  # how long a full export waits for the archive after its scan
# (since, timeout_s) -> whether every stream change made before `since` (time.monotonic())
# has reached every stream handler.
CaughtUp = Callable[[float, float], bool]


@dataclass(frozen=True)
class ExportTarget:
    """One table of one region, and the control table that holds that store's epoch."""

    region: str
    table: str
    dynamodb: DynamoDBClient
    control_table: str
    # The control table's client when the table is in a cluster's own store
    # (DMQ_CLUSTER_ENDPOINTS); None: the table's own client reaches it.
    control: DynamoDBClient | None = None
    # The table's store's Streams client, which names its stream (ListStreams); None:
    # DescribeTable does, whose cost on DynamoDB Local grows with the items held.
    streams: DynamoDBStreamsClient | None = None


class ExportCancelledError(Exception):
    """The export was cancelled (a stop, or a second Ctrl-C); nothing of it is kept."""


def wait_caught_up(caught_up: CaughtUp, since: float, budget_s: float,
                   cancelled: threading.Event) -> bool:
    """Wait up to `budget_s` for the pumps to catch up with `since`; give up at once
    when `cancelled` is set."""
    deadline = time.monotonic() + budget_s
    while not cancelled.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if caught_up(since, min(left, 0.25)):
            return True
    return False


def _scan(dynamodb: DynamoDBClient, table: str, cancelled: threading.Event,
          pace: float = 0.0) -> Iterator[dict[str, Any]]:
    """The table's items, page by page; after each page a pause of `pace` times as long
    as the page took, read and consumed (a cancel ends the pause and the scan)."""
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True, "Limit": SCAN_PAGE}
    while True:
        if cancelled.is_set():
            raise ExportCancelledError(table)
        began = time.monotonic()
        page = dynamodb.scan(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if pace > 0 and cancelled.wait((time.monotonic() - began) * pace):
            raise ExportCancelledError(table)


@dataclass
class _Written:
    """A full export whose data is written and whose manifests are not yet."""

    target: ExportTarget
    summary: dict[str, Any]
    parts: list[folders.DataPart]
    folder: Path


class TableExporter:
    """Writes full exports of a set of tables under a data folder."""

    def __init__(self, root: str | Path, targets: list[ExportTarget],
                 caught_up: CaughtUp | None = None) -> None:
        self._root = Path(root)
        self._sink = DirectorySink(self._root)
        self._targets = targets
        self._caught_up = caught_up
        self._lock = threading.Lock()
        self.cancelled = threading.Event()

    def export_all(self, pace: float = 0.0) -> list[Path]:
        """Export every table, pausing `pace` times each page's time after it (0: none);
        return the export folders written."""
        with self._lock:
            written = [self._write_data(target, pace) for target in self._targets]
            if self._caught_up is not None and not wait_caught_up(
                    self._caught_up, time.monotonic(), CATCH_UP_S, self.cancelled):
                logger.warning("the stream archive did not catch up with the export in time")
            for entry in written:
                folders.finish(self._sink, entry.summary, entry.parts)
            for target in self._targets:
                folders.prune(self._folder(target), KEEP_EXPORTS)
            return [entry.folder for entry in written]

    def catalogue_versions(self) -> tuple[int, ...]:
        """The queue catalogue's version in each target's control table (it moves with
        every queue record written: `chalicelib.metadata.repository`)."""
        versions = []
        for target in self._targets:
            item = (target.control or target.dynamodb).get_item(
                TableName=target.control_table, Key={"key": {"S": CATALOGUE_KEY}},
                ConsistentRead=True).get("Item", {})
            versions.append(int(item.get("n", {}).get("N", "0")))
        return tuple(versions)

    def needs_base(self) -> bool:
        """Whether a table has no full export of the store as it is now (none at all, or
        the newest shows another epoch or stream): incremental exports apply only to one."""
        for target in self._targets:
            newest = folders.newest_full(self._folder(target))
            if newest is None or newest.epoch != self._epoch(target) \
                    or newest.source != self._stream(target)[1]:
                return True
        return False

    def _folder(self, target: ExportTarget) -> Path:
        return self._root / folders.export_prefix(target.table, target.region) / "AWSDynamoDB"

    @staticmethod
    def _epoch(target: ExportTarget) -> str:
        return ensure_epoch(target.control or target.dynamodb, target.control_table)

    @staticmethod
    def _stream(target: ExportTarget) -> tuple[dict[str, Any], str]:
        """The table's ARN and id (as far as known), and its stream as the pump names it
        in the archive (DynamoDB Local's ARNs say `ddblocal`). With a Streams client, no
        DescribeTable: on DynamoDB Local its cost grows with the items held (a start
        asks for this, `needs_base`)."""
        if target.streams is not None:
            arn = latest_stream_arn(target.streams, target.table)
            described: dict[str, Any] = {"TableArn": arn.split("/stream/", 1)[0] if arn else "",
                                         "LatestStreamArn": arn}
        else:
            described = dict(target.dynamodb.describe_table(TableName=target.table)["Table"])
        return described, source_arn(str(described.get("LatestStreamArn", "")), target.region)

    def _write_data(self, target: ExportTarget, pace: float) -> _Written:
        started = datetime.now(UTC)
        prefix = folders.export_prefix(target.table, target.region)
        folder = f"{prefix}/AWSDynamoDB/{folders.new_export_id(started)}"
        described, stream = self._stream(target)
        parts: list[folders.DataPart] = []
        # Each item is compressed as the scan reads it: what is held is a part's
        # compressed bytes, not its items (a part of 10,000 items took tens of MB).
        part = JsonLinesGz()

        def write_part() -> None:
            nonlocal part
            parts.append(folders.DataPart.written(self._sink, folders.part_key(folder),
                                                  part.rows, part.finish()))
            part = JsonLinesGz()

        try:
            for item in _scan(target.dynamodb, target.table, self.cancelled, pace):
                part.add({"Item": redact_image(item)})
                if part.rows >= ITEMS_PER_PART:
                    write_part()
        except ExportCancelledError:
            shutil.rmtree(self._root / folder, ignore_errors=True)
            raise
        if part.rows or not parts:
            write_part()
        table_arn = str(described.get("TableArn", ""))
        summary = {
            "version": "2020-06-30",
            "exportArn": f"{table_arn or target.table}/export/{folder.rsplit('/', 1)[-1]}",
            "startTime": folders.iso(started), "exportTime": folders.iso(started),
            "tableArn": table_arn, "tableId": described.get("TableId", ""),
            "s3Prefix": prefix, "s3SseAlgorithm": "AES256",
            "manifestFilesS3Key": f"{folder}/manifest-files.json",
            "itemCount": sum(p.items for p in parts), "outputFormat": "DYNAMODB_JSON",
            "exportType": "FULL_EXPORT", "dmqRegion": target.region, "dmqStreamArn": stream,
            "dmqEpoch": self._epoch(target),
        }
        return _Written(target, summary, parts, self._root / folder)


class PeriodicExporter:
    """Runs the exports: full ones in one background thread, incremental ones in another.

    A full export scans every table, so its cost grows with the messages held. The
    pause after one is at least `BUSY_SHARE` times as long as it took, so that exporting
    a large backlog never takes more than a small share of the store's time, and the
    timer's exports pause after each page (`PACE`), so that the requests served meanwhile
    are not held up behind a whole table's scan. Incremental
    exports are written every `FLUSH_S` (or the full exports' interval, if shorter).

    A stop abandons a full export under way (the incremental exports cover what it would
    have shown), waits at most `STOP_CATCH_UP_S` for the pumps to hand over every change
    made before it, then writes what is pending: its cost follows the changes of the
    last seconds, not the messages held.
    """

    BUSY_SHARE = 10
    FLUSH_S = 2.0
    STOP_CATCH_UP_S = 10.0
    STOP_JOIN_S = 30.0  # how long a stop waits for each timer's thread

    def __init__(self, exporter: TableExporter, interval_s: float,
                 increments: IncrementalExporter | None = None,
                 caught_up: CaughtUp | None = None) -> None:
        self._exporter = exporter
        self._interval = interval_s
        self._increments = increments
        self._caught_up = caught_up
        self._skipped = threading.Event()
        self._loops = [PeriodicLoop("dmq-exports", self._periodic_full, self.next_pause_s,
                                    self.STOP_JOIN_S, first_wait_s=self._first_pause_s)]
        if increments is not None:
            self._loops.append(PeriodicLoop("dmq-export-increments", self.flush,
                                            self._flush_pause_s, self.STOP_JOIN_S))
        self.last_duration_s = 0.0
        # What the changes were known by when the last periodic full export began.
        self._exported_at: tuple[int, tuple[int, ...]] | None = None

    def next_pause_s(self) -> float:
        """How long to wait before the next periodic full export."""
        return max(self._interval, self.BUSY_SHARE * self.last_duration_s)

    def start(self) -> None:
        """Export on timers in background threads."""
        for loop in self._loops:
            loop.start()

    def _first_pause_s(self) -> float:
        """No wait before the first full export when a base export is missing."""
        try:
            first = self._exporter.needs_base()
        except Exception:
            logger.exception("reading the newest table exports failed")
            first = True
        return 0.0 if first else self.next_pause_s()

    def _flush_pause_s(self) -> float:
        return min(self.FLUSH_S, self._interval)

    def flush(self) -> list[Path]:
        """Write the pending incremental exports now (failures are logged, not raised)."""
        if self._increments is None:
            return []
        try:
            return self._increments.flush()
        except Exception:
            logger.exception("incremental table export failed; its changes are kept")
            return []

    def _changes(self) -> tuple[int, tuple[int, ...]] | None:
        """What the tables' changes are known by: the stream records handed over and the
        queue catalogue's versions (None when they cannot be told)."""
        if self._increments is None:
            return None
        try:
            return self._increments.received, self._exporter.catalogue_versions()
        except Exception:  # then the export runs, as before
            logger.warning("could not tell whether the tables changed", exc_info=True)
            return None

    def _periodic_full(self) -> list[Path]:
        """The timer's full export, skipped while nothing changed since the last one (no
        stream record handed over, no queue record written) and it is still the base of
        the store as it is: an idle server with many queues scans nothing."""
        changes = self._changes()
        if changes is not None and changes == self._exported_at \
                and not self._exporter.needs_base():
            return []
        written = self._export_full(PACE)
        if written:
            self._exported_at = changes
        return written

    def _export_full(self, pace: float = 0.0) -> list[Path]:
        started = time.monotonic()
        try:
            return self._exporter.export_all(pace)
        except ExportCancelledError:
            logger.info("full table export abandoned: the incremental exports cover it")
            return []
        except Exception:
            logger.exception("table export failed")
            return []
        finally:
            self.last_duration_s = time.monotonic() - started

    def export_now(self) -> list[Path]:
        """The pending incremental exports, then a full export of every table, now
        (failures are logged, not raised); the folders written."""
        return self.flush() + self._export_full()

    def cancel(self) -> None:
        """Abandon the export under way (its partial files stay without a summary, so
        readers skip them) and any later one, and make a stop under way skip writing
        what is pending (it stays spooled for the next start)."""
        self._skipped.set()
        self._exporter.cancelled.set()

    def stop(self, final_export: bool = True) -> None:
        """Stop the timers; abandon a full export under way; then, unless the store is
        gone (`final_export` False) or `cancel` was called, wait for the pumps to hand
        over what they have and write the pending incremental exports."""
        for loop in self._loops:
            loop.stop(wait=False)
        self._exporter.cancelled.set()
        for loop in self._loops:
            loop.join()
        if not final_export or self._increments is None:
            return
        caught_up = self._caught_up is None or wait_caught_up(
            self._caught_up, time.monotonic(), self.STOP_CATCH_UP_S, self._skipped)
        if self._skipped.is_set():
            return
        if not caught_up:
            logger.warning("the stream pump did not hand over every change in time; what "
                           "it did not is exported after the next start")
        self.flush()
