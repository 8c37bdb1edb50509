"""The usage report driver: `spark-submit glue_jobs/usage_report/job.py --data D --out O`.

Writes Parquet tables (per queue, per account, per action, top talkers per hour) and
`report.md` under `<out>/usage_report/`; ends with `requests=R bytes=B billing_units=U`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `glue_jobs` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import SparkSession

from glue_jobs.common import io
from glue_jobs.common.driver import (
    Progress,
    Stages,
    job_arguments,
    publish_report,
    report_folder,
    session,
    write_parquet,
)
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
    write_parquet(tables, f"{out.rstrip('/')}/{JOB}")
    folder = report_folder(out, JOB)
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
    publish_report(folder, out, JOB)
    usage.unpersist()
    return result


def main(argv: list[str] | None = None) -> int:
    """spark-submit and Glue entry point."""
    args = job_arguments(argv, ["data", "out"], {"data": ".dmq", "out": ".dmq/audit"})
    result = run(session("dmq-usage-report"), args["data"], args["out"])
    print(result.line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
