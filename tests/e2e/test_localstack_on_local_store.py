"""GIVEN DMQ's own local store (DynamoDB Local, and moto's server for S3, which DMQ's
local runs replace with a folder) standing in for LocalStack
WHEN localstack/deploy.py runs against it, as a user runs it against LocalStack
THEN it creates every DMQ resource and checks each against its definition (a missing one
is reported and repaired), and DMQ, started with the environment it prints, serves SQS
on those resources: large bodies in the bodies bucket, the audit archive in its bucket."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import yaml
from moto.server import ThreadedMotoServer

from dmqlocal.dynamodb_local import DynamoDBLocal
from tests.e2e.conftest import (
    CLIENT_CONFIG,
    LOCALSTACK,
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DmqProcess,
    free_port,
    server_env,
)

# DynamoDB Local takes access keys of letters and digits only.
KEYS = {"AWS_ACCESS_KEY_ID": "deploykey", "AWS_SECRET_ACCESS_KEY": "deploysecret",
        "AWS_DEFAULT_REGION": "us-east-1"}
TABLES = {"dmq-control", "dmq-queues", "dmq-messages", "dmq-messages-c2"}
BUCKETS = {"dmq-bodies", "dmq-archive"}


@dataclass(frozen=True)
class Store:
    dynamodb_endpoint: str
    s3_endpoint: str

    def client(self, service: str) -> Any:
        endpoint = self.s3_endpoint if service == "s3" else self.dynamodb_endpoint
        return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    if LOCALSTACK:  # `make test-localstack`: LocalStack itself
        yield Store(LOCALSTACK, LOCALSTACK)
        return
    dynamodb = DynamoDBLocal(None)
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    endpoint = dynamodb.start()
    try:
        s3.start()
        yield Store(endpoint, f"http://127.0.0.1:{s3._port}")
    finally:
        s3.stop()
        dynamodb.stop()


def deploy(store: Store, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMQ_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "localstack/deploy.py", "--dynamodb-endpoint", store.dynamodb_endpoint,
         "--s3-endpoint", store.s3_endpoint, "--clusters", "c2", *extra],
        cwd=ROOT, env={**env, **KEYS}, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module")
def deployed(store: Store) -> str:
    """The deploy script's output on the fresh store."""
    result = deploy(store)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_deploy_creates_and_checks_every_resource(store: Store, deployed: str) -> None:
    # THEN it says each resource is as defined
    for table in TABLES:
        assert f"ok table {table}: " in deployed
    for bucket in BUCKETS:
        assert f"ok bucket {bucket}\n" in deployed
    assert "ok epoch " in deployed and "MISMATCH" not in deployed
    # AND the store agrees, table by table
    dynamodb = store.client("dynamodb")
    assert set(dynamodb.list_tables()["TableNames"]) == TABLES
    for table in TABLES - {"dmq-control"}:
        described = dynamodb.describe_table(TableName=table)["Table"]
        assert described["StreamSpecification"] == {"StreamEnabled": True,
                                                    "StreamViewType": "NEW_AND_OLD_IMAGES"}
        assert f"table {table}: stream {described['LatestStreamArn']}" in deployed
    for table in ("dmq-messages", "dmq-messages-c2"):
        described = dynamodb.describe_table(TableName=table)["Table"]
        assert [i["IndexName"] for i in described["LocalSecondaryIndexes"]] == ["visible-index"]
        ttl = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (ttl["AttributeName"], ttl["TimeToLiveStatus"]) == ("expires_at", "ENABLED")
    queues = dynamodb.describe_table(TableName="dmq-queues")["Table"]
    assert [i["IndexName"] for i in queues["GlobalSecondaryIndexes"]] == ["account-index"]
    assert {b["Name"] for b in store.client("s3").list_buckets()["Buckets"]} == BUCKETS


def test_a_second_run_keeps_everything_and_the_epoch(store: Store, deployed: str) -> None:
    again = deploy(store)
    assert again.returncode == 0, again.stdout + again.stderr
    epoch = [line for line in deployed.splitlines() if line.startswith("ok epoch ")]
    assert epoch and epoch[0] in again.stdout


