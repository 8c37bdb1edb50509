"""Table exports in DynamoDB's export format, so that the audits can see what is still live.

On AWS, `ExportTableToPointInTime` writes these. The local server writes its own, of
every messages table and the queues table of every region, periodically and at
shutdown, under `<data dir>/exports/<table>/<region>/AWSDynamoDB/<export id>/`:

- `data/<part>.json.gz`: one `{"Item": {...}}` per line, in DynamoDB JSON; message
  content replaced by its SHA-256 and size, as in the stream archive;
- `manifest-files.json`, then `manifest-summary.json` last: an export without its
  summary is incomplete and readers skip it.

The summary adds three fields to DynamoDB's own: `dmqRegion`, `dmqStreamArn` (the
table's stream) and `dmqEpoch` (the store's epoch, `chalicelib.metadata.epoch`: which
lifetime of the stored data the export shows). The audit judges every message of a
table, whatever its epoch, by that table's newest export, so only the newest few are kept.

After the scan, the exporter waits until the stream archive has caught up with every
change made before the scan ended, so that the archive covers the export.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chalicelib.backend.archive import DirectorySink, json_lines_gz, redact_image
from chalicelib.metadata.epoch import ensure_epoch
from dmqlocal.stream_records import source_arn

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger("dmq.exports")

KEEP_EXPORTS = 3
ITEMS_PER_PART = 10_000


@dataclass(frozen=True)
class ExportTarget:
    """One table of one region, and the control table that holds that store's epoch."""

    region: str
    table: str
    dynamodb: DynamoDBClient
    control_table: str


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ExportCancelledError(Exception):
    """The export was cancelled (a second Ctrl-C at shutdown); nothing of it is kept."""


def _scan(dynamodb: DynamoDBClient, table: str,
          cancelled: threading.Event) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        if cancelled.is_set():
            raise ExportCancelledError(table)
        page = dynamodb.scan(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class TableExporter:
    """Writes full exports of a set of tables under a data folder."""

    def __init__(self, root: str | Path, targets: list[ExportTarget],
                 caught_up: Callable[[float], bool] | None = None) -> None:
        self._root = Path(root)
        self._sink = DirectorySink(self._root)
        self._targets = targets
        self._caught_up = caught_up
        self._lock = threading.Lock()
        self.cancelled = threading.Event()

    def export_all(self) -> list[Path]:
        """Export every table; return the export folders written."""
        with self._lock:
            written: list[tuple[ExportTarget, dict[str, Any], list[str], Path]] = []
            for target in self._targets:
                written.append(self._write_data(target))
            if self._caught_up is not None and not self._caught_up(time.monotonic()):
                logger.warning("the stream archive did not catch up with the export in time")
            folders = [self._finish(*entry) for entry in written]
            for target in self._targets:
                self._prune(target)
            return folders

    def _folder(self, target: ExportTarget) -> Path:
        return self._root / "exports" / target.table / target.region / "AWSDynamoDB"

    def _write_data(
        self, target: ExportTarget
    ) -> tuple[ExportTarget, dict[str, Any], list[str], Path]:
        started = datetime.now(UTC)
        export_id = f"{started.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}"
        export_prefix = f"exports/{target.table}/{target.region}"  # as given to DynamoDB
        prefix = f"{export_prefix}/AWSDynamoDB/{export_id}"
        described = target.dynamodb.describe_table(TableName=target.table)["Table"]
        parts: list[str] = []
        batch: list[dict[str, Any]] = []
        count = 0

        def write_part() -> None:
            key = f"{prefix}/data/{uuid.uuid4().hex}.json.gz"
            self._sink.put(key, json_lines_gz({"Item": redact_image(i)} for i in batch))
            parts.append(key)
            batch.clear()

        try:
            for item in _scan(target.dynamodb, target.table, self.cancelled):
                batch.append(item)
                count += 1
                if len(batch) >= ITEMS_PER_PART:
                    write_part()
        except ExportCancelledError:
            shutil.rmtree(self._root / prefix, ignore_errors=True)
            raise
        if batch or not parts:
            write_part()
        summary = {
            "version": "2020-06-30",
            "exportArn": f"{described.get('TableArn', target.table)}/export/{export_id}",
            "startTime": _iso(started),
            "exportTime": _iso(started),
            "tableArn": described.get("TableArn", ""),
            "tableId": described.get("TableId", ""),
            "s3Prefix": export_prefix,
            "s3SseAlgorithm": "AES256",
            "manifestFilesS3Key": f"{prefix}/manifest-files.json",
            "itemCount": count,
            "outputFormat": "DYNAMODB_JSON",
            "exportType": "FULL_EXPORT",
            "dmqRegion": target.region,
            # As the pump names it in the archive (DynamoDB Local's ARNs say `ddblocal`).
            "dmqStreamArn": source_arn(str(described.get("LatestStreamArn", "")), target.region),
            "dmqEpoch": ensure_epoch(target.dynamodb, target.control_table),
        }
        return target, summary, parts, self._root / prefix

    def _finish(self, target: ExportTarget, summary: dict[str, Any], parts: list[str],
                folder: Path) -> Path:
        files = "".join(json.dumps({"dataFileS3Key": key, "dataFileFormat": "DYNAMODB_JSON"})
                        + "\n" for key in parts)
        self._sink.put(summary["manifestFilesS3Key"], files.encode())
        summary["endTime"] = _iso(datetime.now(UTC))
        self._sink.put(summary["manifestFilesS3Key"].replace("-files.", "-summary."),
                       json.dumps(summary, indent=2).encode())
        return folder

    def _prune(self, target: ExportTarget) -> None:
        """Keep the newest complete exports of a table (whatever their epoch); drop older
        ones. Export ids begin with their start time, so name order is time order."""
        complete = [e for e in sorted(self._folder(target).iterdir())
                    if (e / "manifest-summary.json").exists()]
        for old in complete[:-KEEP_EXPORTS]:
            shutil.rmtree(old, ignore_errors=True)


class PeriodicExporter:
    """Runs an exporter every `interval_s` in a background thread, and once at stop.

    An export scans every table, so its cost grows with the messages held. The pause
    after an export is at least `BUSY_SHARE` times as long as the export took, so that
    exporting a large backlog never takes more than a small share of the store's time.
    """

    BUSY_SHARE = 10

    def __init__(self, exporter: TableExporter, interval_s: float) -> None:
        self._exporter = exporter
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_duration_s = 0.0

    def next_pause_s(self) -> float:
        """How long to wait before the next periodic export."""
        return max(self._interval, self.BUSY_SHARE * self.last_duration_s)

    def start(self) -> None:
        """Export on a timer in a background thread."""
        self._thread = threading.Thread(target=self._run, name="dmq-exports", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.next_pause_s()):
            self.export_now()

    def export_now(self) -> list[Path]:
        """One export of every table now (failures are logged, not raised)."""
        started = time.monotonic()
        try:
            return self._exporter.export_all()
        except ExportCancelledError:
            logger.warning("table export skipped: the audit judges by the previous export")
            return []
        except Exception:
            logger.exception("table export failed")
            return []
        finally:
            self.last_duration_s = time.monotonic() - started

    def cancel(self) -> None:
        """Abandon the export under way (its partial files stay without a summary, so
        readers skip them) and any later one."""
        self._exporter.cancelled.set()

    def stop(self, final_export: bool = True) -> None:
        """Stop the timer, then write a last export (not when the store is gone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if final_export:
            self.export_now()
