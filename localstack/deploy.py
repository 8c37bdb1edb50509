"""Create every DMQ resource on LocalStack (or any DynamoDB- and S3-compatible endpoint),
then check each one against its definition.

    python localstack/deploy.py --endpoint http://localhost:4566

The resources come from infra/dmq.template.json (the queues, control and messages tables
with their indexes, streams and TTL, and the bucket for large bodies) and
infra/audit.template.json (the archive bucket), the same definitions that `make run`,
the tests and the AWS deployment use; `--clusters c2,c3` adds the messages tables of more
clusters. Every resource is then described and compared with its definition: key
schema, attributes, indexes, stream and TTL of each table, each bucket, and the store's
epoch. One line per resource says `ok` or what differs; the exit code is 1 when anything
differs. `--check` only checks. Last, it prints the environment that runs DMQ there:

    export DMQ_DYNAMODB_ENDPOINT=http://localhost:4566 DMQ_S3_ENDPOINT=http://localhost:4566 ...
    make run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chalicelib.metadata.epoch import read_epoch  # noqa: E402
from infra import provision  # noqa: E402

AUDIT_TEMPLATE = ROOT / "infra" / "audit.template.json"
MESSAGES = "MessagesTable"


def archive_bucket() -> str:
    """The archive bucket's name: the audit template's default."""
    template = json.loads(AUDIT_TEMPLATE.read_text())
    return str(template["Parameters"]["ArchiveBucketName"]["Default"])


def expected_tables(clusters: list[str]) -> dict[str, dict[str, Any]]:
    """Each table's properties, by table name: the template's, and a messages table
    shaped like the template's for each extra cluster (named as DMQ names them)."""
    found = provision.resources()
    tables = {r["Properties"]["TableName"]: r["Properties"] for r in found.values()
              if r["Type"] == "AWS::DynamoDB::Table"}
    messages = found[MESSAGES]["Properties"]
    for cluster in clusters:
        tables[f"{messages['TableName']}-{cluster}"] = {**messages, "TableName":
                                                         f"{messages['TableName']}-{cluster}"}
    return tables


def expected_buckets() -> list[str]:
    """The body bucket of the storage template and the archive bucket."""
    bodies = [r["Properties"]["BucketName"] for r in provision.resources().values()
              if r["Type"] == "AWS::S3::Bucket"]
    return [*bodies, archive_bucket()]


def _keys(schema: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(k["AttributeName"], k["KeyType"]) for k in schema]


# Index projections of tables made by earlier versions of DMQ, which it still reads (an
# index's projection cannot change once the table exists).
EARLIER_PROJECTIONS = {"visible-index": [{"ProjectionType": "INCLUDE",
                                          "NonKeyAttributes": ["expires_ms", "rc"]}]}


def _same_projection(found: dict[str, Any], want: dict[str, Any]) -> bool:
    return bool(found.get("ProjectionType") == want["ProjectionType"] and sorted(
        found.get("NonKeyAttributes", [])) == sorted(want.get("NonKeyAttributes", [])))


def _index_differences(kind: str, want: list[dict[str, Any]],
                       got: list[dict[str, Any]]) -> Iterator[str]:
    have = {i["IndexName"]: i for i in got}
    for index in want:
        found = have.get(index["IndexName"])
        if found is None:
            yield f"{kind} {index['IndexName']} missing"
            continue
        if _keys(found["KeySchema"]) != _keys(index["KeySchema"]):
            yield f"{kind} {index['IndexName']} key {_keys(found['KeySchema'])}"
        projection = found.get("Projection", {})
        accepted = [index["Projection"], *EARLIER_PROJECTIONS.get(index["IndexName"], [])]
        if not any(_same_projection(projection, p) for p in accepted):
            yield f"{kind} {index['IndexName']} projection {projection}"


