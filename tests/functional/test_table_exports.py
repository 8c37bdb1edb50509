"""GIVEN tables in the embedded store WHEN the local server exports them THEN each export
is in DynamoDB's export format (data parts, then manifest-files.json, then
manifest-summary.json), names the store's epoch, holds no message body in clear, waits
for the archive, and only the newest exports of each table are kept, whatever their epoch."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chalicelib.metadata.epoch import read_epoch
from dmqlocal.exports import KEEP_EXPORTS, ExportTarget, PeriodicExporter, TableExporter
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
                             caught_up=lambda since: waited.append(since) or True)
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

    def export_all(self) -> list[Path]:
        self.calls += 1
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
