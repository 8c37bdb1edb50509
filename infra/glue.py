"""Deploy DMQ's audits to AWS Glue, and point the Chalice stage's archive at their bucket.

    python infra/glue.py --stage dev      # then: chalice deploy --stage dev

It creates or updates the `dmq-audits-<stage>` stack from infra/audit.template.json (the
archive bucket, the Glue role and the three Glue 5 jobs), uploads the job scripts and
`glue_jobs.zip` (the shared code, passed to Glue as `--extra-py-files`) under
`s3://<bucket>/glue/`, and sets `DMQ_ARCHIVE_BUCKET` for the stage, so the stream
archive and the usage records land where the jobs read them.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.deploy import CONFIG, ROOT, deploy_stack

TEMPLATE = ROOT / "infra" / "audit.template.json"
JOBS = ("lifecycle_audit", "replication_audit", "usage_report")
PREFIX = "glue/"


def package() -> dict[str, bytes]:
    """What Glue needs, by S3 key: each job's `job.py`, and the `glue_jobs` package zipped."""
    source = ROOT / "glue_jobs"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(source.rglob("*.py")):
            archive.write(path, path.relative_to(ROOT).as_posix())
    files = {f"{PREFIX}glue_jobs.zip": buffer.getvalue()}
    for job in JOBS:
        files[f"{PREFIX}{job}/job.py"] = (source / job / "job.py").read_bytes()
    return files


def upload(s3: Any, bucket: str, files: dict[str, bytes]) -> list[str]:
    """Upload the packaged files; return their keys."""
    for key, body in files.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")
    return sorted(files)


def set_archive_bucket(config_path: Path, stage: str, bucket: str) -> None:
    """Write DMQ_ARCHIVE_BUCKET into the stage's environment."""
    config = json.loads(config_path.read_text())
    env = config["stages"].setdefault(stage, {}).setdefault("environment_variables", {})
    env["DMQ_ARCHIVE_BUCKET"] = bucket
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def default_bucket(session: Any, stage: str, endpoint_url: str | None) -> str:
    """S3 bucket names are global, so the default carries the stage and the account."""
    account = session.client("sts", endpoint_url=endpoint_url).get_caller_identity()["Account"]
    return f"dmq-archive-{stage}-{account}"


def main(argv: list[str] | None = None) -> int:
    """Deploy the audit stack, upload the jobs, configure the stage."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--region", default=None)
    parser.add_argument(
        "--bucket", default=None, help="archive bucket name (default dmq-archive-<stage>-<account>)"
    )
    parser.add_argument("--endpoint-url", default=None, help="another CloudFormation/S3 endpoint")
    args = parser.parse_args(argv)
    session = boto3.session.Session(region_name=args.region)
    bucket_name = args.bucket or default_bucket(session, args.stage, args.endpoint_url)
    cloudformation = session.client("cloudformation", endpoint_url=args.endpoint_url)
    outputs = deploy_stack(
        cloudformation,
        f"dmq-audits-{args.stage}",
        TEMPLATE.read_text(),
        {"ArchiveBucketName": bucket_name},
    )
    bucket = outputs["ArchiveBucketName"]
    keys = upload(session.client("s3", endpoint_url=args.endpoint_url), bucket, package())
    set_archive_bucket(CONFIG, args.stage, bucket)
    print(f"audit jobs deployed; uploaded {len(keys)} files to s3://{bucket}/{PREFIX}; "
          f"stage {args.stage} archives to s3://{bucket}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