def test_check_reports_a_missing_resource_and_a_deploy_repairs_it(store: Store,
                                                                  deployed: str) -> None:
    # GIVEN the archive bucket and the second cluster's table removed
    store.client("s3").delete_bucket(Bucket="dmq-archive")
    store.client("dynamodb").delete_table(TableName="dmq-messages-c2")
    # WHEN only checked THEN both are reported, and the exit code says so
    checked = deploy(store, "--check")
    assert checked.returncode == 1, checked.stdout
    assert "MISMATCH bucket dmq-archive: missing" in checked.stdout
    assert "MISMATCH table dmq-messages-c2: missing" in checked.stdout
    # WHEN deployed again THEN both are back and checked
    repaired = deploy(store)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "ok bucket dmq-archive" in repaired.stdout
    assert "ok table dmq-messages-c2: " in repaired.stdout


def _printed_environment(output: str) -> dict[str, str]:
    env = {}
    for line in output.splitlines():
        if line.strip().startswith("export "):
            for pair in line.strip()[len("export "):].split():
                name, value = pair.split("=", 1)
                env[name] = value
    return env


def test_dmq_serves_on_the_deployed_resources(store: Store, deployed: str) -> None:
    # GIVEN DMQ started with the environment the script printed
    printed = _printed_environment(deployed)
    assert set(printed) == {"DMQ_DYNAMODB_ENDPOINT", "DMQ_S3_ENDPOINT", "DMQ_ARCHIVE_BUCKET",
                            "DMQ_MESSAGES_STREAM_ARN", "DMQ_QUEUES_STREAM_ARN", "DMQ_CLUSTERS"}
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env={**server_env(), **KEYS, **printed, "DMQ_INLINE_BODY_LIMIT": "1000"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        assert "(external store)" in dmq.output
        sqs = boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                           aws_access_key_id="k", aws_secret_access_key="s",
                           config=CLIENT_CONFIG)
        # WHEN a large message goes through a queue
        url = sqs.create_queue(QueueName="on-localstack")["QueueUrl"]
        # (in the deployed tables: the queue's record is in the deployed queues table)
        record = store.client("dynamodb").get_item(
            TableName="dmq-queues", Key={"queue_id": {"S": "000000000000/on-localstack"}})
        assert record["Item"]["name"]["S"] == "on-localstack"
        sqs.send_message(QueueUrl=url, MessageBody="x" * 5000)
        s3 = store.client("s3")
        assert s3.list_objects_v2(Bucket="dmq-bodies").get("KeyCount", 0) == 1
        (got,) = sqs.receive_message(QueueUrl=url)["Messages"]
        assert got["Body"] == "x" * 5000
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
        # THEN its body left the bodies bucket, and the stream archive reached its bucket
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
                s3.list_objects_v2(Bucket="dmq-bodies").get("KeyCount", 0)
                or not s3.list_objects_v2(Bucket="dmq-archive").get("KeyCount", 0)):
            time.sleep(0.5)
        assert s3.list_objects_v2(Bucket="dmq-bodies").get("KeyCount", 0) == 0
        assert s3.list_objects_v2(Bucket="dmq-archive").get("KeyCount", 0) > 0, dmq.output
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


def test_the_compose_file_serves_what_the_script_needs_where_it_looks() -> None:
    compose = yaml.safe_load((ROOT / "localstack" / "docker-compose.yml").read_text())
    (service,) = compose["services"].values()
    image, tag = service["image"].split(":")
    assert image == "localstack/localstack" and tag != "latest"
    assert set(service["environment"]["SERVICES"].split(",")) == {
        "dynamodb", "dynamodbstreams", "s3"}
    assert service["ports"] == ["127.0.0.1:4566:4566"]
    script = (ROOT / "localstack" / "deploy.py").read_text()
    assert '"http://localhost:4566"' in script


def test_the_readme_names_every_resource_the_script_creates() -> None:
    sys.path.insert(0, str(ROOT / "localstack"))
    try:
        import deploy as script
    finally:
        sys.path.remove(str(ROOT / "localstack"))
    readme = (ROOT / "localstack" / "README.md").read_text()
    names = [*script.expected_tables([]), *script.expected_buckets()]
    assert set(names) == (TABLES - {"dmq-messages-c2"}) | BUCKETS
    assert all(f"`{name}`" in readme for name in names)
