"""GIVEN table exports in DynamoDB's export format, full and incremental, as DMQ's local
server writes them or as DynamoDB's export to S3 writes them WHEN the audit reads them THEN
it finds the newest complete full export of each table and region, whatever the epoch of
the store it shows, and applies the incremental exports after it in order."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
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


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def _increment(root: Path, export_id: str, to_ms: int, changes: dict[str, str | None], *,
               epoch: str = "e1", data_prefix: str = "") -> None:
    """An incremental export: `changes` maps an item to its new `rc` (None: deleted).
    With `data_prefix`, the data sits in the prefix's shared `AWSDynamoDB/data/` folder and
    the manifest names it by its whole key in the bucket, under another root."""
    base = root / "exports" / "dmq-messages" / "eu-west-1" / "AWSDynamoDB"
    folder = base / export_id
    data = base / "data" if data_prefix else folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for item, rc in changes.items():
        keys = {"pk": {"S": "q#0"}, "sk": {"S": f"m#{item}"}}
        line: dict[str, Any] = {"Metadata": {"WriteTime": {"N": str(to_ms * 1000)}},
                                "Keys": keys, "OldImage": {**keys, "rc": {"N": "0"}}}
        if rc is not None:
            line["NewImage"] = {**keys, "rc": {"N": rc}}
        lines.append(json.dumps(line) + "\n")
    name = f"{export_id}-part.json.gz"
    (data / name).write_bytes(gzip.compress("".join(lines).encode()))
    key = (f"{data_prefix}/exports/dmq-messages/eu-west-1/AWSDynamoDB/data/{name}"
           if data_prefix else f"exports/dmq-messages/eu-west-1/AWSDynamoDB/{export_id}/data/"
           f"{name}")
    (folder / "manifest-files.json").write_text(json.dumps({"dataFileS3Key": key}) + "\n")
    (folder / "manifest-summary.json").write_text(json.dumps({
        "version": "2023-08-01", "exportArn": f"{TABLE}/export/{export_id}",
        "exportFromTime": _iso(to_ms - 1000), "exportToTime": _iso(to_ms), "tableArn": TABLE,
        "manifestFilesS3Key": f"exports/dmq-messages/eu-west-1/AWSDynamoDB/{export_id}/"
                              "manifest-files.json",
        "outputFormat": "DYNAMODB_JSON", "outputView": "NEW_AND_OLD_IMAGES",
        "exportType": "INCREMENTAL_EXPORT", "dmqRegion": "eu-west-1", "dmqEpoch": epoch}))


FULL_MS = 1_767_261_600_000  # 2026-01-01T10:00:00Z


def _chain_on_disk(root: Path) -> None:
    """A full export of a, b, c; incremental exports around it."""
    _export(root, "10-full", _iso(FULL_MS), ["a", "b", "c"])
    # long before the full export (it already shows this), and of another lifetime
    _increment(root, "01-old", FULL_MS - 3_600_000, {"x": "1"})
    _increment(root, "11-other-epoch", FULL_MS + 1_000, {"y": "1"}, epoch="e0")
    # after it: b deleted and d sent; then c received, in DynamoDB's shared data layout
    _increment(root, "12-inc", FULL_MS + 2_000, {"b": None, "d": "0"})
    _increment(root, "13-inc", FULL_MS + 4_000, {"c": "1"}, data_prefix="some/bucket/prefix")


def test_the_incremental_exports_after_the_full_one_are_applied_in_order(
        spark: Any, tmp_path: Path) -> None:
    # GIVEN a full export and incremental exports on disk
    _chain_on_disk(tmp_path)
    # WHEN the audit reads the chain
    [chain] = io.export_chains(spark, str(tmp_path))
    assert [e.export_id for e in chain.increments] == ["12-inc", "13-inc"]
    assert (chain.base_ms, chain.end_ms) == (FULL_MS, FULL_MS + 4_000)
    assert [e.export_id for e in io.latest_exports(spark, str(tmp_path))] == ["10-full"]
    ended = {(r["item"]["sk"]["S"], r["live"], r["changed"]): r["export_ms"]
             for r in io.read_chain_items(spark, [chain]).collect()}
    # THEN the table ends with a, c and d; b is gone; older and other-epoch changes are not
    # applied; every item carries the chain's end
    assert sorted(ended) == [("m#a", True, False), ("m#b", False, True), ("m#c", True, True),
                             ("m#d", True, True)]
    assert set(ended.values()) == {FULL_MS + 4_000}
