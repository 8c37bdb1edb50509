"""GIVEN tables in the embedded store WHEN the local server writes full exports of them THEN
each export is in DynamoDB's export format (data parts, then manifest-files.json, then
manifest-summary.json), names the store's epoch, holds no message body in clear, waits
for the archive, and only the newest exports of each table are kept, whatever their epoch.
GIVEN stream records handed to the incremental exporter WHEN it flushes THEN each changed
item is written once in DynamoDB's incremental export format, and what is handed over
survives a crash or a skipped flush; a stop abandons a full export and only flushes."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chalicelib.metadata.epoch import read_epoch
from dmqlocal.export_increments import IncrementalExporter
from dmqlocal.exports import (
    KEEP_EXPORTS,
    PACE,
    ExportCancelledError,
    ExportTarget,
    PeriodicExporter,
    TableExporter,
    _scan,
)
from infra import provision

TABLE = "dmq-messages"
CONTROL = "dmq-control"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        provision.create_all(client, boto3.client("s3", region_name="eu-west-1"),
                             region="eu-west-1")
        for i in range(3):
            client.put_item(TableName=TABLE, Item={
                "pk": {"S": "000000000000/q#0"}, "sk": {"S": f"m{i}"},
                "body": {"S": f"secret {i}"}, "rc": {"N": "0"}})
        yield client


def _target(dynamodb: Any) -> ExportTarget:
    return ExportTarget("eu-west-1", TABLE, dynamodb, CONTROL)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]


def test_an_export_is_in_dynamodb_format_and_redacted(dynamodb: Any, tmp_path: Path) -> None:
    waited: list[float] = []
    exporter = TableExporter(tmp_path, [_target(dynamodb)],
                             caught_up=lambda since, _timeout: waited.append(since) or True)
    [folder] = exporter.export_all()
    assert folder.parent == tmp_path / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB"
    summary = json.loads((folder / "manifest-summary.json").read_text())
    described = dynamodb.describe_table(TableName=TABLE)["Table"]
    assert summary["tableArn"] == described["TableArn"]
    assert summary["dmqStreamArn"] == described["LatestStreamArn"]
    assert summary["dmqRegion"] == "eu-west-1" and summary["itemCount"] == 3
    assert summary["dmqEpoch"] == read_epoch(dynamodb, CONTROL) is not None
    assert summary["s3Prefix"] == f"exports/{TABLE}/eu-west-1"
    assert summary["outputFormat"] == "DYNAMODB_JSON" and summary["exportType"] == "FULL_EXPORT"
    manifest = [json.loads(line) for line in
                (tmp_path / summary["manifestFilesS3Key"]).read_text().splitlines()]
    items = [line["Item"] for m in manifest for line in _lines(tmp_path / m["dataFileS3Key"])]
    assert sorted(i["sk"]["S"] for i in items) == ["m0", "m1", "m2"]
    first = next(i for i in items if i["sk"]["S"] == "m0")
    assert "body" not in first and first["rc"] == {"N": "0"}
    assert first["body_sha256"]["S"] == hashlib.sha256(b"secret 0").hexdigest()
    assert b"secret" not in b"".join((folder / "data").joinpath(p).read_bytes()
                                     for p in (folder / "data").iterdir())
    assert len(waited) == 1  # it asked whether the archive had caught up


def test_only_the_newest_exports_are_kept(dynamodb: Any, tmp_path: Path) -> None:
    exporter = TableExporter(tmp_path, [_target(dynamodb)])
    written = [exporter.export_all()[0] for _ in range(KEEP_EXPORTS + 2)]
    kept = sorted((tmp_path / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB").iterdir())
    assert kept == written[-KEEP_EXPORTS:]


def test_exports_of_an_earlier_epoch_are_pruned_like_any_other(dynamodb: Any,
                                                               tmp_path: Path) -> None:
    # GIVEN an export left by an earlier lifetime of the store (another epoch and stream)
    earlier = tmp_path / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB" / "00000000T000000-old"
    earlier.mkdir(parents=True)
    (earlier / "manifest-summary.json").write_text(
        json.dumps({"dmqStreamArn": "earlier", "dmqEpoch": "e-earlier"}))
    # WHEN this run exports as often as it keeps
    exporter = TableExporter(tmp_path, [_target(dynamodb)])
    written = [exporter.export_all()[0] for _ in range(KEEP_EXPORTS)]
    # THEN only this run's newest are kept: the newest export judges every epoch's messages
    kept = sorted((tmp_path / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB").iterdir())
    assert kept == written


class _SlowExporter:
    """An exporter whose every export takes a known time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0
        self.paces: list[float] = []

    def export_all(self, pace: float = 0.0) -> list[Path]:
        self.calls += 1
        self.paces.append(pace)
        time.sleep(self.seconds)
        return []


