"""GIVEN stream records as DynamoDB Local writes them, whose own time (ApproximateCreationDateTime)
is rounded down to the minute, far from the times DMQ writes into the items WHEN the
lifecycle audit measures latencies THEN they are on DMQ's clock: never negative, and as
close to the truth as the stream's order allows."""

from __future__ import annotations

from typing import Any

from glue_jobs.common.events import events_from_records
from glue_jobs.common.schemas import STREAM_RECORD
from glue_jobs.lifecycle_audit import transforms as t

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/2026"
PK = {"S": "000000000000/orders#0"}
MINUTE_S = 1_790_000_040  # a whole minute: DynamoDB Local's stream time for all of them
AT = MINUTE_S * 1000  # DMQ's times below are 43 to 46 s after it


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _record(seq: int, name: str, message: str, new: dict[str, Any] | None = None,
            old: dict[str, Any] | None = None) -> dict[str, Any]:
    sk = {"S": message}
    stream: dict[str, Any] = {"ApproximateCreationDateTime": float(MINUTE_S),
                              "SequenceNumber": str(seq).zfill(21),
                              "Keys": {"pk": PK, "sk": sk}}
    if new is not None:
        stream["NewImage"] = {"pk": PK, "sk": sk, **new}
    if old is not None:
        stream["OldImage"] = {"pk": PK, "sk": sk, **old}
    return {"dmqEpoch": "e1", "eventName": name, "awsRegion": "us-east-1",
            "eventSourceARN": ARN, "dynamodb": stream}


def _sent(at: int) -> dict[str, Any]:
    return {"sent_ms": _n(at), "expires_ms": _n(at + 345_600_000), "visible_at": _n(at),
            "rc": _n(0)}


def _claimed(sent: int, at: int) -> dict[str, Any]:
    return {**_sent(sent), "visible_at": _n(at + 30_000), "rc": _n(1), "rcv": _n(at)}


def _history(spark: Any) -> Any:
    """m1 sent at +43 s, received at +44 s, deleted after m2 was sent at +45.5 s; m2
    received at +46 s and deleted; all with the same stream time, the minute's start."""
    records = [
        _record(1, "INSERT", "m1", new=_sent(AT + 43_000)),
        _record(2, "MODIFY", "m1", new=_claimed(AT + 43_000, AT + 44_000),
                old=_sent(AT + 43_000)),
        _record(3, "INSERT", "m2", new=_sent(AT + 45_500)),
        _record(4, "REMOVE", "m1", old=_claimed(AT + 43_000, AT + 44_000)),
        _record(5, "MODIFY", "m2", new=_claimed(AT + 45_500, AT + 46_000),
                old=_sent(AT + 45_500)),
        _record(6, "REMOVE", "m2", old=_claimed(AT + 45_500, AT + 46_000)),
    ]
    return events_from_records(spark.createDataFrame(records, STREAM_RECORD))


def _latencies(events: Any) -> dict[str, tuple[int, int]]:
    return {r["message_id"]: (r["latency_ms"], r["dwell_ms"])
            for r in t.deliveries(events).collect()}


def test_the_stream_clock_alone_gives_negative_latencies(spark: Any) -> None:
    # The failure this guards against: the delete's stream time is before the send.
    assert _latencies(_history(spark)) == {"m1": (-43_000, 1_000), "m2": (-45_500, 500)}


def test_latencies_are_on_dmqs_clock_and_never_negative(spark: Any) -> None:
    events = t.on_dmq_clock(_history(spark))
    # m1's delete came after m2's send (+45.5 s): 2.5 s after m1's send, at least;
    # m2's delete came after its receive (+46 s). Dwell is the claim time DMQ wrote.
    assert _latencies(events) == {"m1": (2_500, 1_000), "m2": (500, 500)}
    row = t.latency_by_queue(t.deliveries(events)).first()
    assert row is not None and row["latency_ms_p50"] >= 0
    # and a removal is classified on the same clock: both were deleted, not expired
    assert {r["removal"] for r in t.removals(events).collect()} == {"deleted"}
