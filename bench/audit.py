"""`make audit-bench`: the lifecycle audit's throughput on local Spark, in events per second.

A generator builds N synthetic lifecycle events in Spark (no archive files, so the
figure is the audit's own cost): messages on 16 queues, each sent, received once (one
in ten twice, as after a consumer crash) and deleted, except one in a hundred still
live in the export; a quarter of the queues are FIFO, with 100 groups each. The
events are cached first; the timed part is the audit itself: lost, duplicates, FIFO
order, the summary, per-queue latency percentiles and the receive-count distribution.

    python -m bench.audit [--events 1000000 5000000] [--cores 2]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from glue_jobs.common.driver import local_session
from glue_jobs.common.events import SEQ_WIDTH
from glue_jobs.lifecycle_audit import transforms as t

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "audit-bench.json"
SOURCE = "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/bench"
TABLE = "dmq-messages"
EVENTS_PER_MESSAGE = 3.09  # sent + received + removed, one in ten received twice, 1% live
START_MS = 1_800_000_000_000


def _event(k: int, kind: str, at: Column, old_rc: int | None, new_rc: int | None,
           old_visible_at: Column | None) -> Column:
    def number(value: int | None) -> Column:
        return F.lit(value).cast("long")

    return F.struct(
        F.lit(k).alias("k"), F.lit(kind).alias("event_type"), at.alias("at_ms"),
        number(old_rc).alias("old_rc"), number(new_rc).alias("new_rc"),
        (old_visible_at if old_visible_at is not None else number(None)).alias(
            "old_visible_at"),
    )


def synthetic_events(spark: SparkSession, events: int) -> tuple[DataFrame, DataFrame]:
    """About `events` lifecycle events, and the live copies of the export."""
    messages = int(events / EVENTS_PER_MESSAGE)
    m = spark.range(messages).select(
        F.col("id"),
        F.concat(F.lit("000000000000/q"), (F.col("id") % 16).cast("string")).alias("queue_id"),
        F.format_string("m%012d", F.col("id")).alias("message_id"),
        (F.lit(START_MS) + F.col("id") * 10).alias("sent_ms"),
        (F.col("id") % 10 == 0).alias("crashed"),
        (F.col("id") % 100 == 1).alias("live"),
        F.when(F.col("id") % 16 < 4, F.concat(F.lit("g"), (F.col("id") % 100).cast("string")))
        .alias("group_id"),
    )
    # Dwell varies by less than the gap between a group's messages: FIFO order holds.
    dwell = F.lit(500) + F.col("id") % 500
    sent = F.col("sent_ms")
    kinds = F.array(
        _event(0, "sent", sent, None, 0, None),
        _event(1, "received", sent + dwell, 0, 1, sent),
        _event(2, "received", sent + dwell + 31_000, 1, 2, sent + dwell + 30_000),
        _event(3, "removed", sent + dwell + 40_000, None, None, None),
    )
    e = m.select("*", F.explode(kinds).alias("e")).where(
        ((F.col("e.k") != 2) | F.col("crashed")) & ((F.col("e.k") != 3) | ~F.col("live")))
    frame = e.select(
        F.lit("").alias("epoch"), F.lit(SOURCE).alias("source"),
        F.lit(TABLE).alias("table"), F.lit("us-east-1").alias("region"),
        F.lpad((F.col("id") * 4 + F.col("e.k")).cast("string"), SEQ_WIDTH, "0").alias("seq"),
        F.col("e.event_type").alias("event_type"), F.col("e.at_ms").alias("at_ms"),
        "queue_id", F.concat(F.col("queue_id"), F.lit("#0")).alias("pk"), "message_id",
        "sent_ms", (F.col("sent_ms") + 345_600_000).alias("expires_ms"),
        F.col("e.old_rc").alias("old_rc"), F.col("e.new_rc").alias("new_rc"),
        F.col("e.old_visible_at").alias("old_visible_at"), "group_id",
        F.lit(None).cast("string").alias("group_seq"), F.lit(None).cast("string").alias("rseq"),
    )
    live = m.where("live").select(F.lit(TABLE).alias("table"),
                                  F.lit("us-east-1").alias("region"),
                                  F.concat(F.col("queue_id"), F.lit("#0")).alias("pk"),
                                  "message_id")
    return frame, live


def measure(spark: SparkSession, events: int) -> dict[str, Any]:
    """Generate and cache the events, then time the audit over them."""
    frame, live = synthetic_events(spark, events)
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    live = live.persist(StorageLevel.MEMORY_AND_DISK)
    count = frame.count()
    live.count()
    exports = spark.createDataFrame([(TABLE, "us-east-1", START_MS * 2)],
                                    "table string, region string, export_ms long")
    started = time.perf_counter()
    lost = t.lost_copies(frame, live, exports)
    figures = t.summary(frame, lost, t.duplicate_deliveries(frame),
                        t.fifo_violations(frame)).first()
    delivered = t.deliveries(frame)
    t.latency_by_queue(delivered).collect()
    t.receive_count_distribution(delivered).collect()
    seconds = time.perf_counter() - started
    frame.unpersist()
    live.unpersist()
    assert figures is not None
    return {"events": count, "messages": int(figures["messages"]),
            "lost": int(figures["lost"]), "duplicates": int(figures["duplicates"]),
            "fifo_violations": int(figures["fifo_violations"]),
            "seconds": round(seconds, 2), "events_per_s": round(count / seconds)}


def main(argv: Sequence[str] | None = None) -> int:
    """Print a table of events per second for each size."""
    parser = argparse.ArgumentParser(prog="python -m bench.audit", description=__doc__)
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    spark = local_session("dmq-audit-bench", cores=args.cores)
    try:
        measure(spark, 50_000)  # warm the JVM up; not reported
        results = []
        for size in args.events:
            print(f"auditing {size:,} synthetic events on local[{args.cores}] ...", flush=True)
            results.append(measure(spark, size))
    finally:
        spark.stop()
    print("| events | seconds | events/s | lost | duplicates | fifo_violations |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['events']:,} | {r['seconds']} | {r['events_per_s']:,} | {r['lost']} | "
              f"{r['duplicates']} | {r['fifo_violations']} |")
    if len(results) > 1:
        first, last = results[0], results[-1]
        print(f"scaling: {last['events'] / first['events']:.1f}x the events took "
              f"{last['seconds'] / first['seconds']:.1f}x the time")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"cores": args.cores, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