def test_a_slow_export_spaces_out_the_next_ones() -> None:
    # GIVEN exports every 0.01 s, each of which takes 0.05 s (a large backlog)
    exporter = _SlowExporter(0.05)
    periodic = PeriodicExporter(exporter, 0.01)  # type: ignore[arg-type]
    assert periodic.next_pause_s() == 0.01
    # WHEN one export has run
    periodic.export_now()
    # THEN the next waits ten times as long as it took, not the configured interval
    assert exporter.calls == 1
    assert 0.5 <= periodic.next_pause_s() < 1.0


class _PagedTable:
    """A DynamoDB client whose Scan has `pages` pages, each taking `page_s`."""

    def __init__(self, pages: int, page_s: float) -> None:
        self.pages, self.page_s = pages, page_s
        self.began: list[float] = []

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        self.began.append(time.monotonic())
        time.sleep(self.page_s)
        n = len(self.began)
        page: dict[str, Any] = {"Items": [{"pk": {"S": str(n)}}]}
        if n < self.pages:
            page["LastEvaluatedKey"] = {"pk": {"S": str(n)}}
        return page


def test_a_paced_scan_pauses_after_each_page_and_stops_at_a_cancel() -> None:
    # GIVEN a table of three pages, each read taking 0.05 s
    table = _PagedTable(3, 0.05)
    # WHEN it is scanned with a pace of 1 THEN each page after the first begins at least
    # two page times after the one before (the read, then as long again)
    items = list(_scan(table, "t", threading.Event(), 1.0))  # type: ignore[arg-type]
    assert len(items) == 3
    gaps = [b - a for a, b in zip(table.began, table.began[1:], strict=False)]
    assert all(gap >= 0.095 for gap in gaps), gaps
    # AND unpaced, it does not pause
    fast = _PagedTable(3, 0.05)
    list(_scan(fast, "t", threading.Event()))  # type: ignore[arg-type]
    assert all(b - a < 0.09 for a, b in zip(fast.began, fast.began[1:], strict=False))
    # AND a cancel during a pause ends the scan at once
    slow, cancelled = _PagedTable(3, 0.3), threading.Event()
    pages = _scan(slow, "t", cancelled, 10.0)  # type: ignore[arg-type]
    next(pages)
    threading.Timer(0.1, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(ExportCancelledError):
        next(pages)
    assert time.monotonic() - started < 1.0


def test_the_timers_exports_are_paced_and_one_asked_for_is_not() -> None:
    exporter = _SlowExporter(0.0)
    periodic = PeriodicExporter(exporter, 60)  # type: ignore[arg-type]
    periodic.export_now()
    periodic._periodic_full()
    assert exporter.paces == [0.0, PACE]


def test_a_cancelled_export_leaves_nothing_behind(dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN an exporter over a table with items
    exporter = TableExporter(tmp_path, [_target(dynamodb)])
    periodic = PeriodicExporter(exporter, 60)
    # WHEN its export is cancelled (a second Ctrl-C while DMQ stops)
    periodic.cancel()
    # THEN the export is skipped and leaves no partial export folder
    assert periodic.export_now() == []
    assert not list(tmp_path.rglob("*.json.gz"))
    assert not list(tmp_path.rglob("manifest-summary.json"))


# -- incremental exports ------------------------------------------------------------------

STREAM = f"arn:aws:dynamodb:eu-west-1:000000000000:table/{TABLE}/stream/2026-01-01T00:00:00"


class _Records:
    """Stream records as the pump hands them to a handler, numbered in stream order."""

    def __init__(self) -> None:
        self.seq = 0

    def make(self, event: str, sk: str, new: dict[str, Any] | None = None,
             old: dict[str, Any] | None = None) -> dict[str, Any]:
        self.seq += 1
        keys = {"pk": {"S": "000000000000/q#0"}, "sk": {"S": sk}}
        stream: dict[str, Any] = {"Keys": keys, "SequenceNumber": str(self.seq).zfill(21),
                                  "ApproximateCreationDateTime": 1_790_000_040.0}
        if new is not None:
            stream["NewImage"] = {**keys, **new}
        if old is not None:
            stream["OldImage"] = {**keys, **old}
        return {"eventName": event, "eventSourceARN": STREAM, "awsRegion": "eu-west-1",
                "dynamodb": stream}


def _summary(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "manifest-summary.json").read_text()))


