"""GIVEN exports of a home and a replica table WHEN the replication audit compares them
THEN missing, extra and divergent items are found exactly, and the lag is measured."""

from __future__ import annotations

from typing import Any

from pyspark.testing import assertDataFrameEqual

from glue_jobs.common.schemas import EVENT, IMAGE
from glue_jobs.replication_audit import transforms as t
from tests.spark.events import Events, rows

QUEUE = "000000000000/orders"
EXPORT_MS = 100_000
SEQ = EVENT.fieldNames().index("seq")
REPLICA = "arn:aws:dynamodb:r2:000000000000:table/dmq-messages/stream/1"


def _item(message: str, sent: int = 1_000, body: str = "aa", **extra: Any) -> dict[str, Any]:
    item = {"pk": {"S": f"{QUEUE}#0"}, "sk": {"S": message}, "sent_ms": {"N": str(sent)},
            "expires_ms": {"N": "999999"}, "body_sha256": {"S": body},
            "visible_at": {"N": str(sent)}, "rc": {"N": "0"}}
    item.update(extra)
    return item


def _items(spark: Any, region: str, *items: dict[str, Any]) -> Any:
    return spark.createDataFrame(
        [(region, EXPORT_MS, item) for item in items],
        f"region string, export_ms long, item {IMAGE.simpleString()}")


def _queues(spark: Any, replicas: str = "r2") -> Any:
    queue = {"queue_id": {"S": QUEUE}, "home_region": {"S": "r1"}, "replicas": {"S": replicas}}
    return spark.createDataFrame([(queue,)], f"item {IMAGE.simpleString()}")


def test_identical_replicas_have_no_differences(spark: Any) -> None:
    home = _items(spark, "r1", _item("a"), _item("b"))
    # receive state differs (the replica has not seen the last claim yet): not a divergence
    replica = _items(spark, "r2", _item("a", rc={"N": "1"}), _item("b"))
    assert t.compare(home.unionByName(replica), _queues(spark)).count() == 0


def test_missing_extra_and_divergent_items_are_found_exactly(spark: Any) -> None:
    home = _items(spark, "r1", _item("same"), _item("missing"), _item("changed"),
                  _item("deleted"))
    replica = _items(spark, "r2", _item("same"), _item("changed", body="bb"), _item("extra"),
                     {"pk": {"S": f"{QUEUE}#0"}, "sk": {"S": "deleted"},
                      "_tomb": {"N": "1"}})
    found = t.compare(home.unionByName(replica), _queues(spark))
    assertDataFrameEqual(found, rows(
        {"queue_id": QUEUE, "message_id": "missing", "replica": "r2", "kind": "missing"},
        {"queue_id": QUEUE, "message_id": "changed", "replica": "r2", "kind": "divergent"},
        {"queue_id": QUEUE, "message_id": "extra", "replica": "r2", "kind": "extra"},
        {"queue_id": QUEUE, "message_id": "deleted", "replica": "r2", "kind": "missing"},
    ))
    assertDataFrameEqual(t.counts(found), rows({"missing": 2, "extra": 1, "divergent": 1}))


def test_items_newer_than_the_grace_period_and_unreplicated_queues_are_skipped(
        spark: Any) -> None:
    home = _items(spark, "r1", _item("fresh", sent=EXPORT_MS - 1_000))
    assert t.compare(home, _queues(spark)).count() == 0
    assert t.compare(_items(spark, "r1", _item("a")), _queues(spark, replicas="")).count() == 0


def test_lag_is_the_time_from_the_home_change_to_the_replica_change(spark: Any) -> None:
    events = Events().add("sent", "a", 1_000).add("sent", "b", 2_000)
    home_seqs = [row[SEQ] for row in events.rows]
    events.add("sent", "a", 1_250, source=REPLICA, region="r2", rseq=home_seqs[0])
    events.add("sent", "b", 3_000, source=REPLICA, region="r2", rseq=home_seqs[1])
    lags = t.replication_lag(events.frame(spark))
    assertDataFrameEqual(lags, rows({"home": "r1", "replica": "r2", "lag_ms": 250},
                                    {"home": "r1", "replica": "r2", "lag_ms": 1_000}))
    summary = t.lag_summary(lags).first()
    assert summary is not None
    assert (summary["changes"], summary["lag_ms_p50"], summary["lag_ms_max"]) == (2, 250, 1_000)


def test_lag_never_pairs_changes_of_two_epochs(spark: Any) -> None:
    # GIVEN a is sent and replicated; then the store restarts empty, and b's send and its
    # replication reuse the first epoch's sequence numbers on both streams
    events = Events().add("sent", "a", 1_000)
    events.add("sent", "a", 1_250, source=REPLICA, region="r2", rseq=events.rows[0][SEQ])
    events.restart_empty("e2").add("sent", "b", 50_000)
    events.add("sent", "b", 50_400, source=REPLICA, region="r2", rseq=events.rows[2][SEQ])
    assert events.rows[0][SEQ] == events.rows[2][SEQ]
    # THEN each replica change is paired with its own home change only
    assertDataFrameEqual(t.replication_lag(events.frame(spark)),
                         rows({"home": "r1", "replica": "r2", "lag_ms": 250},
                              {"home": "r1", "replica": "r2", "lag_ms": 400}))
