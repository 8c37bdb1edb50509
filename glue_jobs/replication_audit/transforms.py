"""Pure transforms comparing each queue's home table with its replica tables.

Inputs are the newest exports of the messages tables of every region (`items`: region,
export_ms, item) and of the queues table (`queues`: the item of each queue record).
A queue's items in its home region are the truth; for each replica region:
- **missing**: a home item the replica lacks;
- **extra**: a replica item (not a tombstone) the home lacks;
- **divergent**: both hold it, but the message differs (body hash and size, MD5s,
  send time or retention). Receive state (visibility, receive count) is left out: it
  changes with every receive and follows by replication.
Items written within `grace_ms` of the older export are left out: replication may
simply not have shipped them yet (the lag distribution shows how long that takes).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

GRACE_MS = 10_000
CONTENT = ["body_sha256", "body_size", "body_md5", "attrs_md5", "sent_ms", "expires_ms"]
KEY = ["queue_id", "pk", "message_id"]


def _attr(name: str) -> Column:
    item = F.col("item")
    return F.coalesce(item.getItem(name).getField("S"), item.getItem(name).getField("N"))


def queue_regions(queues: DataFrame) -> DataFrame:
    """(queue_id, home, replica) for each replica region of each replicated queue."""
    return queues.select(
        _attr("queue_id").alias("queue_id"),
        _attr("home_region").alias("home"),
        F.explode(F.split(F.coalesce(_attr("replicas"), F.lit("")), ",")).alias("replica"),
    ).where((F.col("replica") != "") & (F.col("replica") != F.col("home")))


def message_items(items: DataFrame) -> DataFrame:
    """The message items of the exports, with their content fingerprint."""
    pk = _attr("pk")
    return items.where(pk.isNotNull()).select(
        "region", "export_ms",
        F.regexp_extract(pk, r"^(.*)#[0-9]+$", 1).alias("queue_id"),
        pk.alias("pk"),
        _attr("sk").alias("message_id"),
        _attr("_tomb").isNotNull().alias("tombstone"),
        _attr("sent_ms").cast("long").alias("sent_ms"),
        F.sha2(F.concat_ws("|", *[F.coalesce(_attr(c), F.lit("")) for c in CONTENT]), 256)
        .alias("fingerprint"),
    )


def compare(items: DataFrame, queues: DataFrame, grace_ms: int = GRACE_MS) -> DataFrame:
    """One row per difference: queue_id, message_id, replica region and `kind`."""
    found = message_items(items)
    regions = queue_regions(queues)
    home = found.alias("h").join(
        regions.alias("q"),
        (F.col("h.queue_id") == F.col("q.queue_id")) & (F.col("h.region") == F.col("q.home")),
    ).where(~F.col("h.tombstone")).select(
        "h.queue_id", "h.pk", "h.message_id", "q.replica",
        F.col("h.fingerprint").alias("home_fp"), F.col("h.sent_ms").alias("home_sent"),
        F.col("h.export_ms").alias("home_export"))
    replica = found.alias("r").join(
        regions.alias("q"),
        (F.col("r.queue_id") == F.col("q.queue_id")) & (F.col("r.region") == F.col("q.replica")),
    ).where(~F.col("r.tombstone")).select(
        "r.queue_id", "r.pk", "r.message_id", "q.replica",
        F.col("r.fingerprint").alias("replica_fp"), F.col("r.sent_ms").alias("replica_sent"),
        F.col("r.export_ms").alias("replica_export"))
    both = home.join(replica, [*KEY, "replica"], "full_outer")
    cutoff = F.least(F.coalesce("home_export", "replica_export"),
                     F.coalesce("replica_export", "home_export")) - F.lit(grace_ms)
    sent = F.coalesce("home_sent", "replica_sent")
    kind = (F.when(F.col("replica_fp").isNull(), F.lit("missing"))
            .when(F.col("home_fp").isNull(), F.lit("extra"))
            .when(F.col("home_fp") != F.col("replica_fp"), F.lit("divergent")))
    return (
        both.withColumn("kind", kind)
        .where(F.col("kind").isNotNull() & (sent < cutoff))
        .select("queue_id", "message_id", "replica", "kind")
    )


def replication_lag(events: DataFrame) -> DataFrame:
    """Per replicated change: replica region and the ms from the home's change to the
    replica's (events as built by `glue_jobs.common.events`)."""
    replica = events.where(F.col("rseq").isNotNull()).select(
        "pk", "message_id", F.col("rseq").alias("seq"),
        F.col("region").alias("replica"), F.col("at_ms").alias("replica_ms"))
    home = events.where(F.col("rseq").isNull()).select(
        "pk", "message_id", "seq", F.col("region").alias("home"),
        F.col("at_ms").alias("home_ms"))
    return replica.join(home, ["pk", "message_id", "seq"]).where(
        F.col("home") != F.col("replica")
    ).select("home", "replica", (F.col("replica_ms") - F.col("home_ms")).alias("lag_ms"))


def lag_summary(lags: DataFrame) -> DataFrame:
    """Per home and replica region: changes, lag p50/p90/p99 and max (ms)."""
    values = F.percentile_approx("lag_ms", [0.5, 0.9, 0.99], 10_000)
    return lags.groupBy("home", "replica").agg(
        F.count("*").alias("changes"),
        values[0].alias("lag_ms_p50"), values[1].alias("lag_ms_p90"),
        values[2].alias("lag_ms_p99"), F.max("lag_ms").alias("lag_ms_max"),
    ).orderBy("home", "replica")


def counts(differences: DataFrame) -> DataFrame:
    """One row: missing, extra and divergent items."""
    return differences.agg(*[
        F.sum((F.col("kind") == k).cast("long")).alias(k)
        for k in ("missing", "extra", "divergent")
    ]).na.fill(0)
