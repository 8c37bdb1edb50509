"""The lifecycle audit driver: `spark-submit glue_jobs/lifecycle_audit/job.py --data D --out O`.

Also a Glue job (the same arguments as job parameters), and `make audit` runs `run()`
in-process. It prints stage progress, writes Parquet tables and `report.md` with plots
under `<out>/lifecycle_audit/`, and ends with
`messages=N lost=L duplicates=D fifo_violations=F`; it exits 1 when L > 0.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a script: see glue_jobs.common.driver
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from glue_jobs.common import io
from glue_jobs.common.driver import Progress, Stages, entry, publish
from glue_jobs.common.events import dedupe_records, events_from_records
from glue_jobs.common.report import Report
from glue_jobs.lifecycle_audit import transforms as t

JOB = "lifecycle_audit"
SAMPLE = 200_000  # latency values drawn in the histogram
LATENCY_NOTE = (
    "On DMQ's clock: send and receive times are those DMQ wrote. A delete's time is not "
    "in its stream record (whose own time the store rounds down, to the minute on "
    "DynamoDB Local), so it is the latest time DMQ wrote before it in the stream, or "
    "the record's time when later: send-to-delete is a lower bound, never negative.")


@dataclass(frozen=True)
class LifecycleResult:
    """The audit's headline figures."""

    messages: int
    lost: int
    duplicates: int
    fifo_violations: int
    unjudged: int
    events: int

    @property
    def line(self) -> str:
        """The last line of the audit's output."""
        return (f"messages={self.messages} lost={self.lost} duplicates={self.duplicates} "
                f"fifo_violations={self.fifo_violations}")


@dataclass(frozen=True)
class _Exported:
    """What the export chains show: the full exports' times, and the copies the chains
    end with (`live`) or changed (`changed`)."""

    times: DataFrame
    items: DataFrame
    live: DataFrame
    changed: DataFrame

    @classmethod
    def read(cls, spark: SparkSession, chains: list[io.ExportChain]) -> _Exported:
        times = spark.createDataFrame([(c.table, c.region, c.base_ms) for c in chains],
                                      "table string, region string, export_ms long")
        items = io.read_chain_items(spark, chains).persist(StorageLevel.MEMORY_AND_DISK)
        return cls(times, items, t.live_copies(items.where(F.col("live"))),
                   t.copy_keys(items.where(F.col("changed"))))


def run(spark: SparkSession, data: str, out: str, progress: Progress = print,
        queues_table: str = "dmq-queues") -> LifecycleResult:
    """Audit the archive and exports under `data`; write the results under `out`."""
    stages = Stages(7, progress)
    stages.next("reading the stream archive")
    records = io.read_records(spark, data)
    stages.next("rebuilding message lifecycles (deduplicated by epoch and sequence number)")
    events = t.on_dmq_clock(events_from_records(dedupe_records(records))) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    event_count = events.count()
    stages.next("reading the newest full table exports and the incremental exports after them")
    chains = [c for c in io.export_chains(spark, data) if c.table != queues_table]
    exported = _Exported.read(spark, chains)
    stages.next("finding lost messages")
    lost = t.lost_copies(events, exported.live, exported.times, changed=exported.changed).cache()
    unjudged = t.unjudged_copies(events, exported.times, changed=exported.changed).count()
    stages.next("finding duplicate deliveries and FIFO violations")
    duplicates = t.duplicate_deliveries(events).cache()
    fifo = t.fifo_violations(events).cache()
    figures = t.summary(events, lost, duplicates, fifo).first()
    assert figures is not None
    result = LifecycleResult(int(figures["messages"]), int(figures["lost"]),
                             int(figures["duplicates"]), int(figures["fifo_violations"]),
                             unjudged, event_count)
    stages.next("receive counts, dwell and latency")
    delivered = t.deliveries(events).persist(StorageLevel.MEMORY_AND_DISK)
    tables = {
        "lost": lost, "duplicates": duplicates, "fifo_violations": fifo,
        "removals": t.removals(events), "latency": t.latency_by_queue(delivered).cache(),
        "receive_counts": t.receive_count_distribution(delivered).cache(),
        "throughput": t.throughput(events).cache(),
    }
    stages.next("writing Parquet tables and the report")
    publish(tables, out, JOB, lambda folder: _report(folder, result, tables, delivered, chains))
    for frame in (*tables.values(), delivered, events, exported.items):
        frame.unpersist()
    return result


def _inputs_line(result: LifecycleResult, chains: list[io.ExportChain]) -> str:
    increments = sum(len(c.increments) for c in chains)
    return (f"{result.events} lifecycle events; {len(chains)} full table exports and "
            f"{increments} incremental exports after them; {result.unjudged} open message "
            "copies written after the newest full export and in no incremental export yet "
            "(not judged for loss).")


def _report(folder: str, result: LifecycleResult, tables: dict[str, DataFrame],
            delivered: DataFrame, chains: list[io.ExportChain]) -> None:
    report = Report(folder, "DMQ lifecycle audit")
    clean = result.lost == 0 and result.duplicates == 0 and result.fifo_violations == 0
    if clean:
        report.line(f"**Clean: {result.messages} messages, none lost, no duplicate deliveries, "
                    "no FIFO violations.**")
    else:
        report.line(f"**Problems found: {result.lost} lost, {result.duplicates} duplicate "
                    f"deliveries, {result.fifo_violations} FIFO violations "
                    f"(of {result.messages} messages).**")
    report.line(_inputs_line(result, chains))
    report.bars("anomalies", ["lost", "duplicates", "fifo_violations"],
                [result.lost, result.duplicates, result.fifo_violations],
                "Lost and duplicate messages", alert=not clean)
    for name in ("lost", "duplicates", "fifo_violations"):
        rows = tables[name].limit(51).collect()
        if rows:
            report.line(f"## {name.replace('_', ' ').capitalize()}")
            report.table(tables[name].columns, [tuple(r) for r in rows])
    report.line("## Latency per queue (ms)")
    report.line(LATENCY_NOTE)
    latency = tables["latency"]
    report.table(latency.columns, [tuple(r) for r in latency.collect()])
    values = [r[0] for r in delivered.where(F.col("latency_ms").isNotNull())
              .select("latency_ms").limit(SAMPLE).collect()]
    report.histogram("latency", [v / 1000 for v in values], "Send to delete latency",
                     "seconds")
    report.line("## Receive counts")
    counts = tables["receive_counts"]
    report.table(counts.columns, [tuple(r) for r in counts.collect()])
    minutes = tables["throughput"].collect()
    report.series("throughput", [i for i, _ in enumerate(minutes)],
                  {k: [r[k] for r in minutes] for k in ("sent", "received", "removed")},
                  "Throughput", "minute of the run")
    report.write()


def main(argv: list[str] | None = None) -> int:
    """spark-submit and Glue entry point: exits 1 when a message was lost."""
    return entry(argv, JOB, run, failed=lambda result: bool(result.lost),
                 options={"queues_table": "dmq-queues"})


if __name__ == "__main__":
    sys.exit(main())
