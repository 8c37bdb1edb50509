"""GIVEN hand-made lifecycle events WHEN the lifecycle transforms run THEN each anomaly
class is found exactly, and a clean history reports none."""

from __future__ import annotations

from typing import Any

from pyspark.testing import assertDataFrameEqual

from glue_jobs.lifecycle_audit import transforms as t
from tests.spark.events import QUEUE, TABLE, Events, rows

EXPORT_MS = 100_000
LIVE_SCHEMA = "table string, region string, pk string, message_id string"
EXPORTS_SCHEMA = "table string, region string, export_ms long"


def _exports(spark: Any, export_ms: int = EXPORT_MS) -> Any:
    return spark.createDataFrame([(TABLE, "r1", export_ms)], EXPORTS_SCHEMA)


def _live(spark: Any, *messages: str) -> Any:
    return spark.createDataFrame([(TABLE, "r1", f"{QUEUE}#0", m) for m in messages],
                                 LIVE_SCHEMA)


def _clean(spark: Any) -> Events:
    """a: sent, received, deleted; b: sent and still live; c: received, never deleted, live."""
    events = Events().lifecycle("a", 1_000, 2_000, 3_000)
    events.add("sent", "b", 1_500)
    return events.lifecycle("c", 4_000, 5_000, None)


def test_a_clean_history_has_no_lost_duplicate_or_fifo_finding(spark: Any) -> None:
    events = _clean(spark).frame(spark)
    lost = t.lost_copies(events, _live(spark, "b", "c"), _exports(spark))
    duplicates = t.duplicate_deliveries(events)
    fifo = t.fifo_violations(events)
    assertDataFrameEqual(
        t.summary(events, lost, duplicates, fifo),
        rows({"messages": 3, "lost": 0, "duplicates": 0, "fifo_violations": 0}),
    )


def test_a_message_neither_live_nor_removed_is_lost(spark: Any) -> None:
    # GIVEN c was received and never deleted, and the export no longer holds it
    events = _clean(spark).frame(spark)
    # WHEN the audit compares the archive with the export THEN exactly c is lost
    lost = t.lost_copies(events, _live(spark, "b"), _exports(spark))
    assertDataFrameEqual(
        lost, rows({"queue_id": QUEUE, "message_id": "c", "region": "r1", "epoch": "e1",
                    "sent_ms": 4_000, "last_event": "received"}))


def test_a_copy_written_after_the_export_is_not_judged(spark: Any) -> None:
    # GIVEN d was sent a moment before the export began (inside the margin) and is not in it
    events = _clean(spark).add("sent", "d", EXPORT_MS - 500).frame(spark)
    lost = t.lost_copies(events, _live(spark, "b", "c"), _exports(spark))
    # THEN it is not lost, but reported as not judged
    assert lost.count() == 0
    assert [r["message_id"] for r in t.unjudged_copies(events, _exports(spark)).collect()] == ["d"]


def test_a_table_without_export_judges_nothing(spark: Any) -> None:
    events = _clean(spark).frame(spark)
    none = spark.createDataFrame([], EXPORTS_SCHEMA)
    assert t.lost_copies(events, _live(spark), none).count() == 0
    # a was deleted (it cannot be lost, judged or not); b and c are open and unjudged
    assert t.unjudged_copies(events, none).count() == 2


def _before_restart() -> Events:
    """Epoch e1: a deleted; b received and never deleted; c sent and never received."""
    events = Events().lifecycle("a", 1_000, 2_000, 3_000)
    events.lifecycle("b", 1_500, 2_500, None)
    return events.add("sent", "c", 4_000)


def test_a_memory_store_restart_loses_what_was_not_deleted(spark: Any) -> None:
    # GIVEN the memory store restarts empty after epoch e1; epoch e2 numbers its stream
    # from the start again: d is sent and deleted, e sent, f sent just before the export
    events = _before_restart().restart_empty("e2").lifecycle("d", 50_000, 51_000, 52_000)
    events.add("sent", "e", 53_000).add("sent", "f", EXPORT_MS - 500)
    frame = events.frame(spark)
    # WHEN the newest export (epoch e2) holds only e and f
    lost = t.lost_copies(frame, _live(spark, "e", "f"), _exports(spark))
    # THEN exactly b and c, acknowledged in e1 and never deleted, are lost
    assertDataFrameEqual(lost.select("message_id", "epoch", "last_event"), rows(
        {"message_id": "b", "epoch": "e1", "last_event": "received"},
        {"message_id": "c", "epoch": "e1", "last_event": "sent"}))
    # AND only f, written after the export began, is not judged
    assert [r["message_id"] for r in t.unjudged_copies(frame, _exports(spark)).collect()] \
        == ["f"]


