"""`make audit` (and `dmq audit`): the audit jobs on local Spark.

They read what the local server wrote under its data folder (`.dmq/` unless
`DMQ_DATA_DIR` or `--data-dir` says otherwise): the stream archive, the usage records
and the table exports, which the server writes every `DMQ_EXPORT_INTERVAL_S` seconds
and at shutdown. So the audit works while DMQ runs (copies written after the newest
export are reported as not judged) and after it has stopped.

With the lifecycle audit (every job runs unless `--job` names some), the last line is
`messages=N lost=L duplicates=D fifo_violations=F`; the exit status is 1 when L > 0, and
2 when the data folder does not exist.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JOBS = ("usage_report", "replication_audit", "lifecycle_audit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The audit's options (shared with `dmq audit`)."""
    parser.add_argument("--data-dir", default=os.environ.get("DMQ_DATA_DIR") or ".dmq",
                        help="the local server's data folder (default .dmq)")
    parser.add_argument("--out", default=None, help="where the reports go (default DATA/audit)")
    parser.add_argument("--job", action="append", choices=JOBS, dest="jobs",
                        help="run only this job (repeatable; default: every job)")


def wanted_jobs(jobs: list[str] | None) -> list[str]:
    """The jobs to run, in order: those named, else every job."""
    return [job for job in JOBS if not jobs or job in jobs]


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """Run the jobs; print stage progress, where the reports are, and the summary line.

    A session passed in (the tests share one) is left running; else a local one is
    started and stopped.
    """
    data = str(Path(args.data_dir))
    out = args.out or str(Path(data) / "audit")
    if not Path(data).is_dir():
        print(f"No DMQ data under {data}: run `make run` and send some messages first, "
              "or pass --data-dir (or DMQ_DATA_DIR) where DMQ keeps its data.",
              file=sys.stderr)
        return 2
    print(f"Starting local Spark to audit {data} ...", flush=True)
    started = time.monotonic()
    from glue_jobs.common.driver import local_session
    from glue_jobs.lifecycle_audit import job as lifecycle
    from glue_jobs.replication_audit import job as replication
    from glue_jobs.usage_report import job as usage

    session = spark or local_session("dmq-audit")
    wanted = wanted_jobs(args.jobs)
    result = None
    try:
        if "usage_report" in wanted:
            print(usage.run(session, data, out, _progress("usage_report")).line, flush=True)
        if "replication_audit" in wanted:
            print(replication.run(session, data, out, _progress("replication_audit")).line,
                  flush=True)
        if "lifecycle_audit" in wanted:
            result = lifecycle.run(session, data, out, _progress("lifecycle_audit"))
    finally:
        if spark is None:
            session.stop()
    for job in wanted:
        print(f"report: {Path(out) / job / 'report.md'}")
    if result is None:
        return 0
    print(f"audited {result.events} lifecycle events in {time.monotonic() - started:.1f} s; "
          f"{result.unjudged} message copies newer than the newest export were not judged")
    print(result.line, flush=True)
    return 1 if result.lost else 0


def _progress(job: str) -> Callable[[str], None]:
    def show(text: str) -> None:
        print(f"{job} {text}", flush=True)

    return show


def main(argv: list[str] | None = None) -> int:
    """`python -m dmqlocal.audit`."""
    parser = argparse.ArgumentParser(description="Audit what the local DMQ archived.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