def _increment_lines(root: Path, folder: Path) -> list[dict[str, Any]]:
    manifest = [json.loads(line) for line in
                (folder / "manifest-files.json").read_text().splitlines()]
    return [line for m in manifest for line in _lines(root / m["dataFileS3Key"])]


def test_an_incremental_export_holds_each_changed_item_once(tmp_path: Path) -> None:
    # GIVEN m1 sent then claimed, m2 sent then deleted, m0 (older) deleted
    records = _Records()
    batch = [
        records.make("INSERT", "m1", new={"body": {"S": "secret 1"}, "rc": {"N": "0"}}),
        records.make("INSERT", "m2", new={"body": {"S": "secret 2"}, "rc": {"N": "0"}}),
        records.make("MODIFY", "m1", new={"body": {"S": "secret 1"}, "rc": {"N": "1"}},
                     old={"body": {"S": "secret 1"}, "rc": {"N": "0"}}),
        records.make("REMOVE", "m2", old={"body": {"S": "secret 2"}, "rc": {"N": "0"}}),
        records.make("REMOVE", "m0", old={"body": {"S": "secret 0"}, "rc": {"N": "3"}}),
    ]
    exporter = IncrementalExporter(tmp_path, lambda region: "e1")
    # WHEN the pump hands them over in two batches and the exporter flushes
    exporter.incremental_export({"Records": batch[:2]}, None)
    exporter.incremental_export({"Records": batch[2:]}, None)
    [folder] = exporter.flush()
    # THEN one incremental export of the table, in DynamoDB's layout and format
    assert folder.parent == tmp_path / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB"
    summary = _summary(folder)
    assert summary["exportType"] == "INCREMENTAL_EXPORT"
    assert summary["outputView"] == "NEW_AND_OLD_IMAGES"
    assert summary["exportFromTime"] <= summary["exportToTime"]
    assert summary["dmqEpoch"] == "e1" and summary["dmqRegion"] == "eu-west-1"
    assert summary["dmqStreamArn"] == STREAM and summary["itemCount"] == 3
    lines = {line["Keys"]["sk"]["S"]: line for line in _increment_lines(tmp_path, folder)}
    # m1 once, as it ends; m0 gone (its old image kept)
    assert sorted(lines) == ["m0", "m1", "m2"]
    assert lines["m1"]["NewImage"]["rc"] == {"N": "1"} and "OldImage" not in lines["m1"]
    assert "NewImage" not in lines["m0"] and lines["m0"]["OldImage"]["rc"] == {"N": "3"}
    # m2 came and went: a line without images, since a full export may have seen it
    assert "NewImage" not in lines["m2"] and "OldImage" not in lines["m2"]
    assert lines["m1"]["Metadata"]["WriteTime"] == {"N": "1790000040000000"}
    # content redacted exactly as in full exports
    assert "body" not in lines["m1"]["NewImage"]
    assert lines["m1"]["NewImage"]["body_sha256"]["S"] == hashlib.sha256(b"secret 1").hexdigest()
    assert b"secret" not in b"".join(p.read_bytes() for p in (folder / "data").iterdir())
    # and nothing is left to flush
    assert exporter.pending == 0 and exporter.flush() == []


