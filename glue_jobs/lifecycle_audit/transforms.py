"""Pure transforms of lifecycle events (see `glue_jobs.common.events`) into audit tables.

Definitions:
- **lost**: a copy of a message that the archive shows written and never removed, that
  the table no longer holds at the end of its export chain (the newest full export of
  its table and region with the incremental exports after it applied, see
  `glue_jobs.common.chains`), and that the chain can judge: an incremental export
  changed it (wrote or removed it), or it was written before the full export began
  (with a margin for clock skew; later copies are not judged). The newest chain judges
  the copies of every epoch: a store that kept its data across a restart still holds
  them, and one that started empty lost them;
- **duplicate delivery**: a receive of a copy after that copy was removed
  (`after_delete`), or a claim made while an earlier claim still held the message
  invisible (`concurrent_claim`);
- **FIFO violation**: a message of a group first delivered before an earlier-sent
  message of the same group was first delivered (messages delivered together count
  as in order);
- a removal is `dead_lettered` when the same message id was written to another queue
  of the region at about the same time, `expired` when its retention had run out,
  and `deleted` otherwise (DeleteMessage or PurgeQueue).

**One clock.** DMQ writes its own times into the items: `sent_ms` (the send) and `rcv`
(each claim). A stream record's own time (ApproximateCreationDateTime) comes from the
store's clock and is rounded down: to the second on AWS, to the minute on DynamoDB
Local, so a delete could show tens of seconds before its own send. `on_dmq_clock`
moves every event onto DMQ's clock: a receive keeps its claim time; any other change
takes the latest DMQ time written by its stream's earlier records (a change committed
after them happened after the times they carry), or its stream time when that is
later. Times that come from the stream are therefore lower bounds, never earlier than
the copy's own send.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from glue_jobs.common.events import SEQ_WIDTH, is_message_key, message_id_of

LOSS_MARGIN_MS = 2_000
MOVE_WINDOW_MS = 5_000
EXPIRY_SLACK_MS = 1_000
PERCENTILES = [0.5, 0.9, 0.99]
COPY = ["source", "pk", "message_id"]
TABLE = ["table", "region"]  # what pairs a copy with the export of its table


def _copy_window() -> WindowSpec:
    return Window.partitionBy(*COPY)


def home_events(events: DataFrame) -> DataFrame:
    """Events of home copies: sends, dead-letter copies; not replicas (which carry `_rseq`)."""
    replica = F.max(F.col("rseq").isNotNull().cast("int")).over(_copy_window())
    return events.withColumn("_replica", replica).where(F.col("_replica") == 0).drop("_replica")


def on_dmq_clock(events: DataFrame) -> DataFrame:
    """The events with `at_ms` on DMQ's clock (see the module's notes on one clock)."""
    own = (F.when(F.col("event_type") == "received", F.col("at_ms"))
           .when(F.col("event_type") == "sent", F.col("sent_ms")))
    earlier = Window.partitionBy("epoch", "source").orderBy("seq") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    dmq_ms = F.max(own).over(earlier)
    return events.withColumn("at_ms", F.when(
        F.col("event_type") == "received", F.col("at_ms"),
    ).otherwise(F.greatest(F.col("at_ms"), F.coalesce(dmq_ms, F.col("at_ms")))))


def copies(events: DataFrame) -> DataFrame:
    """One row per copy: where it lives, when it was first seen (no earlier than its
    message's send), its last event by sequence (a copy's events all come from one
    stream and one epoch), the epoch it was written in."""
    return events.groupBy(*COPY, *TABLE, "queue_id").agg(
        F.greatest(F.min("at_ms"), F.min("sent_ms")).alias("first_ms"),
        F.expr("max_by(event_type, seq)").alias("last_event"),
        F.min("sent_ms").alias("sent_ms"),
        F.expr("min_by(epoch, seq)").alias("epoch"),
    )


KEY = [*TABLE, "pk", "message_id"]


def _judged(events: DataFrame, exports: DataFrame, changed: DataFrame | None,
            margin_ms: int) -> DataFrame:
    """Every copy with `_judged`: its table has a chain, and the chain changed the copy or
    the copy was written before the chain's full export began (less the margin)."""
    found = copies(events).join(exports, TABLE, "left")
    before = F.coalesce(F.col("first_ms") < F.col("export_ms") - F.lit(margin_ms), F.lit(False))
    if changed is None:
        return found.withColumn("_judged", before)
    marked = changed.select(*KEY).distinct().withColumn("_changed", F.lit(True))
    return found.join(marked, KEY, "left").withColumn(
        "_judged", F.col("export_ms").isNotNull() & (before | F.col("_changed").isNotNull()))


