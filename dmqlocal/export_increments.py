"""Incremental table exports, in DynamoDB's INCREMENTAL_EXPORT format, from the streams.

A full export scans a table, so its cost grows with the messages held: 15 s at 50,000
messages, a minute at 100,000. Writing one at every shutdown made the stop that slow.
Instead, `IncrementalExporter` is one more consumer of every table stream the pump reads
(as the archive is): it keeps each batch it is handed, and writes what it kept as
incremental exports on a short timer and at stop. The audits apply those after the
newest full export (`glue_jobs.common.chains`), so a stop only writes what is pending.

- Each batch is first written to a spool file (`<data dir>/export-spool/`), before the
  pump checkpoints it: a crash, or a stop that skips the last flush (a second Ctrl-C),
  loses nothing; the next start writes it.
- A flush writes, per table, region and epoch, one export under
  `exports/<table>/<region>/AWSDynamoDB/<export id>/`: each changed item once, as
  DynamoDB's incremental exports hold it (`Keys`, `NewImage` unless the item is gone,
  `OldImage` unless it is new, `Metadata.WriteTime` in microseconds);
  message content redacted as in full exports and the archive. The window,
  `exportFromTime` to `exportToTime`, is by delivery: the export holds every change
  the pump handed over between the previous flush and this one.
"""

from __future__ import annotations

import gzip
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chalicelib.backend.archive import (
    json_lines_gz,
    redact_record,
    region_of,
    table_of,
)
from dmqlocal import export_folders as folders
from dmqlocal.folders import DirectorySink
from dmqlocal.handlers import StreamBinding
from glue_jobs.common.chains import INCREMENTAL

logger = logging.getLogger("dmq.exports")

SPOOL = "export-spool"
BATCH_SIZE = 1_000
ITEMS_PER_PART = 10_000
Record = dict[str, Any]


@dataclass
class _Spooled:
    """One handed-over batch: its spool file and its records (redacted, with the epoch)."""

    path: Path
    records: list[Record]


@dataclass
class _Change:
    """One item's changes within a window: its state before and after."""

    keys: dict[str, Any]
    old: dict[str, Any] | None
    new: dict[str, Any] | None = None
    write_us: int = 0


@dataclass
class _Group:
    """The changes of one table, region and epoch within a window."""

    stream_arn: str
    changes: dict[str, _Change] = field(default_factory=dict)


def _write_us(record: Mapping[str, Any]) -> int:
    created = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    return int(float(created) * 1_000_000) if created is not None else 0


def coalesce(records: Iterable[Record]) -> dict[tuple[str, str, str], _Group]:
    """Each (table, region, epoch)'s changed items, each once, in stream order."""
    groups: dict[tuple[str, str, str], _Group] = {}
    for record in records:
        stream = record.get("dynamodb", {})
        keys = stream.get("Keys") or {}
        group = groups.setdefault(
            (table_of(record), region_of(record), str(record.get("dmqEpoch", ""))),
            _Group(str(record.get("eventSourceARN", ""))))
        name = json.dumps(keys, sort_keys=True)
        change = group.changes.get(name)
        if change is None:
            change = group.changes[name] = _Change(keys, stream.get("OldImage"))
        change.new = None if record.get("eventName") == "REMOVE" else stream.get("NewImage")
        change.write_us = _write_us(record)
    return groups


def export_line(change: _Change) -> dict[str, Any]:
    """The line of an incremental export for one item. One that came and went within
    the window has neither image, and still a line: the window may straddle a full
    export's scan, which may have seen it (the reader takes a line without `NewImage`
    as a delete)."""
    line: dict[str, Any] = {"Metadata": {"WriteTime": {"N": str(change.write_us)}},
                            "Keys": change.keys}
    if change.new is not None:
        line["NewImage"] = change.new
    if change.old is not None:
        line["OldImage"] = change.old
    return line


class Spool:
    """The batches handed over and not yet exported, one gzip JSON-lines file each."""

    def __init__(self, root: Path) -> None:
        self.folder = root / SPOOL
        self._sink = DirectorySink(self.folder)

    def write(self, records: list[Record]) -> Path:
        """Keep a batch on disk (atomically); return its file."""
        name = f"{folders.new_export_id(datetime.now(UTC))}.json.gz"
        self._sink.put(name, json_lines_gz(records))
        return self.folder / name

    def load(self) -> list[_Spooled]:
        """The batches a previous run left, oldest first (unreadable ones are logged)."""
        found = []
        for path in sorted(self.folder.glob("*.json.gz")) if self.folder.is_dir() else []:
            try:
                lines = gzip.decompress(path.read_bytes()).splitlines()
                found.append(_Spooled(path, [json.loads(line) for line in lines]))
            except (OSError, ValueError):
                logger.exception("unreadable export spool file %s is skipped", path)
        return found


