"""The usage report driver: `spark-submit glue_jobs/usage_report/job.py --data D --out O`.

Writes Parquet tables (per queue, per account, per action, top talkers per hour) and
`report.md` under `<out>/usage_report/`; ends with `requests=R bytes=B billing_units=U`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a script: see glue_jobs.common.driver
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from pyspark.sql import DataFrame, SparkSession

from glue_jobs.common import io
from glue_jobs.common.driver import Progress, Stages, entry, publish
from glue_jobs.common.report import Report
from glue_jobs.usage_report import transforms as t

JOB = "usage_report"


@dataclass(frozen=True)
class UsageResult:
    """The report's totals."""

    requests: int
    bytes: int
    billing_units: int

    @property
    def line(self) -> str:
        """The last line of the report's output."""
        return f"requests={self.requests} bytes={self.bytes} billing_units={self.billing_units}"


def run(spark: SparkSession, data: str, out: str, progress: Progress = print) -> UsageResult:
    """Report the usage records under `data`; write the results under `out`."""
    stages = Stages(3, progress)
    stages.next("reading the usage records")
    usage = t.per_minute(io.read_usage(spark, data)).cache()
    stages.next("adding up per account, queue, action and hour")
    tables = {"per_queue": t.per_queue(usage), "per_account": t.per_account(usage),
              "per_action": t.per_action(usage), "top_talkers": t.top_talkers(usage),
              "per_hour": t.per_hour(usage)}
    accounts = tables["per_account"].collect()
    result = UsageResult(*(sum(int(r[c]) for r in accounts) for c in t.TOTALS))
    stages.next("writing Parquet tables and the report")
    publish(tables, out, JOB, lambda folder: _report(folder, result, tables))
    usage.unpersist()
    return result


def _report(folder: str, result: UsageResult, tables: dict[str, DataFrame]) -> None:
    report = Report(folder, "DMQ usage report")
    report.line(f"{result.requests} requests, {result.bytes} bytes of messages, "
                f"{result.billing_units} billed requests (64 KB chunks).")
    for name in ("per_account", "per_queue", "top_talkers"):
        report.line(f"## {name.replace('_', ' ').capitalize()}")
        frame = tables[name]
        report.table(frame.columns, [tuple(r) for r in frame.limit(101).collect()], limit=100)
    hours = tables["per_hour"].collect()
    report.series("requests", [i for i, _ in enumerate(hours)],
                  {"requests": [r["requests"] for r in hours],
                   "billing units": [r["billing_units"] for r in hours]},
                  "Requests per hour", "hour of the records")
    report.write()


def main(argv: list[str] | None = None) -> int:
    """spark-submit and Glue entry point: always exits 0."""
    return entry(argv, JOB, run)


if __name__ == "__main__":
    sys.exit(main())