def lost_copies(events: DataFrame, live: DataFrame, exports: DataFrame,
                margin_ms: int = LOSS_MARGIN_MS, changed: DataFrame | None = None) -> DataFrame:
    """Copies written, never removed, judged, and not live at the end of their chain.

    `live` holds (table, region, pk, message_id) of the items the chains end with
    (tombstones left out); `exports` holds (table, region, export_ms), the time of each
    chain's full export; `changed` holds the copies its incremental exports changed.
    """
    judged = _judged(events, exports, changed, margin_ms).where(F.col("_judged"))
    open_copies = judged.where(F.col("last_event") != "removed")
    return (
        open_copies.join(live.select(*KEY), KEY, "left_anti")
        .select("queue_id", "message_id", "region", "epoch", "sent_ms", "last_event")
    )


def unjudged_copies(events: DataFrame, exports: DataFrame, margin_ms: int = LOSS_MARGIN_MS,
                    changed: DataFrame | None = None) -> DataFrame:
    """Copies still open (never removed) that no chain can judge: their table has none, or
    they came after its full export and no incremental export changed them (yet). A
    removed copy cannot be lost, whatever the exports show."""
    return _judged(events, exports, changed, margin_ms) \
        .where(~F.col("_judged") & (F.col("last_event") != "removed")) \
        .drop("_judged", "_changed")


def removals(events: DataFrame) -> DataFrame:
    """Each removal of a home copy, classified as deleted, expired or dead_lettered."""
    home = home_events(events)
    removed = home.where(F.col("event_type") == "removed").alias("r")
    writes = home.where(F.col("event_type") == "sent").select(
        F.col("message_id").alias("w_message_id"), F.col("region").alias("w_region"),
        F.col("queue_id").alias("w_queue_id"), F.col("at_ms").alias("w_ms"))
    moved = removed.join(
        writes,
        (F.col("r.message_id") == F.col("w_message_id"))
        & (F.col("r.region") == F.col("w_region"))
        & (F.col("r.queue_id") != F.col("w_queue_id"))
        & (F.abs(F.col("w_ms") - F.col("r.at_ms")) <= MOVE_WINDOW_MS),
        "left_semi",
    ).select("epoch", "source", "seq").withColumn("_moved", F.lit(True))
    kind = (F.when(F.col("_moved"), F.lit("dead_lettered"))
            .when(F.col("expires_ms") <= F.col("at_ms") + EXPIRY_SLACK_MS, F.lit("expired"))
            .otherwise(F.lit("deleted")))
    return (
        removed.join(moved, ["epoch", "source", "seq"], "left")
        .select("queue_id", "message_id", "region", "seq", "at_ms", "sent_ms",
                kind.alias("removal"))
    )


def duplicate_deliveries(events: DataFrame) -> DataFrame:
    """Receives after the copy's removal, and claims made while another claim held it."""
    home = home_events(events)
    removed_seq = F.min(F.when(F.col("event_type") == "removed", F.col("seq"))) \
        .over(_copy_window())
    received = F.col("event_type") == "received"
    after_delete = received & F.col("_removed_seq").isNotNull() \
        & (F.col("seq") > F.col("_removed_seq"))
    concurrent = received & (F.col("old_rc") > 0) & (F.col("old_visible_at") > F.col("at_ms"))
    return (
        home.withColumn("_removed_seq", removed_seq)
        .where(after_delete | concurrent)
        .select("queue_id", "message_id", "seq", "at_ms",
                F.when(after_delete, F.lit("after_delete"))
                .otherwise(F.lit("concurrent_claim")).alias("kind"))
    )


def _first_receive() -> Column:
    return F.min(F.when(F.col("event_type") == "received", F.col("at_ms")))


