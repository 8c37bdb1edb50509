"""What every `job.py` driver shares: arguments (spark-submit or Glue), the session, output."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

Progress = Callable[[str], None]


def job_arguments(argv: Sequence[str] | None, names: Sequence[str],
                  defaults: dict[str, str]) -> dict[str, str]:
    """`--name value` pairs: Glue's resolver when running as a Glue job, argparse otherwise."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from awsglue.utils import getResolvedOptions
    except ImportError:
        parser = argparse.ArgumentParser()
        for name in names:
            parser.add_argument(f"--{name}", default=defaults.get(name))
        parsed, _ = parser.parse_known_args(argv)
        return {k: v for k, v in vars(parsed).items() if v is not None}
    required = [n for n in names if n not in defaults or f"--{n}" in argv]
    return {**defaults, **getResolvedOptions(["job", *argv], required)}


LOCAL_CONF = {
    # A laptop's two cores: a few shuffle partitions beat Spark's default 200.
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
}


def session(app_name: str) -> SparkSession:
    """The job's session: Glue's when it runs on Glue, a new one under spark-submit
    (which sets the master; with none set, a local one)."""
    builder = SparkSession.builder.appName(app_name)
    if not SparkSession.getActiveSession():
        builder = builder.config("spark.sql.session.timeZone", "UTC")
    return builder.getOrCreate()


def local_session(app_name: str = "dmq-audit", cores: int = 2) -> SparkSession:
    """A local Spark session for `make audit`, the tests and the benchmark."""
    import os

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in LOCAL_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_parquet(frames: dict[str, DataFrame], out: str) -> None:
    """Each frame as a Parquet table `<out>/<name>` (replacing an earlier run's)."""
    for name, frame in frames.items():
        frame.coalesce(1).write.mode("overwrite").parquet(f"{out.rstrip('/')}/{name}")


class Stages:
    """Stage progress on stdout: `[2/7] reading the exports ... 1.3 s`."""

    def __init__(self, total: int, progress: Progress = print) -> None:
        self._total = total
        self._done = 0
        self._progress = progress
        self._started = time.monotonic()

    def next(self, text: str) -> None:
        """Announce the next stage."""
        self._done += 1
        elapsed = time.monotonic() - self._started
        self._progress(f"[{self._done}/{self._total}] {text} (at {elapsed:.1f} s)")


def report_folder(out: str, job: str) -> str:
    """Where the job writes its report: under `out` on disk, or a temporary folder that
    `publish_report` uploads when `out` is an S3 URI."""
    if out.startswith("s3://"):
        import tempfile

        return tempfile.mkdtemp(prefix=f"{job}-report-")
    return f"{out.rstrip('/')}/{job}"


def publish_report(folder: str, out: str, job: str) -> str:
    """Upload the report files to `<out>/<job>/` when `out` is in S3; return where it is."""
    if not out.startswith("s3://"):
        return folder
    from pathlib import Path

    import boto3

    bucket, _, prefix = out[len("s3://"):].partition("/")
    s3 = boto3.client("s3")
    for path in Path(folder).iterdir():
        s3.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{job}/{path.name}".lstrip("/"))
    return f"{out.rstrip('/')}/{job}"
