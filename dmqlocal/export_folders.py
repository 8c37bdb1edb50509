"""The export folders of one table in one region, as DynamoDB lays them out, and their pruning.

Every export, full or incremental, is a folder `exports/<table>/<region>/AWSDynamoDB/<export
id>/` under the data folder: data parts under `data/`, then `manifest-files.json`, then
`manifest-summary.json` last (an export without its summary is incomplete and readers
skip it). DMQ's export ids begin with a UTC time (`20260101T120000123456-1a2b3c4d`: a full
export's start, an incremental export's end), so name order is time order.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chalicelib.backend.archive import Sink
from glue_jobs.common.chains import INCREMENTAL, ExportInfo, chains, export_info

logger = logging.getLogger("dmq.exports")

ID_TIME = "%Y%m%dT%H%M%S%f"


@dataclass(frozen=True)
class DataPart:
    """One data file of an export, as its files manifest names it (its bytes are written
    at once; only their MD5 is kept, for the manifest)."""

    key: str  # under the data folder, as an S3 key under the bucket
    items: int
    md5: bytes

    @classmethod
    def written(cls, sink: Sink, key: str, items: int, data: bytes) -> DataPart:
        """Write a data file to `sink`; what the manifest says of it."""
        sink.put(key, data)
        return cls(key, items, hashlib.md5(data).digest())


def iso(moment: datetime) -> str:
    """A time as export summaries write it: `2026-01-01T12:00:00.123Z`."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_export_id(moment: datetime) -> str:
    """An export id that sorts by `moment`."""
    return f"{moment.strftime(ID_TIME)}-{uuid.uuid4().hex[:8]}"


def export_prefix(table: str, region: str) -> str:
    """The export prefix of a table (as one would give it to DynamoDB)."""
    return f"exports/{table}/{region}"


def part_key(prefix: str) -> str:
    """A new data file's key in the export whose folder is `prefix`."""
    return f"{prefix}/data/{uuid.uuid4().hex}.json.gz"


def finish(sink: Sink, summary: dict[str, Any], parts: list[DataPart]) -> None:
    """Write the files manifest, then the summary (last: it makes the export complete)."""
    lines = "".join(json.dumps({
        "itemCount": part.items,
        "md5Checksum": base64.b64encode(part.md5).decode(),
        "etag": part.md5.hex(),
        "dataFileS3Key": part.key,
    }) + "\n" for part in parts)
    sink.put(summary["manifestFilesS3Key"], lines.encode())
    summary["endTime"] = iso(datetime.now(UTC))
    sink.put(summary["manifestFilesS3Key"].replace("-files.", "-summary."),
             json.dumps(summary, indent=2).encode())


def complete_exports(folder: Path) -> list[ExportInfo]:
    """The complete exports in a table's `AWSDynamoDB` folder, full and incremental."""
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        summary = entry / "manifest-summary.json"
        try:
            found.append(export_info(json.loads(summary.read_text()), str(entry)))
        except (OSError, ValueError, KeyError):
            continue  # incomplete (no summary yet), or not an export
    return found


def newest_full(folder: Path) -> ExportInfo | None:
    """The newest complete full export in a table's folder."""
    fulls = [e for e in complete_exports(folder) if e.kind != INCREMENTAL]
    return max(fulls, key=lambda e: (e.export_ms, e.export_id)) if fulls else None


def _id_ms(name: str) -> int | None:
    try:
        moment = datetime.strptime(name.split("-", 1)[0], ID_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


def prune(folder: Path, keep_full: int) -> None:
    """Keep the newest `keep_full` full exports of a table (whatever their epoch) and the
    incremental exports the audits apply to the newest one (`glue_jobs.common.chains`);
    drop the others, and the incomplete exports older than the newest full export (left
    by a crash or a cancelled export; one being written is newer)."""
    exports = complete_exports(folder)
    found = chains(exports)
    if not found:
        return
    chain = found[0]
    fulls = sorted((e for e in exports if e.kind != INCREMENTAL),
                   key=lambda e: (e.export_ms, e.export_id))
    keep = {e.folder for e in (*fulls[-keep_full:], *chain.increments)}
    complete = {e.folder for e in exports}
    for entry in folder.iterdir():
        started = _id_ms(entry.name)
        stale = (str(entry) not in complete and started is not None
                 and started < chain.base_ms)
        if (str(entry) in complete and str(entry) not in keep) or stale:
            shutil.rmtree(entry, ignore_errors=True)
