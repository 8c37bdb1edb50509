"""GIVEN a job's run function WHEN its driver's entry point runs, under spark-submit or on
Glue, THEN the job gets `--data`, `--out` and its own options (and nothing Glue adds), the
result's line is printed last and the exit code follows the job's failure rule; `publish`
writes the tables, then the report, uploaded when the output is in S3; and every `job.py`
imports as a script where the `glue_jobs` package is not installed."""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from glue_jobs.common import driver

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("lifecycle_audit", "replication_audit", "usage_report")


@dataclass(frozen=True)
class Figures:
    bad: int

    @property
    def line(self) -> str:
        return f"bad={self.bad}"


def _entry(monkeypatch: pytest.MonkeyPatch, argv: Sequence[str], bad: int,
           calls: list[tuple[Any, ...]]) -> int:
    monkeypatch.setattr(driver, "session", lambda app: f"session {app}")

    def run(spark: str, data: str, out: str, **options: str) -> Figures:
        calls.append((spark, data, out, options))
        print("[1/1] auditing")
        return Figures(bad)

    return driver.entry(argv, "some_audit", run, failed=lambda result: result.bad > 0,
                        options={"table": "t0"})


def _glue_resolver(args: Sequence[str], options: Sequence[str]) -> dict[str, Any]:
    """Like Glue's `getResolvedOptions`: the named options, each required, and Glue's own."""
    parser = argparse.ArgumentParser()
    for name in ("JOB_ID", "TempDir", "RedshiftTempDir"):
        parser.add_argument(f"--{name}")
    for name in options:
        parser.add_argument(f"--{name}", required=True)
    parsed, _ = parser.parse_known_args(list(args[1:]))
    return vars(parsed)


def test_entry_under_spark_submit_passes_the_arguments_and_prints_the_line_last(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "awsglue", None)  # not on Glue
    calls: list[tuple[Any, ...]] = []
    # WHEN the driver runs with some arguments given and the rest defaulted
    code = _entry(monkeypatch, ["--data", "d", "--table", "t1", "--other", "x"], 0, calls)
    # THEN the job runs in its own Spark app with them, and the line comes last
    assert code == 0
    assert calls == [("session dmq-some-audit", "d", ".dmq/audit", {"table": "t1"})]
    assert capsys.readouterr().out.splitlines() == ["[1/1] auditing", "bad=0"]
    # AND the job's failure rule sets the exit code
    assert _entry(monkeypatch, [], 2, calls) == 1
    assert calls[-1] == ("session dmq-some-audit", ".dmq", ".dmq/audit", {"table": "t0"})


def test_entry_on_glue_reads_glues_arguments_and_passes_only_the_jobs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    utils = types.ModuleType("awsglue.utils")
    utils.__dict__["getResolvedOptions"] = _glue_resolver
    monkeypatch.setitem(sys.modules, "awsglue", types.ModuleType("awsglue"))
    monkeypatch.setitem(sys.modules, "awsglue.utils", utils)
    calls: list[tuple[Any, ...]] = []
    # WHEN Glue starts the job with its job parameters and its own
    argv = ["--JOB_ID", "j_1", "--TempDir", "s3://t/", "--data", "s3://b",
            "--out", "s3://b/audit", "--job-bookmark-option", "job-bookmark-disable"]
    code = _entry(monkeypatch, argv, 1, calls)
    # THEN the job gets its own arguments, defaults for the rest, and none of Glue's
    assert calls == [("session dmq-some-audit", "s3://b", "s3://b/audit", {"table": "t0"})]
    assert code == 1
    assert capsys.readouterr().out.splitlines()[-1] == "bad=1"


def test_publish_writes_the_tables_then_the_report_under_the_jobs_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done: list[str] = []
    monkeypatch.setattr(driver, "write_parquet",
                        lambda tables, out: done.append(f"tables {sorted(tables)} {out}"))

    def write_report(folder: str) -> None:
        done.append(f"report {folder}")
        Path(folder).mkdir(parents=True)
        (Path(folder) / "report.md").write_text("# Report\n")

    tables: dict[str, Any] = {"b": object(), "a": object()}  # write_parquet is replaced
    where = driver.publish(tables, f"{tmp_path}/", "some_audit", write_report)
    assert where == f"{tmp_path}/some_audit"
    assert done == [f"tables ['a', 'b'] {tmp_path}/some_audit", f"report {tmp_path}/some_audit"]
    assert (tmp_path / "some_audit" / "report.md").read_text() == "# Report\n"


def test_publish_uploads_the_report_when_the_output_is_in_s3(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    monkeypatch.setattr(driver, "write_parquet", lambda tables, out: written.append(out))

    folders: list[Path] = []

    def write_report(folder: str) -> None:
        folders.append(Path(folder))
        (Path(folder) / "report.md").write_text("# Report\n")
        (Path(folder) / "plot.png").write_bytes(b"png")

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="archive")
        where = driver.publish({}, "s3://archive/audit", "some_audit", write_report)
        listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="archive")["Contents"])
    assert where == "s3://archive/audit/some_audit"
    assert written == ["s3://archive/audit/some_audit"]
    assert listed == ["audit/some_audit/plot.png", "audit/some_audit/report.md"]
    assert len(folders) == 1 and not folders[0].exists()  # the temporary folder is gone


@pytest.mark.parametrize("job", JOBS)
def test_a_job_script_imports_the_checkouts_package_when_none_is_installed(
    job: str, tmp_path: Path
) -> None:
    # GIVEN a Python without site's path hooks, so `glue_jobs` is not importable
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"}
    script = ROOT / "glue_jobs" / job / "job.py"
    check = ("import runpy, sys; runpy.run_path(sys.argv[1]); "
             "print(sys.modules['glue_jobs'].__file__)")
    # WHEN the job's script is loaded as a script (not as `__main__`, so it does not run)
    done = subprocess.run([sys.executable, "-S", "-c", check, str(script)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    # THEN it imported `glue_jobs` from the checkout it sits in
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(ROOT / "glue_jobs" / "__init__.py")
