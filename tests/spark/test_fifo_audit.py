"""GIVEN archived stream records of a FIFO queue's items (as DMQ writes them) WHEN the
lifecycle audit reads them THEN a delivery out of group order is a FIFO violation, the
right order is not, and the group and counter items never count as messages."""

from __future__ import annotations

from typing import Any

from pyspark.testing import assertDataFrameEqual

from glue_jobs.common.events import events_from_records
from glue_jobs.common.schemas import STREAM_RECORD
from glue_jobs.lifecycle_audit import transforms as t
from tests.spark.events import rows

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/2026"
QUEUE = "000000000000/orders.fifo"
PK = {"S": f"{QUEUE}#0"}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


class Stream:
    """Stream records of one shard partition, numbered in order."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, name: str, sk: str, at: float, new: dict[str, Any] | None = None,
            old: dict[str, Any] | None = None) -> Stream:
        key = {"pk": PK, "sk": {"S": sk}}
        stream: dict[str, Any] = {"ApproximateCreationDateTime": at,
                                  "SequenceNumber": str(len(self.records) + 100),
                                  "Keys": key}
        if new is not None:
            stream["NewImage"] = {**key, **new}
        if old is not None:
            stream["OldImage"] = {**key, **old}
        self.records.append({"eventName": name, "awsRegion": "us-east-1",
                             "eventSourceARN": ARN, "dynamodb": stream})
        return self

    def message(self, group: str, seq: str, mid: str, sent: int, received: int) -> Stream:
        """A FIFO message item sent, claimed once (at `received` ms), then deleted."""
        sk = f"f#{group} {seq}"
        item = {"mid": {"S": mid}, "group": {"S": group}, "gseq": {"S": seq},
                "sent_ms": _n(sent), "expires_ms": _n(sent + 60_000), "rc": _n(0),
                "va": _n(sent), "until": _n(0)}
        claimed = {**item, "rc": _n(1), "rcv": _n(received), "until": _n(received + 30_000)}
        return (self.add("INSERT", sk, sent / 1000, new=item)
                .add("MODIFY", sk, received / 1000, new=claimed, old=item)
                .add("REMOVE", sk, (received + 10) / 1000, old=claimed))

    def group_item(self, group: str, at: float) -> Stream:
        """The group item's own changes (created, held, removed) and the shard counter."""
        sk = f"g#{group}"
        item = {"visible_at": _n(int(at * 1000)), "n": _n(1), "rc": _n(0)}
        held = {**item, "visible_at": _n(int(at * 1000) + 30_000), "rc": _n(1)}
        return (self.add("INSERT", sk, at, new=item).add("MODIFY", sk, at, new=held, old=item)
                .add("REMOVE", sk, at, old=held)
                .add("INSERT", "s#", at, new={"n": _n(3)})
                .add("INSERT", "d#dedup-1", at, new={"mid": {"S": "x"}}))

    def events(self, spark: Any) -> Any:
        return events_from_records(spark.createDataFrame(self.records, STREAM_RECORD))


SEQ = ["10000000000000001000", "10000000000000002000", "10000000000000003000"]


def test_fifo_items_become_message_events_with_group_and_sequence(spark: Any) -> None:
    stream = Stream().group_item("A", 1.0).message("A", SEQ[0], "m-1", 1_000, 2_000)
    events = stream.events(spark)
    # THEN only the message item makes events, named by its message id, with its group
    assertDataFrameEqual(
        events.select("event_type", "queue_id", "message_id", "group_id", "group_seq"),
        rows(*({"event_type": kind, "queue_id": QUEUE, "message_id": "m-1", "group_id": "A",
                "group_seq": SEQ[0]} for kind in ("sent", "received", "removed"))))


def test_a_planted_reordering_is_a_fifo_violation(spark: Any) -> None:
    # GIVEN three messages of group A, the third delivered before the second
    stream = Stream().group_item("A", 1.0)
    stream.message("A", SEQ[0], "m-1", 1_000, 5_000)
    stream.message("A", SEQ[1], "m-2", 2_000, 7_000)
    stream.message("A", SEQ[2], "m-3", 3_000, 6_000)
    found = t.fifo_violations(stream.events(spark))
    # THEN exactly the third is reported
    assertDataFrameEqual(found.select("queue_id", "group_id", "message_id", "first_receive_ms"),
                         rows({"queue_id": QUEUE, "group_id": "A", "message_id": "m-3",
                               "first_receive_ms": 6_000}))


def test_group_order_kept_is_no_violation(spark: Any) -> None:
    # GIVEN groups A and B each delivered in order (B's first two in one receive)
    stream = Stream().group_item("A", 1.0).group_item("B", 1.0)
    stream.message("A", SEQ[0], "a-1", 1_000, 5_000)
    stream.message("A", SEQ[1], "a-2", 2_000, 6_000)
    stream.message("B", SEQ[0], "b-1", 1_000, 4_000)
    stream.message("B", SEQ[1], "b-2", 1_000, 4_000)
    stream.message("B", SEQ[2], "b-3", 3_000, 9_000)
    events = stream.events(spark)
    assert t.fifo_violations(events).count() == 0
    # AND the summary counts five messages: group, counter and dedup items are not messages
    summary = t.summary(events, events.limit(0).select("message_id"),
                        t.duplicate_deliveries(events), t.fifo_violations(events))
    assert summary.first()["messages"] == 5
