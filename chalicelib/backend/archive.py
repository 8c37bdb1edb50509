"""The audit archive: stream records, usage records and table exports, as gzip JSON lines.

Everything lands under one root, in S3 on AWS (`DMQ_ARCHIVE_BUCKET`) or in a folder on
disk locally (`DMQ_DATA_DIR`, `.dmq/` by default):

- `archive/<table>/<yyyy>/<mm>/<dd>/<hh>/<region>-<epoch>-<first seq>-<last seq>.json.gz`:
  one object per batch of stream records, one record per line, in the DynamoDB Streams
  record format (as Lambda delivers it) plus `dmqEpoch`, the epoch of the store that
  made the change (`chalicelib.metadata.epoch`). The name depends only on the batch, so
  a retried batch overwrites its own object, while another lifetime of the store, whose
  sequence numbers may repeat, never does; the audit jobs deduplicate by (epoch, stream
  ARN, sequence number), for retries that split a batch differently.
- `usage/...` and `exports/...`: see `chalicelib.usage.records` and `dmqlocal.exports`.

Message bodies never reach the archive in clear text: DMQ treats every queue as
encrypted at rest (SSE-SQS is SQS's default), so each image keeps the body's SHA-256
and size, and the same for message attributes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

Record = dict[str, Any]

# Item attributes that hold message content, replaced by `<name>_sha256` and `<name>_size`
# (a wide item's `lbody` and `lattrs` by those of `body` and `attrs`: see backend.items).
REDACTED = {"body": "body", "attrs": "attrs", "lbody": "body", "lattrs": "attrs"}


class Sink(Protocol):
    """Where archive objects go."""

    def put(self, key: str, data: bytes) -> None: ...


class S3Sink:
    """An S3 bucket, with a key prefix."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str = "") -> None:
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix

    def put(self, key: str, data: bytes) -> None:
        self._s3.put_object(Bucket=self._bucket, Key=self._prefix + key, Body=data,
                            ServerSideEncryption="AES256")


class JsonLinesGz:
    """Gzip JSON lines written a row at a time: only the compressed bytes are held, not
    the rows nor their text."""

    def __init__(self) -> None:
        self._out = io.BytesIO()
        self._gzip = gzip.GzipFile(fileobj=self._out, mode="wb", compresslevel=6, mtime=0)
        self.rows = 0

    def add(self, row: Mapping[str, Any]) -> None:
        """Compress one more row."""
        line = json.dumps(row, separators=(",", ":"), sort_keys=True, default=str) + "\n"
        self._gzip.write(line.encode("utf-8"))
        self.rows += 1

    def finish(self) -> bytes:
        """The gzip file of the rows added."""
        self._gzip.close()
        return self._out.getvalue()


def json_lines_gz(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Gzip JSON lines, byte-for-byte the same for the same rows (no timestamp in the header)."""
    text = "".join(json.dumps(row, separators=(",", ":"), sort_keys=True, default=str) + "\n"
                   for row in rows)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def redact_image(image: Mapping[str, Any]) -> dict[str, Any]:
    """An item image with message content replaced by its SHA-256 and size in bytes."""
    result = dict(image)
    for name, shown in REDACTED.items():
        value = result.pop(name, None)
        if value is None or "S" not in value:
            continue
        raw = str(value["S"]).encode("utf-8")
        result[f"{shown}_sha256"] = {"S": hashlib.sha256(raw).hexdigest()}
        result.setdefault(f"{shown}_size", {"N": str(len(raw))})
    return result


def redact_record(record: Mapping[str, Any]) -> Record:
    """A stream record whose images hold no message content. The record, its `dynamodb`
    part and its images are new dicts; the values they share with `record` are not
    changed here (a deep copy of every record cost the stream reader about a sixth of
    the local server's time under load)."""
    result = dict(record)
    if "dynamodb" in result:
        stream = result["dynamodb"] = dict(result["dynamodb"])
        for image in ("NewImage", "OldImage"):
            if image in stream:
                stream[image] = redact_image(stream[image])
    return result


def table_of(record: Mapping[str, Any]) -> str:
    """The table name in a record's event source ARN."""
    arn = str(record.get("eventSourceARN", ""))
    return arn.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in arn else "unknown"


def record_time(record: Mapping[str, Any]) -> datetime:
    """When the change happened (the stream's approximate creation time), in UTC."""
    created = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        return created.astimezone(UTC)
    if created is None:
        return datetime.now(UTC)
    return datetime.fromtimestamp(float(created), UTC)


def hour_path(moment: datetime) -> str:
    """`<yyyy>/<mm>/<dd>/<hh>` of a UTC time."""
    return moment.strftime("%Y/%m/%d/%H")


def region_of(record: Mapping[str, Any]) -> str:
    """The region a record's change was made in."""
    return str(record.get("awsRegion", "unknown"))


def batch_key(records: list[Record], epoch: str) -> str:
    """The archive key of a batch: its table, the hour of its first change, its store's
    epoch and its sequence range."""
    first, last = records[0], records[-1]
    lo = first.get("dynamodb", {}).get("SequenceNumber") or uuid.uuid4().hex
    hi = last.get("dynamodb", {}).get("SequenceNumber") or lo
    return (f"archive/{table_of(first)}/{hour_path(record_time(first))}/"
            f"{region_of(first)}-{epoch}-{lo}-{hi}.json.gz")


class StreamArchiver:
    """Writes each batch of stream records as one archive object, stamped with the epoch
    of the store the batch came from (`epoch_of(region)`)."""

    def __init__(self, sink: Sink, epoch_of: Callable[[str], str]) -> None:
        self._sink = sink
        self._epoch_of = epoch_of

    def write_batch(self, records: list[Record]) -> str | None:
        """Archive a batch; return its key (None for an empty batch)."""
        if not records:
            return None
        # A batch comes from one stream, so from one region's store.
        epoch = self._epoch_of(region_of(records[0]))
        key = batch_key(records, epoch)
        self._sink.put(key, json_lines_gz({**redact_record(r), "dmqEpoch": epoch}
                                          for r in records))
        return key
