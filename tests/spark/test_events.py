"""GIVEN archived stream records (as the archive handler writes them) WHEN they are read
and normalised THEN each change becomes one lifecycle event, retries counted once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from chalicelib.backend.archive import StreamArchiver
from chalicelib.regions.replica import padded
from dmqlocal.folders import DirectorySink
from glue_jobs.common import io
from glue_jobs.common.events import dedupe_records, events_from_records, seq_key
from glue_jobs.common.schemas import STREAM_RECORD
from tests.spark.events import rows

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/2026"
PK = {"S": "000000000000/orders#0"}


def _record(seq: int, name: str, at: float, new: dict[str, Any] | None = None,
            old: dict[str, Any] | None = None, message: str = "m1") -> dict[str, Any]:
    sk = {"S": message}
    stream: dict[str, Any] = {"ApproximateCreationDateTime": at, "SequenceNumber": str(seq),
                              "Keys": {"pk": PK, "sk": sk}}
    if new is not None:
        stream["NewImage"] = {"pk": PK, "sk": sk, **new}
    if old is not None:
        stream["OldImage"] = {"pk": PK, "sk": sk, **old}
    return {"eventName": name, "awsRegion": "us-east-1", "eventSourceARN": ARN,
            "dynamodb": stream}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


SENT = {"sent_ms": _n(1_000), "expires_ms": _n(9_000), "visible_at": _n(1_000), "rc": _n(0),
        "body": {"S": "secret order"}}
CLAIMED = {**SENT, "visible_at": _n(32_000), "rc": _n(1), "rcv": _n(2_000)}
RELEASED = {**CLAIMED, "visible_at": _n(2_500)}


def _archiver(root: Path, epoch: str = "e1") -> StreamArchiver:
    return StreamArchiver(DirectorySink(root), lambda region: epoch)


def test_records_become_lifecycle_events_and_retries_count_once(spark: Any,
                                                                  tmp_path: Path) -> None:
    archiver = _archiver(tmp_path)
    batch = [
        _record(100, "INSERT", 1.0, new=SENT),
        _record(101, "MODIFY", 2.0, new=CLAIMED, old=SENT),
        _record(102, "MODIFY", 2.5, new=RELEASED, old=CLAIMED),
        _record(103, "REMOVE", 3.0, old=RELEASED),
    ]
    # GIVEN the batch archived, then retried with different bounds (an overlapping object)
    archiver.write_batch(batch[:3])
    archiver.write_batch(batch[1:])
    records = io.read_records(spark, str(tmp_path))
    assert records.count() == 6
    events = events_from_records(dedupe_records(records))
    # THEN four events, one per change, with the claim time of the receive
    assertDataFrameEqual(
        events.select("event_type", "at_ms", "queue_id", "message_id", "sent_ms", "new_rc"),
        rows(
            {"event_type": "sent", "at_ms": 1_000, "queue_id": "000000000000/orders",
             "message_id": "m1", "sent_ms": 1_000, "new_rc": 0},
            {"event_type": "received", "at_ms": 2_000, "queue_id": "000000000000/orders",
             "message_id": "m1", "sent_ms": 1_000, "new_rc": 1},
            {"event_type": "visibility_changed", "at_ms": 2_500,
             "queue_id": "000000000000/orders", "message_id": "m1", "sent_ms": 1_000,
             "new_rc": 1},
            {"event_type": "removed", "at_ms": 3_000, "queue_id": "000000000000/orders",
             "message_id": "m1", "sent_ms": 1_000, "new_rc": None},
        ))


def test_the_archive_holds_no_clear_text_body(tmp_path: Path) -> None:
    archiver = _archiver(tmp_path)
    archiver.write_batch([_record(100, "INSERT", 1.0, new=SENT)])
    import gzip

    (path,) = list(tmp_path.rglob("*.json.gz"))
    text = gzip.decompress(path.read_bytes()).decode()
    assert "secret order" not in text
    assert '"body_sha256"' in text and '"body_size":{"N":"12"}' in text


def test_two_epochs_with_colliding_sequence_numbers_never_merge(spark: Any,
                                                                tmp_path: Path) -> None:
    # GIVEN a memory-store run archives m1's life, then the store restarts empty and the
    # next run's stream (same ARN) numbers m2's changes from the same sequence numbers
    first = [_record(100, "INSERT", 1.0, new=SENT), _record(101, "MODIFY", 2.0, new=CLAIMED,
                                                           old=SENT)]
    second = [_record(100, "INSERT", 5.0, new=SENT, message="m2"),
              _record(101, "REMOVE", 6.0, old=SENT, message="m2")]
    keys = {_archiver(tmp_path, "e1").write_batch(first),
            _archiver(tmp_path, "e2").write_batch(second)}
    # AND the second run retries part of its batch with other bounds (an overlapping object)
    _archiver(tmp_path, "e2").write_batch(second[1:])
    # THEN each run has its own archive object: the second did not overwrite the first
    assert len(keys) == 2 and len(list(tmp_path.rglob("*.json.gz"))) == 3
    # AND deduplication keeps every change of both runs, once each
    events = events_from_records(dedupe_records(io.read_records(spark, str(tmp_path))))
    assertDataFrameEqual(
        events.select("epoch", "table", "message_id", "event_type"),
        rows({"epoch": "e1", "table": "dmq-messages", "message_id": "m1", "event_type": "sent"},
             {"epoch": "e1", "table": "dmq-messages", "message_id": "m1",
              "event_type": "received"},
             {"epoch": "e2", "table": "dmq-messages", "message_id": "m2", "event_type": "sent"},
             {"epoch": "e2", "table": "dmq-messages", "message_id": "m2",
              "event_type": "removed"}))


def test_a_replication_tombstone_is_a_removal(spark: Any) -> None:
    tomb = {"_tomb": _n(1), "_rseq": {"S": "7".rjust(48, "0")}}
    frame = spark.createDataFrame(
        [_record(104, "MODIFY", 4.0, new=tomb, old=SENT)], STREAM_RECORD)
    event = events_from_records(frame).first()
    assert event is not None
    assert (event["event_type"], event["rseq"]) == ("removed", "7".rjust(48, "0"))


def test_sequence_numbers_sort_as_the_replication_applier_writes_them(spark: Any) -> None:
    # GIVEN sequence numbers of DynamoDB Streams (up to 40 digits) and LocalStack's (56)
    numbers = ["7", "9" * 40, "1" + "0" * 55, "2" + "0" * 55, "1" * 60]
    frame = spark.createDataFrame([(n,) for n in numbers], "n string")
    # THEN their keys are what the applier writes to `_rseq`, and sort numerically
    keys = [row.k for row in frame.select(seq_key(F.col("n")).alias("k")).collect()]
    assert keys == [padded(n) for n in numbers]
    assert sorted(keys) == keys