def fifo_violations(events: DataFrame) -> DataFrame:
    """Messages delivered before an earlier-sent message of their group was delivered."""
    grouped = home_events(events).where(F.col("group_id").isNotNull())
    messages = grouped.groupBy("queue_id", "group_id", "message_id").agg(
        F.min("sent_ms").alias("sent_ms"),
        F.lpad(F.min("group_seq"), SEQ_WIDTH, "0").alias("group_seq"),
        _first_receive().alias("first_receive_ms"),
    ).where(F.col("first_receive_ms").isNotNull())
    earlier = Window.partitionBy("queue_id", "group_id") \
        .orderBy("sent_ms", "group_seq", "message_id") \
        .rowsBetween(Window.unboundedPreceding, -1)
    return (
        messages.withColumn("_earlier_max", F.max("first_receive_ms").over(earlier))
        .where(F.col("first_receive_ms") < F.col("_earlier_max"))
        .select("queue_id", "group_id", "message_id", "sent_ms", "first_receive_ms")
    )


def deliveries(events: DataFrame) -> DataFrame:
    """Per home copy: queue, send time, receive count, first receive and consumer delete
    (events on one clock: `on_dmq_clock`)."""
    home = home_events(events)
    deleted = removals(events).where(F.col("removal") == "deleted") \
        .groupBy("queue_id", "message_id").agg(F.min("at_ms").alias("deleted_ms"))
    per_copy = home.groupBy("queue_id", "message_id").agg(
        F.min("sent_ms").alias("sent_ms"),
        F.sum((F.col("event_type") == "received").cast("long")).alias("receives"),
        _first_receive().alias("first_receive_ms"),
    )
    return per_copy.join(deleted, ["queue_id", "message_id"], "left").select(
        "queue_id", "message_id", "sent_ms", "receives", "first_receive_ms", "deleted_ms",
        (F.col("first_receive_ms") - F.col("sent_ms")).alias("dwell_ms"),
        (F.col("deleted_ms") - F.col("sent_ms")).alias("latency_ms"),
    )


def receive_count_distribution(deliveries_df: DataFrame) -> DataFrame:
    """How many messages were received 0, 1, 2, ... times."""
    return deliveries_df.groupBy("receives").agg(F.count("*").alias("messages")) \
        .orderBy("receives")


def _percentiles(column: str, prefix: str) -> list[Column]:
    values = F.percentile_approx(column, PERCENTILES, 10_000)
    return [values[i].alias(f"{prefix}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]


def latency_by_queue(deliveries_df: DataFrame) -> DataFrame:
    """Per queue: messages, deleted ones, send-to-delete and send-to-first-receive p50/p90/p99."""
    return deliveries_df.groupBy("queue_id").agg(
        F.count("*").alias("messages"),
        F.count("deleted_ms").alias("deleted"),
        *_percentiles("latency_ms", "latency_ms"),
        *_percentiles("dwell_ms", "dwell_ms"),
    ).orderBy("queue_id")


def throughput(events: DataFrame) -> DataFrame:
    """Per minute: home copies sent, received and removed."""
    home = home_events(events)
    minute = (F.floor(F.col("at_ms") / 60_000) * 60_000).cast("long")
    return home.groupBy(minute.alias("minute_ms")).agg(
        *[F.sum((F.col("event_type") == t).cast("long")).alias(t)
          for t in ("sent", "received", "removed")]
    ).orderBy("minute_ms")


def summary(events: DataFrame, lost: DataFrame, duplicates: DataFrame,
            fifo: DataFrame) -> DataFrame:
    """One row: messages sent, lost messages, duplicate deliveries and FIFO violations."""
    sent = events.where(F.col("event_type") == "sent") \
        .agg(F.countDistinct("message_id").alias("messages"))
    return (
        sent.crossJoin(lost.agg(F.countDistinct("message_id").alias("lost")))
        .crossJoin(duplicates.agg(F.count("*").alias("duplicates")))
        .crossJoin(fifo.agg(F.count("*").alias("fifo_violations")))
    )


def copy_keys(export_items: DataFrame) -> DataFrame:
    """(table, region, pk, message_id) of the message items in export items."""
    item = F.col("item")
    pk = item.getItem("pk").getField("S")
    sk = item.getItem("sk").getField("S")
    return export_items.where(pk.isNotNull() & is_message_key(pk, sk)).select(
        *TABLE,
        pk.alias("pk"),
        message_id_of(item.getItem("mid").getField("S"), sk).alias("message_id"),
    )


def live_copies(export_items: DataFrame) -> DataFrame:
    """(table, region, pk, message_id) of the message items in the exports; tombstones
    are gone."""
    return copy_keys(export_items.where(F.col("item").getItem("_tomb").isNull()))
