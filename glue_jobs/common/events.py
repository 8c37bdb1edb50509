"""Stream records to lifecycle events: one row per change to one copy of a message.

A *copy* is one message item in one table of one region, named by `(source, pk,
message_id)` where `source` is the table's stream ARN. A message sent to a queue has
one home copy; a dead-letter move makes a second (same message id, another queue);
replication makes one per replica region (its items carry `_rseq`).

Each event carries its store's `epoch` (one lifetime of the stored data). Stream
sequence numbers, and even stream ARNs, can repeat from one epoch to the next, so
sequence numbers are only compared within one copy or joined together with the epoch.
A message id is a UUIDv7, or for a deduplicated send one derived from the request
(docs/request-dedup.md), which only a retry of that call repeats: a copy spans two
epochs only if its store lost its data between a send and its retry, and a copy that a
retry wrote again after its removal is one copy with two lifetimes in one stream.

Event types:
- `sent`: the copy was written (INSERT);
- `received`: a claim, which raised the receive count (MODIFY);
- `visibility_changed`: any other change, such as ChangeMessageVisibility (MODIFY);
- `removed`: the copy is gone: deleted, purged, expired, moved (REMOVE), or replaced
  by a replication tombstone (MODIFY to `_tomb`).

`at_ms` is when the change happened: the claim time DMQ writes (`rcv`) for receives,
else the stream's approximate creation time.

FIFO queues keep other items beside their messages in the shard partitions (group
items `g#...`, the sequence counter `s#`, dedup items `d#...`) and in `<queue>#dedup`
and `<queue>#attempt`: only message items become events. A FIFO message item's sort key
is `f#<group> <sequence>`; its message id is the item's `mid`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

SEQ_WIDTH = 48  # as the replication applier pads `_rseq`


def _s(image: str, name: str) -> Column:
    return F.col(f"dynamodb.{image}").getItem(name).getField("S")


def _n(image: str, name: str) -> Column:
    return F.col(f"dynamodb.{image}").getItem(name).getField("N").cast("long")


def _both(name: str) -> Column:
    """A number from the new image, else the old one."""
    return F.coalesce(_n("NewImage", name), _n("OldImage", name))


def _both_s(name: str) -> Column:
    """A string from the new image, else the old one."""
    return F.coalesce(_s("NewImage", name), _s("OldImage", name))


def seq_key(column: Column) -> Column:
    """A sequence number as a string that sorts numerically: as the replication applier
    writes `_rseq` (`chalicelib.regions.replica.padded`): zero-padded to SEQ_WIDTH, and a
    longer one (LocalStack's) `~`, its length in three digits, its digits."""
    return F.when(F.length(column) > SEQ_WIDTH, F.concat(
        F.lit("~"), F.lpad(F.length(column).cast("string"), 3, "0"), column)).otherwise(
        F.lpad(column, SEQ_WIDTH, "0"))


def dedupe_records(records: DataFrame) -> DataFrame:
    """One row per stream record: retried batches archive the same records again. Two
    epochs' records never merge, whatever their stream ARNs and sequence numbers."""
    return (records.withColumn("_seq", F.col("dynamodb.SequenceNumber"))
            .dropDuplicates(["dmqEpoch", "eventSourceARN", "_seq"]).drop("_seq"))


def is_message_key(pk: Column, sk: Column) -> Column:
    """True for the key of a message item (standard, or FIFO `f#...`), not for the other
    items FIFO queues keep in the messages tables."""
    return pk.rlike("#[0-9]+$") & (~sk.rlike("^[gsd]#"))


def message_id_of(image_mid: Column, sk: Column) -> Column:
    """A message item's message id: FIFO items carry it as `mid`, others as the sort key."""
    return F.coalesce(image_mid, sk)


def events_from_records(records: DataFrame) -> DataFrame:
    """Lifecycle events from (deduplicated) stream records of the messages tables."""
    pk = F.col("dynamodb.Keys").getItem("pk").getField("S")
    sk = F.col("dynamodb.Keys").getItem("sk").getField("S")
    new_rc, old_rc = _n("NewImage", "rc"), _n("OldImage", "rc")
    record_ms = (F.col("dynamodb.ApproximateCreationDateTime") * 1000).cast("long")
    event_type = (
        F.when(F.col("eventName") == "INSERT", F.lit("sent"))
        .when(F.col("eventName") == "REMOVE", F.lit("removed"))
        .when(_s("NewImage", "_tomb").isNotNull() | _n("NewImage", "_tomb").isNotNull(),
              F.lit("removed"))
        .when(new_rc > F.coalesce(old_rc, F.lit(0)), F.lit("received"))
        .otherwise(F.lit("visibility_changed"))
    )
    return (
        records
        .where(pk.isNotNull() & is_message_key(pk, sk))
        .select(
            F.coalesce(F.col("dmqEpoch"), F.lit("")).alias("epoch"),
            F.col("eventSourceARN").alias("source"),
            F.regexp_extract("eventSourceARN", r":table/([^/]+)", 1).alias("table"),
            F.col("awsRegion").alias("region"),
            seq_key(F.col("dynamodb.SequenceNumber")).alias("seq"),
            event_type.alias("event_type"),
            F.when(event_type == "received", F.coalesce(_n("NewImage", "rcv"), record_ms))
            .otherwise(record_ms).alias("at_ms"),
            F.regexp_extract(pk, r"^(.*)#[0-9]+$", 1).alias("queue_id"),
            pk.alias("pk"),
            message_id_of(_both_s("mid"), sk).alias("message_id"),
            _both("sent_ms").alias("sent_ms"),
            _both("expires_ms").alias("expires_ms"),
            old_rc.alias("old_rc"),
            new_rc.alias("new_rc"),
            _n("OldImage", "visible_at").alias("old_visible_at"),
            _both_s("group").alias("group_id"),
            _both_s("gseq").alias("group_seq"),
            F.when(_both_s("_rseq").isNotNull(), seq_key(_both_s("_rseq"))).alias("rseq"),
        )
    )