class IncrementalExporter:
    """A stream consumer that writes incremental exports of the tables it is bound to."""

    def __init__(self, root: str | Path, epoch_of: Callable[[str], str]) -> None:
        self._root = Path(root)
        self._sink = DirectorySink(self._root)
        self._epoch_of = epoch_of
        self._spool = Spool(self._root)
        self._lock = threading.Lock()  # the pending batches
        self._flushing = threading.Lock()  # one flush at a time
        self._pending = self._spool.load()
        self.received = 0  # records handed over since the process started
        oldest = self._pending[0].path.name if self._pending else ""
        self._since = _id_time(oldest) or datetime.now(UTC)

    @property
    def pending(self) -> int:
        """Records handed over and not yet exported."""
        with self._lock:
            return sum(len(s.records) for s in self._pending)

    def bindings(self, bound: Iterable[StreamBinding]) -> list[StreamBinding]:
        """One binding per table whose stream the pump reads for `bound`."""
        tables = sorted({b.table for b in bound})
        return [StreamBinding(t, self.incremental_export, BATCH_SIZE) for t in tables]

    def incremental_export(self, event: dict[str, Any], context: Any) -> None:
        """The stream handler: spool the batch (a failure raises: the pump retries it)."""
        records = list(event.get("Records", []))
        if not records:
            return
        epoch = self._epoch_of(region_of(records[0]))
        kept = [{**redact_record(r), "dmqEpoch": epoch} for r in records]
        with self._lock:
            self._pending.append(_Spooled(self._spool.write(kept), kept))
            self.received += len(kept)

    def flush(self) -> list[Path]:
        """Write what is pending as incremental exports; return their folders."""
        with self._flushing:
            with self._lock:
                until = datetime.now(UTC)
                taken, self._pending = self._pending, []
                since, self._since = self._since, until
            if not taken:
                return []
            try:
                written = self._write(taken, since, until)
            except BaseException:
                with self._lock:  # kept for the next flush, in order
                    self._pending[:0] = taken
                    self._since = since
                raise
            for spooled in taken:
                spooled.path.unlink(missing_ok=True)
            return written

    def _write(self, taken: list[_Spooled], since: datetime, until: datetime) -> list[Path]:
        groups = coalesce(r for spooled in taken for r in spooled.records)
        return [self._export(table, region, epoch, group, since, until)
                for (table, region, epoch), group in groups.items()]

    def _export(self, table: str, region: str, epoch: str, group: _Group, since: datetime,
                until: datetime) -> Path:
        prefix = f"{folders.export_prefix(table, region)}/AWSDynamoDB/" \
                 f"{folders.new_export_id(until)}"
        lines = [export_line(c) for c in group.changes.values()]
        parts = []
        for start in range(0, max(len(lines), 1), ITEMS_PER_PART):
            chunk = lines[start:start + ITEMS_PER_PART]
            part = folders.DataPart.written(self._sink, folders.part_key(prefix), len(chunk),
                                            json_lines_gz(chunk))
            parts.append(part)
        table_arn = group.stream_arn.split("/stream/", 1)[0]
        folders.finish(self._sink, {
            "version": "2023-08-01", "exportArn": f"{table_arn}/export/{prefix.rsplit('/', 1)[-1]}",
            "startTime": folders.iso(until), "tableArn": table_arn, "tableId": "",
            "exportFromTime": folders.iso(since), "exportToTime": folders.iso(until),
            "s3Prefix": folders.export_prefix(table, region), "s3SseAlgorithm": "AES256",
            "manifestFilesS3Key": f"{prefix}/manifest-files.json", "itemCount": len(lines),
            "outputFormat": "DYNAMODB_JSON", "outputView": "NEW_AND_OLD_IMAGES",
            "exportType": INCREMENTAL, "dmqRegion": region, "dmqStreamArn": group.stream_arn,
            "dmqEpoch": epoch,
        }, parts)
        return self._root / prefix


def _id_time(name: str) -> datetime | None:
    try:
        return datetime.strptime(name.split("-", 1)[0], folders.ID_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None