def test_handed_over_changes_survive_a_crash(tmp_path: Path) -> None:
    # GIVEN a batch handed over (the pump then checkpoints it) and never flushed
    records = _Records()
    crashed = IncrementalExporter(tmp_path, lambda region: "e1")
    crashed.incremental_export({"Records": [records.make("INSERT", "m1", new={})]}, None)
    # WHEN the next start's exporter flushes
    restarted = IncrementalExporter(tmp_path, lambda region: "e1")
    assert restarted.pending == 1
    [folder] = restarted.flush()
    # THEN the change is exported, and the spool is empty
    assert [line["Keys"]["sk"]["S"] for line in _increment_lines(tmp_path, folder)] == ["m1"]
    assert not list((tmp_path / "export-spool").iterdir())
    assert IncrementalExporter(tmp_path, lambda region: "e1").pending == 0


def _complete(root: Path, kind: str) -> list[Path]:
    return [p.parent for p in root.rglob("manifest-summary.json")
            if _summary(p.parent).get("exportType") == kind]


def _periodic(dynamodb: Any, root: Path, caught_up: Any) -> tuple[PeriodicExporter, Any]:
    increments = IncrementalExporter(root, lambda region: "e1")
    exporter = TableExporter(root, [_target(dynamodb)], caught_up)
    return PeriodicExporter(exporter, 3600, increments, caught_up), increments


def test_a_stop_writes_only_what_is_pending(dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN a running exporter: it wrote the table's first full export at start
    calls: list[float] = []
    periodic, increments = _periodic(dynamodb, tmp_path,
                                     lambda since, timeout: calls.append(since) or True)
    periodic.start()
    deadline = time.monotonic() + 10
    while not _complete(tmp_path, "FULL_EXPORT") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_complete(tmp_path, "FULL_EXPORT")) == 1
    # WHEN changes are handed over and it stops
    increments.incremental_export({"Records": [_Records().make("INSERT", "m9", new={})]}, None)
    periodic.stop(final_export=True)
    # THEN it waited for the pumps, wrote the pending change, and scanned nothing more
    assert calls
    assert len(_complete(tmp_path, "FULL_EXPORT")) == 1
    [folder] = _complete(tmp_path, "INCREMENTAL_EXPORT")
    assert [line["Keys"]["sk"]["S"] for line in _increment_lines(tmp_path, folder)] == ["m9"]