def test_a_persistent_store_restart_keeps_every_message_live(spark: Any) -> None:
    # GIVEN a store that kept its data across a restart: the same epoch, its stream numbers
    # going on, and d sent after the restart
    events = _before_restart().add("sent", "d", 50_000).frame(spark)
    # WHEN the newest export, written after the restart, holds b, c and d
    lost = t.lost_copies(events, _live(spark, "b", "c", "d"), _exports(spark))
    # THEN nothing is lost
    assert lost.count() == 0


def test_removals_of_two_epochs_with_colliding_sequence_numbers_stay_apart(spark: Any) -> None:
    # GIVEN in e1 "moved" is dead-lettered by its third change; in e2 "gone" is deleted by
    # its own third change, with the same sequence number on the same stream
    events = Events().lifecycle("moved", 1_000, 2_000, 9_000)
    events.add("sent", "moved", 9_000, sent=1_000, queue="000000000000/orders-dlq")
    events.restart_empty("e2").lifecycle("gone", 20_000, 21_000, 22_000)
    found = t.removals(events.frame(spark)).select("message_id", "removal")
    # THEN each removal is classified by its own epoch's changes
    assertDataFrameEqual(found, rows({"message_id": "moved", "removal": "dead_lettered"},
                                     {"message_id": "gone", "removal": "deleted"}))


def test_a_receive_after_the_delete_is_a_duplicate_delivery(spark: Any) -> None:
    events = _clean(spark).add("received", "a", 3_500, sent=1_000, old_rc=1, new_rc=2,
                               old_visible_at=3_000).frame(spark)
    assertDataFrameEqual(
        t.duplicate_deliveries(events).select("message_id", "at_ms", "kind"),
        rows({"message_id": "a", "at_ms": 3_500, "kind": "after_delete"}))


def test_a_second_claim_inside_the_visibility_timeout_is_a_duplicate(spark: Any) -> None:
    # GIVEN e is claimed at 2 s until 32 s, then claimed again at 10 s
    events = Events().add("sent", "e", 1_000)
    events.add("received", "e", 2_000, sent=1_000, old_rc=0, new_rc=1, old_visible_at=1_000)
    events.add("received", "e", 10_000, sent=1_000, old_rc=1, new_rc=2, old_visible_at=32_000)
    # AND f is claimed again only after its timeout ran out (no finding)
    events.add("sent", "f", 1_000)
    events.add("received", "f", 2_000, sent=1_000, old_rc=0, new_rc=1, old_visible_at=1_000)
    events.add("received", "f", 32_000, sent=1_000, old_rc=1, new_rc=2, old_visible_at=32_000)
    found = t.duplicate_deliveries(events.frame(spark))
    assertDataFrameEqual(found.select("message_id", "at_ms", "kind"),
                         rows({"message_id": "e", "at_ms": 10_000, "kind": "concurrent_claim"}))


def test_fifo_reordering_within_a_group_is_found_exactly(spark: Any) -> None:
    # GIVEN g1, g2, g3 sent in that order to group A, first delivered as g1, g3, g2
    events = Events()
    for name, sent, received in (("g1", 1_000, 5_000), ("g2", 2_000, 7_000),
                                 ("g3", 3_000, 6_000)):
        events.lifecycle(name, sent, received, received + 100, group="A")
    # AND group B delivered in order, with two messages in one batch (same time)
    for name, sent, received in (("h1", 1_000, 5_000), ("h2", 2_000, 5_000),
                                 ("h3", 3_000, 9_000)):
        events.lifecycle(name, sent, received, received + 100, group="B")
    found = t.fifo_violations(events.frame(spark))
    # THEN only g3 is out of order (delivered before the earlier-sent g2)
    assertDataFrameEqual(found.select("group_id", "message_id", "first_receive_ms"),
                         rows({"group_id": "A", "message_id": "g3", "first_receive_ms": 6_000}))


