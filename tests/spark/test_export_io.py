"""GIVEN table exports in DynamoDB's export format, as DMQ's local server writes them or as
DynamoDB's export to S3 writes them WHEN the audit reads them THEN it finds the newest
complete export of each table and region, whatever the epoch of the store it shows."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from glue_jobs.common import io

TABLE = "arn:aws:dynamodb:eu-west-1:111122223333:table/dmq-messages"


def _export(root: Path, export_id: str, when: str, items: list[str], *,
            dmq: bool = True, complete: bool = True, stream: str = "local",
            epoch: str = "e1") -> None:
    folder = root / "exports" / "dmq-messages" / "eu-west-1" / "AWSDynamoDB" / export_id
    (folder / "data").mkdir(parents=True)
    lines = "".join(json.dumps({"Item": {"pk": {"S": "q#0"}, "sk": {"S": f"m#{i}"}}}) + "\n"
                    for i in items)
    (folder / "data" / "part.json.gz").write_bytes(gzip.compress(lines.encode()))
    summary: dict[str, Any] = {
        "version": "2020-06-30", "exportArn": f"{TABLE}/export/{export_id}",
        "exportTime": when, "tableArn": TABLE, "s3Prefix": "exports/dmq-messages/eu-west-1",
        "manifestFilesS3Key": f"exports/dmq-messages/eu-west-1/AWSDynamoDB/{export_id}/"
                              "manifest-files.json",
        "itemCount": len(items), "outputFormat": "DYNAMODB_JSON",
    }
    if dmq:
        summary |= {"dmqRegion": "eu-west-1", "dmqStreamArn": f"{TABLE}/stream/{stream}",
                    "dmqEpoch": epoch}
    if complete:
        (folder / "manifest-summary.json").write_text(json.dumps(summary))


def test_the_newest_complete_export_is_read_and_an_unfinished_one_ignored(
        spark: Any, tmp_path: Path) -> None:
    _export(tmp_path, "01-old", "2026-01-01T10:00:00.000Z", ["a"])
    _export(tmp_path, "02-new", "2026-01-01T10:05:00.000Z", ["a", "b"])
    _export(tmp_path, "03-writing", "2026-01-01T10:09:00.000Z", ["x"], complete=False)
    exports = io.latest_exports(spark, str(tmp_path))
    assert [(e.table, e.region, e.source) for e in exports] == [
        ("dmq-messages", "eu-west-1", f"{TABLE}/stream/local")]
    items = io.read_export_items(spark, exports).collect()
    assert sorted(r["item"]["sk"]["S"] for r in items) == ["m#a", "m#b"]


def test_the_newest_export_is_read_whatever_its_epoch(spark: Any, tmp_path: Path) -> None:
    # GIVEN exports of two lifetimes of the store: the same table name, two epochs
    _export(tmp_path, "01-run1", "2026-01-01T10:00:00.000Z", ["a"], stream="run1", epoch="e1")
    _export(tmp_path, "02-run2", "2026-01-02T10:00:00.000Z", ["b"], stream="run2", epoch="e2")
    _export(tmp_path, "03-run2", "2026-01-02T10:05:00.000Z", ["b", "c"], stream="run2",
            epoch="e2")
    exports = io.latest_exports(spark, str(tmp_path))
    # THEN only the newest is read: it is what the table holds now, for every epoch
    assert [(e.epoch, e.folder.rsplit("/", 1)[-1]) for e in exports] == [("e2", "03-run2")]


def test_a_dynamodb_export_takes_its_region_from_the_table(spark: Any, tmp_path: Path) -> None:
    # GIVEN an export made by DynamoDB itself: no DMQ fields in its summary
    _export(tmp_path, "01ABC", "2026-01-01T10:00:00.000Z", ["a"], dmq=False)
    exports = io.latest_exports(spark, str(tmp_path))
    # THEN its table and region come from the table ARN
    assert [(e.table, e.region, e.source, e.epoch) for e in exports] == [
        ("dmq-messages", "eu-west-1", "", "")]
    assert [r["item"]["sk"]["S"] for r in io.read_export_items(spark, exports).collect()] == [
        "m#a"]
