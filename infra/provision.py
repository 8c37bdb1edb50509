"""Create DMQ's tables and bucket from the CloudFormation template (local runs and tests).

The template is the one definition of every resource; this reads its properties and
makes the matching API calls, so the embedded store, the tests and a deployment agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from chalicelib.metadata.epoch import ensure_epoch

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

TEMPLATE = Path(__file__).with_name("dmq.template.json")


def load_template() -> dict[str, Any]:
    """The parsed CloudFormation template."""
    return dict(json.loads(TEMPLATE.read_text()))


def _resolve(value: Any, parameters: dict[str, str]) -> Any:
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return parameters[value["Ref"]]
    if isinstance(value, dict):
        return {k: _resolve(v, parameters) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, parameters) for v in value]
    return value


def resources(parameters: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Every resource's type and properties, with parameters substituted."""
    template = load_template()
    values = {k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}
    values.update(parameters or {})
    return {
        name: {"Type": r["Type"], "Properties": _resolve(r["Properties"], values)}
        for name, r in template["Resources"].items()
    }


def table_request(properties: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """CreateTable arguments and the TTL specification, from table properties."""
    request = {k: v for k, v in properties.items() if k != "TimeToLiveSpecification"}
    stream = request.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, **stream}
    return request, properties.get("TimeToLiveSpecification")


def create_all(
    dynamodb: DynamoDBClient, s3: S3Client | None, parameters: dict[str, str] | None = None,
    region: str = "us-east-1",
) -> dict[str, str]:
    """Create every table and bucket that does not exist yet, and the store's epoch with
    the tables (kept if it exists: see `chalicelib.metadata.epoch`); return the stream
    ARNs of the tables it created, by table (a table that exists is not described: on
    DynamoDB Local, DescribeTable's cost grows with the items held).

    With no S3 client (large bodies kept in a local folder) no bucket is made.
    """
    streams: dict[str, str] = {}
    found = resources(parameters)
    existing = _listed(dynamodb)
    for resource in found.values():
        props = resource["Properties"]
        if resource["Type"] == "AWS::DynamoDB::Table":
            if props["TableName"] in existing:
                continue
            if (stream := _create_table(dynamodb, props)) is not None:
                streams[props["TableName"]] = stream
        elif resource["Type"] == "AWS::S3::Bucket" and s3 is not None:
            _create_bucket(s3, props["BucketName"], region)
    ensure_epoch(dynamodb, found["ControlTable"]["Properties"]["TableName"])
    return streams


def store_epoch(dynamodb: DynamoDBClient, parameters: dict[str, str] | None = None) -> str:
    """The epoch of the store whose tables `create_all` made (same parameters)."""
    return ensure_epoch(dynamodb, resources(parameters)["ControlTable"]["Properties"]["TableName"])


def create_cluster_tables(dynamodb: DynamoDBClient, tables: list[str]) -> dict[str, str]:
    """Create more messages tables (clusters) shaped like the template's; return the
    stream ARNs of those it created."""
    props = resources()["MessagesTable"]["Properties"]
    existing = _listed(dynamodb) if tables else set()
    made = {table: _create_table(dynamodb, {**props, "TableName": table})
            for table in tables if table not in existing}
    return {table: stream for table, stream in made.items() if stream is not None}


def _listed(dynamodb: DynamoDBClient) -> set[str]:
    """The tables that exist (ListTables: one cheap call where a CreateTable per table
    refused as in use cost DynamoDB Local up to a second each at a start)."""
    return {name for page in dynamodb.get_paginator("list_tables").paginate()
            for name in page.get("TableNames", [])}


def _create_table(dynamodb: DynamoDBClient, props: dict[str, Any]) -> str | None:
    """Create the table unless it exists; its stream ARN, or None when it existed."""
    request, ttl = table_request(props)
    try:
        dynamodb.create_table(**request)
        dynamodb.get_waiter("table_exists").wait(
            TableName=request["TableName"], WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        if ttl:
            dynamodb.update_time_to_live(
                TableName=request["TableName"],
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"],
                                         "Enabled": bool(ttl["Enabled"])},
            )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
        return None
    table = dynamodb.describe_table(TableName=request["TableName"])["Table"]
    return str(table.get("LatestStreamArn", ""))


def _create_bucket(s3: S3Client, name: str, region: str) -> None:
    try:
        if region == "us-east-1":
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(
                Bucket=name,
                CreateBucketConfiguration={"LocationConstraint": region},  # type: ignore[typeddict-item]
            )
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
