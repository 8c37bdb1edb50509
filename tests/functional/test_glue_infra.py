"""GIVEN the audit infrastructure WHEN it is packaged for Glue THEN every job runs on Glue 5
(Spark 3.5, Python 3.11) from its own script, with the shared code as extra Python files,
reading and writing the archive bucket; and a job.py driver runs under spark-submit."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra import glue
from tests.conftest import SPARK_TEST_JAVA_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def _resolve(value: Any, bucket: str) -> str:
    """The few intrinsics the template uses, resolved for one bucket name."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        return str(value["Fn::Sub"]).replace("${ArchiveBucketName}", bucket)
    return str(value)


def _jobs() -> dict[str, dict[str, Any]]:
    template = json.loads(glue.TEMPLATE.read_text())
    return {name: r["Properties"] for name, r in template["Resources"].items()
            if r["Type"] == "AWS::Glue::Job"}


def test_every_job_runs_on_glue_5_from_its_packaged_script() -> None:
    files = glue.package()
    jobs = _jobs()
    assert len(jobs) == len(glue.JOBS) == 3
    scripts = set()
    for job in jobs.values():
        assert job["GlueVersion"] == "5.0"
        assert job["Command"] == {**job["Command"], "Name": "glueetl", "PythonVersion": "3"}
        script = _resolve(job["Command"]["ScriptLocation"], "b")
        arguments = {k: _resolve(v, "b") for k, v in job["DefaultArguments"].items()}
        assert script.startswith("s3://b/") and script[len("s3://b/"):] in files
        assert arguments["--extra-py-files"] == "s3://b/glue/glue_jobs.zip"
        assert arguments["--data"] == "s3://b" and arguments["--out"] == "s3://b/audit"
        scripts.add(script)
    assert scripts == {f"s3://b/glue/{job}/job.py" for job in glue.JOBS}
    names = zipfile.ZipFile(io.BytesIO(files["glue/glue_jobs.zip"])).namelist()
    for module in ("glue_jobs/common/io.py", "glue_jobs/lifecycle_audit/transforms.py",
                   "glue_jobs/replication_audit/transforms.py",
                   "glue_jobs/usage_report/transforms.py"):
        assert module in names


@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_deploying_creates_the_bucket_uploads_the_jobs_and_points_the_stage_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a Chalice config with a dev stage
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"stages": {"dev": {"environment_variables": {"X": "1"}}}}))
    monkeypatch.setattr(glue, "CONFIG", config)
    with mock_aws():
        # WHEN the audit stack is deployed
        assert glue.main(["--stage", "dev", "--region", "us-east-1"]) == 0
        # THEN the archive bucket exists, encrypted, named for the stage and the account
        s3 = boto3.client("s3", region_name="us-east-1")
        bucket = "dmq-archive-dev-123456789012"
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
        assert rules["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
        # AND the scripts and the shared code are uploaded where the jobs read them
        listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
        assert sorted(listed) == sorted(glue.package())
    # AND the stage now archives into that bucket, its other settings untouched
    env = json.loads(config.read_text())["stages"]["dev"]["environment_variables"]
    assert env == {"X": "1", "DMQ_ARCHIVE_BUCKET": bucket}


@pytest.mark.timeout(180)
def test_a_job_driver_runs_under_spark_submit(tmp_path: Path) -> None:
    # GIVEN usage records as the meter writes them
    data = tmp_path / "data"
    (data / "usage" / "2026").mkdir(parents=True)
    rows = [{"account": "111", "queue": "111/a", "action": "SendMessage",
             "minute": "2026-01-01T10:00", "requests": 3, "bytes": 300, "billing_units": 3}]
    (data / "usage" / "2026" / "u.json.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    # WHEN spark-submit runs the driver script, as Glue runs it
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--driver-java-options", SPARK_TEST_JAVA_OPTIONS,
         "--conf", "spark.sql.shuffle.partitions=2",
         str(ROOT / "glue_jobs" / "usage_report" / "job.py"),
         "--data", str(data), "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170, check=False)
    # THEN it prints its totals last and writes its tables and report
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "requests=3 bytes=300 billing_units=3"
    assert (tmp_path / "out" / "usage_report" / "per_queue").is_dir()
    assert "111/a" in (tmp_path / "out" / "usage_report" / "report.md").read_text()
