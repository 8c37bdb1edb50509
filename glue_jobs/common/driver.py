"""What every `job.py` driver shares: arguments (spark-submit or Glue), the session, output.

A driver keeps only what is its own: its `run(spark, data, out, ...)`, its result, its
report, and a `main` that hands them to `entry`, which reads the arguments, starts the
session, runs the job, prints the result's line last and turns it into the exit code.
`run` ends with `publish`, which writes the Parquet tables, the report, and uploads the
report when the output is in S3.

One thing cannot live here: making `glue_jobs` importable when a driver runs as a
script (`spark-submit glue_jobs/<job>/job.py ...`). Python then puts only the script's
own folder on the path, so no module of this package can be imported before the path
is fixed; each `job.py` therefore starts with the same two lines, which put the folder
holding `glue_jobs` first on the path when the module has no package (`__package__`
is empty). Imported as `glue_jobs.<job>.job` (`make audit`, the tests) they do nothing.
Glue runs a downloaded copy of the script, with `glue_jobs` importable from
`--extra-py-files`, so there the lines only add a folder that holds no `glue_jobs`;
they walk up with `.parent`, which stops at the root, rather than `.parents[2]`, which
raises for a copy kept directly in a top-level folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from pyspark.sql import DataFrame, SparkSession

Progress = Callable[[str], None]

#: The arguments every driver takes, with their defaults: where DMQ's data is, and
#: where the tables and reports go (each job under `<out>/<job>/`).
ARGUMENTS = {"data": ".dmq", "out": ".dmq/audit"}


class Result(Protocol):
    """A job's headline figures."""

    @property
    def line(self) -> str:
        """The last line of the job's output."""
        ...


R = TypeVar("R", bound=Result)


def entry(argv: Sequence[str] | None, job: str, run: Callable[..., R],
          failed: Callable[[R], bool] | None = None,
          options: Mapping[str, str] | None = None) -> int:
    """The spark-submit and Glue entry point of `job`: read `--data`, `--out` and the
    job's own `options` (name: default), each passed to `run` as a keyword; run it in
    the Spark app `dmq-<job>`; print the result's line; return 1 when `failed(result)`,
    else 0."""
    names = {**ARGUMENTS, **(options or {})}
    args = job_arguments(argv, list(names), names)
    result = run(session(f"dmq-{job.replace('_', '-')}"), args["data"], args["out"],
                 **{name: args[name] for name in options or {}})
    print(result.line, flush=True)
    return 1 if failed is not None and failed(result) else 0


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


def local_session(app_name: str = "dmq-audit", cores: int = 2,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A local Spark session for `make audit`, the tests and the benchmark (`conf`:
    settings besides LOCAL_CONF, applied after it)."""
    import os

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def publish(tables: Mapping[str, DataFrame], out: str, job: str,
            write_report: Callable[[str], None]) -> str:
    """The job's output: each table as Parquet under `<out>/<job>/`, then the report,
    which `write_report` writes into the folder it is given, uploaded to `<out>/<job>/`
    when `out` is in S3. Returns where the report is."""
    write_parquet(tables, f"{out.rstrip('/')}/{job}")
    folder = report_folder(out, job)
    write_report(folder)
    return publish_report(folder, out, job)


def write_parquet(frames: Mapping[str, DataFrame], out: str) -> None:
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
    """Upload the report files to `<out>/<job>/` when `out` is in S3, then remove the
    temporary folder; return where the report is."""
    if not out.startswith("s3://"):
        return folder
    import shutil
    from pathlib import Path

    import boto3

    bucket, _, prefix = out[len("s3://"):].partition("/")
    s3 = boto3.client("s3")
    try:
        for path in Path(folder).iterdir():
            s3.upload_file(str(path), bucket,
                           f"{prefix.rstrip('/')}/{job}/{path.name}".lstrip("/"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return f"{out.rstrip('/')}/{job}"