def test_removals_are_deleted_expired_or_dead_lettered(spark: Any) -> None:
    events = Events().lifecycle("del", 1_000, 2_000, 3_000)
    events.add("sent", "old", 1_000, expires=61_000).add("removed", "old", 62_000, sent=1_000,
                                                         expires=61_000)
    events.lifecycle("dlq", 1_000, 2_000, 9_000)
    events.add("sent", "dlq", 9_000, sent=1_000, queue="000000000000/orders-dlq")
    found = t.removals(events.frame(spark)).select("queue_id", "message_id", "removal")
    assertDataFrameEqual(found, rows(
        {"queue_id": QUEUE, "message_id": "del", "removal": "deleted"},
        {"queue_id": QUEUE, "message_id": "old", "removal": "expired"},
        {"queue_id": QUEUE, "message_id": "dlq", "removal": "dead_lettered"},
    ))


def test_replica_copies_are_left_to_the_replication_audit(spark: Any) -> None:
    # GIVEN a replica's copy of a: replicated twice (a receive replayed) after its removal
    events = _clean(spark)
    replica = "arn:aws:dynamodb:r2:000000000000:table/dmq-messages/stream/1"
    events.add("sent", "a", 1_100, source=replica, region="r2", rseq="1")
    events.add("removed", "a", 3_100, source=replica, region="r2", rseq="3")
    events.add("received", "a", 3_200, source=replica, region="r2", rseq="2", old_rc=0,
               new_rc=1, old_visible_at=1_000, sent=1_000)
    frame = events.frame(spark)
    # THEN the lifecycle counts a once, with one receive, and finds no duplicate
    assert t.duplicate_deliveries(frame).count() == 0
    delivered = t.deliveries(frame).where("message_id = 'a'").collect()
    assert [(r["receives"], r["latency_ms"], r["dwell_ms"]) for r in delivered] == [
        (1, 2_000, 1_000)]


def test_latency_and_receive_count_distributions(spark: Any) -> None:
    events = Events()
    for i in range(1, 11):  # latencies 1..10 s, dwell 0.5 s; the tenth received twice
        events.lifecycle(f"m{i}", 0, 500, i * 1_000)
    events.add("received", "m10", 600, sent=0, old_rc=1, new_rc=2, old_visible_at=500)
    delivered = t.deliveries(events.frame(spark))
    assertDataFrameEqual(t.receive_count_distribution(delivered),
                         rows({"receives": 1, "messages": 9}, {"receives": 2, "messages": 1}))
    row = t.latency_by_queue(delivered).first()
    assert row is not None
    assert (row["messages"], row["deleted"]) == (10, 10)
    assert (row["latency_ms_p50"], row["latency_ms_p90"], row["latency_ms_p99"]) == (
        5_000, 9_000, 10_000)
    assert row["dwell_ms_p50"] == 500


def _changed(spark: Any, *messages: str) -> Any:
    return _live(spark, *messages)


def test_the_incremental_exports_judge_the_copies_they_changed(spark: Any) -> None:
    # GIVEN after the full export: d sent (the incremental exports show it live), e sent
    # (they show it removed, but the archive has no removal), f sent (in none of them yet)
    events = _clean(spark).add("sent", "d", EXPORT_MS + 5_000) \
        .add("sent", "e", EXPORT_MS + 6_000).add("sent", "f", EXPORT_MS + 7_000).frame(spark)
    live, changed = _live(spark, "b", "c", "d"), _changed(spark, "d", "e")
    # WHEN the audit judges by the chain
    lost = t.lost_copies(events, live, _exports(spark), changed=changed)
    # THEN e is lost, though written after the full export; f alone is not judged
    assert [r["message_id"] for r in lost.collect()] == ["e"]
    unjudged = t.unjudged_copies(events, _exports(spark), changed=changed)
    assert [r["message_id"] for r in unjudged.collect()] == ["f"]
