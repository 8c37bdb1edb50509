"""The replication audit driver: `spark-submit glue_jobs/replication_audit/job.py --data D --out O`.

Compares what the exports show of every region's messages tables (the newest full
export of each, with the incremental exports after it applied), queue by queue, with
each replica region, and measures the replication lag from the stream archive. Writes
Parquet tables and `report.md` under `<out>/replication_audit/`; ends with
`missing=M extra=E divergent=V`; exits 1 when any item is missing or divergent.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a script: see glue_jobs.common.driver
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from glue_jobs.common import io
from glue_jobs.common.driver import Progress, Stages, entry, publish
from glue_jobs.common.events import dedupe_records, events_from_records
from glue_jobs.common.report import Report
from glue_jobs.replication_audit import transforms as t

JOB = "replication_audit"


@dataclass(frozen=True)
class ReplicationResult:
    """The audit's headline figures."""

    missing: int
    extra: int
    divergent: int
    replicated_changes: int

    @property
    def line(self) -> str:
        """The last line of the audit's output."""
        return f"missing={self.missing} extra={self.extra} divergent={self.divergent}"


def run(spark: SparkSession, data: str, out: str, progress: Progress = print,
        queues_table: str = "dmq-queues") -> ReplicationResult:
    """Compare the replicas under `data`; write the results under `out`."""
    stages = Stages(4, progress)
    stages.next("reading the newest table exports (full, then incremental)")
    chains = io.export_chains(spark, data)
    items = io.read_chain_items(spark, [c for c in chains if c.table != queues_table]) \
        .where(F.col("live"))
    queues = io.read_chain_items(spark, [c for c in chains if c.table == queues_table]) \
        .where(F.col("live"))
    stages.next("comparing home and replica items")
    differences = t.compare(items, queues)
    found = t.counts(differences).first()
    assert found is not None
    stages.next("measuring replication lag from the stream archive")
    lags = t.replication_lag(events_from_records(dedupe_records(io.read_records(spark, data))))
    lag_table = t.lag_summary(lags)
    rows = lag_table.collect()
    result = ReplicationResult(int(found["missing"]), int(found["extra"]),
                               int(found["divergent"]), sum(int(r["changes"]) for r in rows))
    stages.next("writing Parquet tables and the report")
    publish({"differences": differences, "lag": lag_table}, out, JOB,
            lambda folder: _report(folder, result, differences, lags, lag_table))
    return result


def _report(folder: str, result: ReplicationResult, differences: DataFrame, lags: DataFrame,
            lag_table: DataFrame) -> None:
    report = Report(folder, "DMQ replication audit")
    clean = result.missing == 0 and result.extra == 0 and result.divergent == 0
    report.line("**Clean: every replica holds what its home holds.**" if clean else
                f"**Differences found: {result.missing} missing, {result.extra} extra, "
                f"{result.divergent} divergent items.**")
    report.bars("differences", ["missing", "extra", "divergent"],
                [result.missing, result.extra, result.divergent],
                "Replica differences", alert=not clean)
    if not clean:
        report.table(differences.columns, [tuple(r) for r in differences.limit(51).collect()])
    report.line(f"## Replication lag ({result.replicated_changes} replicated changes)")
    report.table(lag_table.columns, [tuple(r) for r in lag_table.collect()])
    values = [r[0] / 1000 for r in lags.select("lag_ms").limit(200_000).collect()]
    report.histogram("lag", values, "Replication lag", "seconds")
    report.write()


def main(argv: list[str] | None = None) -> int:
    """spark-submit and Glue entry point: exits 1 when an item is missing or divergent."""
    return entry(argv, JOB, run, failed=lambda result: bool(result.missing or result.divergent),
                 options={"queues_table": "dmq-queues"})


if __name__ == "__main__":
    sys.exit(main())