def test_a_second_ctrl_c_skips_the_pending_flush_at_once(dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN pumps that never catch up, and a change pending
    periodic, increments = _periodic(dynamodb, tmp_path, lambda since, timeout: False)
    increments.incremental_export({"Records": [_Records().make("INSERT", "m9", new={})]}, None)
    # WHEN the stop is cut short (a second Ctrl-C) while it waits
    threading.Timer(0.3, periodic.cancel).start()
    started = time.monotonic()
    periodic.stop(final_export=True)
    # THEN it returns at once, and the change stays spooled for the next start
    assert time.monotonic() - started < 2.0 < PeriodicExporter.STOP_CATCH_UP_S
    assert not _complete(tmp_path, "INCREMENTAL_EXPORT")
    assert IncrementalExporter(tmp_path, lambda region: "e1").pending == 1


class _EndlessTable:
    """A table whose scan never ends: each page takes a while and promises another."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.pages = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        self.pages += 1
        time.sleep(0.05)
        item = {"pk": {"S": "000000000000/q#0"}, "sk": {"S": f"p{self.pages}"}}
        return {"Items": [item], "LastEvaluatedKey": item}


def test_a_stop_abandons_a_full_export_under_way(dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN a full export scanning a table too large to finish soon
    table = _EndlessTable(dynamodb)
    periodic, _ = _periodic(table, tmp_path, lambda since, timeout: True)
    periodic.start()
    deadline = time.monotonic() + 10
    while table.pages < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert table.pages >= 3
    # WHEN DMQ stops
    started = time.monotonic()
    periodic.stop(final_export=True)
    # THEN the stop does not wait for the scan, which leaves no export behind
    assert time.monotonic() - started < 2.0
    assert not list(tmp_path.rglob("manifest-summary.json"))
    assert not list((tmp_path / "exports").rglob("*.json.gz"))


def test_a_full_export_is_due_at_start_only_for_another_store(dynamodb: Any,
                                                              tmp_path: Path) -> None:
    exporter = TableExporter(tmp_path, [_target(dynamodb)])
    # GIVEN no export: incremental exports have nothing to apply to
    assert exporter.needs_base()
    exporter.export_all()
    # WHEN the store keeps its data THEN the newest full export still serves
    assert not exporter.needs_base()
    # WHEN the store starts again empty (another epoch) THEN a full export is due
    dynamodb.put_item(TableName=CONTROL, Item={"key": {"S": "epoch"}, "id": {"S": "other"}})
    assert exporter.needs_base()


def _increment(root: Path, name: str, to: str) -> Path:
    folder = root / "exports" / TABLE / "eu-west-1" / "AWSDynamoDB" / name
    folder.mkdir(parents=True)
    (folder / "manifest-summary.json").write_text(json.dumps({
        "exportType": "INCREMENTAL_EXPORT", "exportFromTime": to, "exportToTime": to,
        "tableArn": f"arn:aws:dynamodb:eu-west-1:000000000000:table/{TABLE}",
        "dmqRegion": "eu-west-1"}))
    return folder


def test_pruning_keeps_the_incremental_exports_after_the_newest_full_one(
        dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN an incremental export long before the next full export, and one just before it
    old = _increment(tmp_path, "20000101T000000000000-old", "2000-01-01T00:00:00.000Z")
    recent_at = datetime.now(UTC) - timedelta(seconds=5)
    recent = _increment(tmp_path, recent_at.strftime("%Y%m%dT%H%M%S%f") + "-new",
                        recent_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    unfinished = old.parent / "20000101T000001000000-crashed"
    unfinished.mkdir()
    # WHEN a full export completes
    TableExporter(tmp_path, [_target(dynamodb)]).export_all()
    # THEN the audits' chain is kept (the recent one overlaps the full export), the rest goes
    assert recent.exists()
    assert not old.exists() and not unfinished.exists()


def test_a_periodic_full_export_waits_for_a_change(dynamodb: Any, tmp_path: Path) -> None:
    # GIVEN an exporter that wrote its first full export
    periodic, increments = _periodic(dynamodb, tmp_path, lambda since, timeout: True)
    assert periodic._periodic_full()
    # WHEN its timer comes again with nothing changed THEN it scans nothing
    assert periodic._periodic_full() == []
    assert len(_complete(tmp_path, "FULL_EXPORT")) == 1
    # WHEN a stream record is handed over THEN the next one exports
    increments.incremental_export({"Records": [_Records().make("INSERT", "m9", new={})]}, None)
    assert periodic._periodic_full()
    assert periodic._periodic_full() == []
    # WHEN a queue record is written (the catalogue's version moves) THEN too
    dynamodb.update_item(TableName=CONTROL, Key={"key": {"S": "catalogue"}},
                         UpdateExpression="ADD n :one",
                         ExpressionAttributeValues={":one": {"N": "1"}})
    assert periodic._periodic_full()