def table_differences(dynamodb: Any, streams: Any, props: dict[str, Any]) -> list[str]:
    """What a table lacks of its definition (empty when it matches)."""
    name = props["TableName"]
    try:
        table = dynamodb.describe_table(TableName=name)["Table"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ResourceNotFoundException":
            return ["missing"]
        raise
    problems = []
    if table["TableStatus"] != "ACTIVE":
        problems.append(f"status {table['TableStatus']}")
    if _keys(table["KeySchema"]) != _keys(props["KeySchema"]):
        problems.append(f"key {_keys(table['KeySchema'])}")
    want_attributes = {(a["AttributeName"], a["AttributeType"])
                       for a in props["AttributeDefinitions"]}
    got_attributes = {(a["AttributeName"], a["AttributeType"])
                      for a in table["AttributeDefinitions"]}
    if got_attributes != want_attributes:
        problems.append(f"attributes {sorted(got_attributes)}")
    problems += _index_differences("GSI", props.get("GlobalSecondaryIndexes", []),
                                   table.get("GlobalSecondaryIndexes", []))
    problems += _index_differences("LSI", props.get("LocalSecondaryIndexes", []),
                                   table.get("LocalSecondaryIndexes", []))
    problems += _stream_differences(streams, table, props.get("StreamSpecification"))
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        found = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if (found.get("AttributeName"), found.get("TimeToLiveStatus")) != (
                ttl["AttributeName"], "ENABLED"):
            problems.append(f"ttl {found}")
    return problems


def _stream_differences(streams: Any, table: dict[str, Any],
                        spec: dict[str, Any] | None) -> list[str]:
    found = table.get("StreamSpecification") or {}
    if spec is None:
        return ["stream on, none defined"] if found.get("StreamEnabled") else []
    if not found.get("StreamEnabled") or found.get("StreamViewType") != spec["StreamViewType"]:
        return [f"stream {found}"]
    arn = table.get("LatestStreamArn", "")
    status = streams.describe_stream(StreamArn=arn)["StreamDescription"]["StreamStatus"]
    return [] if status in ("ENABLED", "ENABLING") else [f"stream {arn} {status}"]


def describe_table(props: dict[str, Any], table: dict[str, Any]) -> str:
    """One line about a table that matches its definition."""
    parts = ["key " + "/".join(k["AttributeName"] for k in props["KeySchema"])]
    parts += [f"GSI {i['IndexName']}" for i in props.get("GlobalSecondaryIndexes", [])]
    parts += [f"LSI {i['IndexName']}" for i in props.get("LocalSecondaryIndexes", [])]
    if props.get("StreamSpecification"):
        parts.append(f"stream {props['StreamSpecification']['StreamViewType']} "
                     f"{table.get('LatestStreamArn', '')}")
    if props.get("TimeToLiveSpecification"):
        parts.append(f"ttl {props['TimeToLiveSpecification']['AttributeName']}")
    return ", ".join(parts)


def bucket_missing(s3: Any, name: str) -> bool:
    """True when the bucket does not exist (or cannot be reached by these credentials)."""
    try:
        s3.head_bucket(Bucket=name)
    except ClientError:
        return True
    return False


def create(dynamodb: Any, s3: Any, region: str, clusters: list[str]) -> None:
    """Create whatever does not exist yet (an existing resource is kept as it is)."""
    provision.create_all(dynamodb, s3, region=region)
    extra = [t for t in expected_tables(clusters) if t not in
             {r["Properties"]["TableName"] for r in provision.resources().values()
              if r["Type"] == "AWS::DynamoDB::Table"}]
    provision.create_cluster_tables(dynamodb, extra)
    bucket = archive_bucket()
    if bucket_missing(s3, bucket):
        if region == "us-east-1":
            s3.create_bucket(Bucket=bucket)
        else:
            s3.create_bucket(Bucket=bucket,
                             CreateBucketConfiguration={"LocationConstraint": region})


def check(dynamodb: Any, streams: Any, s3: Any,
          clusters: list[str]) -> tuple[list[str], dict[str, str]]:
    """A line per resource (`ok ...` or `MISMATCH ...`), and the stream ARN of each table."""
    lines, arns = [], {}
    for name, props in expected_tables(clusters).items():
        problems = table_differences(dynamodb, streams, props)
        if problems:
            lines.append(f"MISMATCH table {name}: {'; '.join(problems)}")
            continue
        table = dynamodb.describe_table(TableName=name)["Table"]
        arns[name] = str(table.get("LatestStreamArn", ""))
        lines.append(f"ok table {name}: {describe_table(props, table)}")
    for bucket in expected_buckets():
        lines.append(f"MISMATCH bucket {bucket}: missing" if bucket_missing(s3, bucket)
                     else f"ok bucket {bucket}")
    control = provision.resources()["ControlTable"]["Properties"]["TableName"]
    try:
        epoch = read_epoch(dynamodb, control)
    except Exception:  # noqa: BLE001 - a missing table is reported above
        epoch = None
    lines.append(f"ok epoch {epoch}" if epoch else "MISMATCH epoch: the control table has none")
    return lines, arns


def environment(dynamodb_endpoint: str, s3_endpoint: str, arns: dict[str, str],
                clusters: list[str]) -> list[str]:
    """The shell lines that run DMQ on these resources."""
    queues = provision.resources()["QueuesTable"]["Properties"]["TableName"]
    messages = provision.resources()[MESSAGES]["Properties"]["TableName"]
    lines = [f"export DMQ_DYNAMODB_ENDPOINT={dynamodb_endpoint} DMQ_S3_ENDPOINT={s3_endpoint}",
             f"export DMQ_ARCHIVE_BUCKET={archive_bucket()}",
             f"export DMQ_MESSAGES_STREAM_ARN={arns.get(messages, '')}",
             f"export DMQ_QUEUES_STREAM_ARN={arns.get(queues, '')}"]
    if clusters:
        lines.append(f"export DMQ_CLUSTERS={','.join(clusters)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Create and check the resources; print the matching DMQ environment."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--endpoint", default=os.environ.get("LOCALSTACK_ENDPOINT",
                                                             "http://localhost:4566"),
                        help="LocalStack's edge endpoint (DynamoDB, its streams and S3)")
    parser.add_argument("--dynamodb-endpoint", default=None,
                        help="DynamoDB and its streams elsewhere than --endpoint")
    parser.add_argument("--s3-endpoint", default=None, help="S3 elsewhere than --endpoint")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--clusters", default="",
                        help="more clusters (messages tables), comma-separated: c2,c3")
    parser.add_argument("--check", action="store_true", help="only check, create nothing")
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    dynamodb_endpoint = args.dynamodb_endpoint or args.endpoint
    s3_endpoint = args.s3_endpoint or args.endpoint
    clusters = [c for c in args.clusters.split(",") if c and c != "default"]
    session = boto3.session.Session(region_name=args.region)
    dynamodb = session.client("dynamodb", endpoint_url=dynamodb_endpoint)
    s3 = session.client("s3", endpoint_url=s3_endpoint)
    if not args.check:
        create(dynamodb, s3, args.region, clusters)
    streams = session.client("dynamodbstreams", endpoint_url=dynamodb_endpoint)
    lines, arns = check(dynamodb, streams, s3, clusters)
    for line in lines:
        print(line)
    if any(line.startswith("MISMATCH") for line in lines):
        print("Some resources are missing or differ from their definition (above).")
        return 1
    for table, arn in sorted(arns.items()):
        print(f"table {table}: stream {arn or '(none)'}")
    print("Run DMQ against it with:")
    for line in environment(dynamodb_endpoint, s3_endpoint, arns, clusters):
        print(f"  {line}")
    print("  make run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
