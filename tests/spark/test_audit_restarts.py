"""GIVEN what two runs of the local server archived and exported into one data folder
WHEN `make audit` runs over it THEN a memory-store restart, which wiped the messages
that were acknowledged and never deleted, is reported as exactly those lost, with exit
status 1; and a restart of a store that kept its data is clean."""

from __future__ import annotations

import argparse
import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chalicelib.backend.archive import StreamArchiver
from dmqlocal import audit
from dmqlocal.folders import DirectorySink

REGION = "us-east-1"
TABLE = "dmq-messages"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:000000000000:table/{TABLE}"
STREAM = f"{TABLE_ARN}/stream/2026-01-01T00:00:00.000"  # the memory store reuses it
QUEUE = "000000000000/orders"
START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def _image(message: str, rc: int) -> dict[str, Any]:
    return {"pk": {"S": f"{QUEUE}#0"}, "sk": {"S": message}, "rc": {"N": str(rc)},
            "sent_ms": {"N": "1767225600000"}, "visible_at": {"N": "1767225600000"},
            "expires_ms": {"N": "1767571200000"}}


class Run:
    """One lifetime of the store: its epoch and its stream's sequence numbers."""

    def __init__(self, root: Path, epoch: str, first_seq: int = 1) -> None:
        self._archiver = StreamArchiver(DirectorySink(root), lambda region: epoch)
        self._root = root
        self.epoch = epoch
        self._seq = first_seq

    def archive(self, at_s: float, *changes: tuple[str, str]) -> None:
        """One archived batch of (event name, message) changes: INSERT, MODIFY (a claim),
        REMOVE (a delete)."""
        batch = []
        for name, message in changes:
            stream: dict[str, Any] = {"ApproximateCreationDateTime": START_S + at_s,
                                      "SequenceNumber": str(self._seq),
                                      "Keys": {"pk": {"S": f"{QUEUE}#0"}, "sk": {"S": message}}}
            if name != "REMOVE":
                stream["NewImage"] = _image(message, 0 if name == "INSERT" else 1)
            if name != "INSERT":
                stream["OldImage"] = _image(message, 0)
            batch.append({"eventName": name, "awsRegion": REGION, "eventSourceARN": STREAM,
                          "dynamodb": stream})
            self._seq += 1
        self._archiver.write_batch(batch)

    def export(self, at_s: float, *live: str) -> None:
        """A table export of the messages table holding `live`, as the server writes it."""
        when = datetime.fromtimestamp(START_S + at_s, UTC)
        export_id = f"{when.strftime('%Y%m%dT%H%M%S%f')}-{self.epoch}"
        prefix = f"exports/{TABLE}/{REGION}/AWSDynamoDB/{export_id}"
        folder = self._root / prefix
        (folder / "data").mkdir(parents=True)
        lines = "".join(json.dumps({"Item": _image(m, 1)}) + "\n" for m in live)
        (folder / "data" / "part.json.gz").write_bytes(gzip.compress(lines.encode()))
        iso = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        (folder / "manifest-summary.json").write_text(json.dumps({
            "exportArn": f"{TABLE_ARN}/export/{export_id}", "exportTime": iso,
            "tableArn": TABLE_ARN, "s3Prefix": f"exports/{TABLE}/{REGION}",
            "itemCount": len(live), "dmqRegion": REGION, "dmqStreamArn": STREAM,
            "dmqEpoch": self.epoch}))


def _first_run(root: Path) -> Run:
    """a is sent, received and deleted; b is received and never deleted; c is never
    received. The run's last export holds b and c."""
    run = Run(root, "e1")
    run.archive(1, ("INSERT", "a"), ("INSERT", "b"), ("INSERT", "c"))
    run.archive(2, ("MODIFY", "a"), ("MODIFY", "b"))
    run.archive(3, ("REMOVE", "a"))
    run.export(10, "b", "c")
    return run


def _audit(spark: Any, root: Path, capsys: Any) -> tuple[int, str, list[Any]]:
    args = argparse.Namespace(data_dir=str(root), out=str(root / "audit"),
                              jobs=["lifecycle_audit"])
    status = audit.run(args, spark)
    lost = spark.read.parquet(str(root / "audit" / "lifecycle_audit" / "lost")) \
        .select("message_id", "epoch").collect()
    return status, capsys.readouterr().out.strip().splitlines()[-1], sorted(lost)


def test_a_memory_store_restart_reports_the_wiped_messages_lost(spark: Any, tmp_path: Path,
                                                                capsys: Any) -> None:
    _first_run(tmp_path)
    # GIVEN the memory store restarts empty: a new epoch, the same stream ARN, and sequence
    # numbers from the start again; d is sent and deleted, e sent and left in the queue
    second = Run(tmp_path, "e2")
    second.archive(100, ("INSERT", "d"), ("INSERT", "e"))
    second.archive(101, ("MODIFY", "d"))
    second.archive(102, ("REMOVE", "d"))
    second.export(110, "e")
    # WHEN the audit runs
    status, line, lost = _audit(spark, tmp_path, capsys)
    # THEN exactly b and c, acknowledged in the first run and never deleted, are lost
    assert [(r["message_id"], r["epoch"]) for r in lost] == [("b", "e1"), ("c", "e1")]
    assert line == "messages=5 lost=2 duplicates=0 fifo_violations=0"
    assert status == 1
    report = (tmp_path / "audit" / "lifecycle_audit" / "report.md").read_text()
    assert "Clean" not in report and "2 lost" in report


def test_a_persistent_store_restart_is_clean(spark: Any, tmp_path: Path, capsys: Any) -> None:
    _first_run(tmp_path)
    # GIVEN the store kept its data across the restart: the same epoch, its stream's
    # numbers going on; b is deleted at last and d is sent and left in the queue
    second = Run(tmp_path, "e1", first_seq=7)
    second.archive(100, ("INSERT", "d"), ("MODIFY", "c"))
    second.archive(101, ("REMOVE", "b"))
    second.export(110, "c", "d")
    # WHEN the audit runs THEN nothing is lost and it exits 0
    status, line, lost = _audit(spark, tmp_path, capsys)
    assert (status, line, lost) == (0, "messages=4 lost=0 duplicates=0 fifo_violations=0", [])
