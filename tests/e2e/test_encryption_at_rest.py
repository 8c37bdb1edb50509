"""GIVEN the real local server on DynamoDB Local, with encrypted queues (the default) and
one queue with encryption off
WHEN distinctive plaintexts are sent (small and large bodies, attributes, large attributes,
a FIFO message, a dead-lettered one) and read back
THEN every raw store (the DynamoDB items of every table, their stream records, the body
folder, the audit archive and the table exports) holds none of the encrypted queues'
plaintexts, while the unencrypted queue's plaintext is found there (the scan sees content).
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from chalicelib.aws import DUMMY_CREDENTIALS
from dmqlocal.dynamodb_local import DynamoDBLocal
from tests.e2e.conftest import (
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DmqProcess,
    free_port,
    server_env,
)

INLINE_LIMIT = 4096
SECRETS = {
    "small": "SMALL-secret-7a1f-body",
    "large": "LARGE-secret-7a1f-body",
    "attr": "ATTR-secret-7a1f-value",
    "number": "7316519873",
    "bigattr": "BIGATTR-secret-7a1f",
    "fifo": "FIFO-secret-7a1f-body",
    "dead": "DEAD-secret-7a1f-body",
    "trace": "Root=1-7a1f7a1f-secret",
}
BINARY = b"BINARY-secret-7a1f\x00\xff"
CONTROL = "CONTROL-clear-7a1f-body"
EXPORT_WAIT_S = 90.0
CLIENT = Config(connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 3})


def _forbidden() -> list[bytes]:
    """Every encrypted plaintext, and the forms a store would write it in (base64)."""
    found = [s.encode() for s in SECRETS.values()]
    found.append(BINARY)
    found.append(base64.b64encode(BINARY))
    return found


@pytest.fixture(scope="module")
def store() -> Iterator[str]:
    """DynamoDB Local of the test's own, so that the test can read the tables directly."""
    local = DynamoDBLocal(None)
    endpoint = local.start()
    yield endpoint
    local.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dmq-sse-data")


@pytest.fixture(scope="module")
def server(store: str, data: Path) -> Iterator[DmqProcess]:
    # No AWS credentials: DMQ reaches the store with its dummy ones, as the test does.
    env = {k: v for k, v in server_env().items() if not k.startswith("AWS_")}
    env = {**env, "HOME": str(data), "DMQ_DYNAMODB_ENDPOINT": store, "DMQ_DATA_DIR": str(data),
           "DMQ_INLINE_BODY_LIMIT": str(INLINE_LIMIT), "DMQ_EXPORT_INTERVAL_S": "2"}
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        dmq.stop(STOP_TIMEOUT_S)
    assert "Traceback" not in dmq.output, dmq.output


def _sqs(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s", config=CLIENT)


def _dynamodb(endpoint: str, service: str = "dynamodb") -> Any:
    return boto3.client(service, endpoint_url=endpoint,  # type: ignore[call-overload]
                        region_name="us-east-1", aws_access_key_id=DUMMY_CREDENTIALS[0],
                        aws_secret_access_key=DUMMY_CREDENTIALS[1], config=CLIENT)


def _send_everything(sqs: Any) -> dict[str, str]:
    """Send the plaintexts; return each queue's URL."""
    attributes = {
        "note": {"DataType": "String", "StringValue": SECRETS["attr"]},
        "count": {"DataType": "Number", "StringValue": SECRETS["number"]},
        "raw": {"DataType": "Binary", "BinaryValue": BINARY},
    }
    urls = {"plain": sqs.create_queue(QueueName="sse-default")["QueueUrl"],
            "kms": sqs.create_queue(QueueName="sse-kms", Attributes={
                "KmsMasterKeyId": "alias/e2e", "KmsDataKeyReusePeriodSeconds": "60"})[
                "QueueUrl"],
            "fifo": sqs.create_queue(QueueName="sse.fifo", Attributes={
                "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"],
            "dlq": sqs.create_queue(QueueName="sse-dlq")["QueueUrl"],
            "clear": sqs.create_queue(QueueName="sse-off", Attributes={
                "SqsManagedSseEnabled": "false"})["QueueUrl"]}
    dlq_arn = sqs.get_queue_attributes(QueueUrl=urls["dlq"], AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    urls["work"] = sqs.create_queue(QueueName="sse-work", Attributes={
        "VisibilityTimeout": "0",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}),
    })["QueueUrl"]
    sqs.send_message(QueueUrl=urls["plain"], MessageBody=SECRETS["small"],
                     MessageAttributes=attributes, MessageSystemAttributes={"AWSTraceHeader": {
                         "DataType": "String", "StringValue": SECRETS["trace"]}})
    sqs.send_message(QueueUrl=urls["kms"], MessageBody=SECRETS["large"] * 800,
                     MessageAttributes={"big": {"DataType": "String",
                                                "StringValue": SECRETS["bigattr"] * 400}})
    sqs.send_message_batch(QueueUrl=urls["plain"], Entries=[
        {"Id": "a", "MessageBody": SECRETS["small"] + "-batch"},
        {"Id": "b", "MessageBody": SECRETS["large"] * 300, "MessageAttributes": attributes}])
    sqs.send_message(QueueUrl=urls["fifo"], MessageBody=SECRETS["fifo"], MessageGroupId="g")
    sqs.send_message(QueueUrl=urls["work"], MessageBody=SECRETS["dead"])
    sqs.send_message(QueueUrl=urls["clear"], MessageBody=CONTROL)
    sqs.send_message(QueueUrl=urls["clear"], MessageBody=CONTROL * 400)
    return dict(urls)


def _receive(sqs: Any, url: str, wanted: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(got) < wanted and time.monotonic() < deadline:
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                   MessageAttributeNames=["All"],
                                   MessageSystemAttributeNames=["All"]).get("Messages", [])
    return got


def _table_items(endpoint: str) -> bytes:
    db = _dynamodb(endpoint)
    rows: list[Any] = []
    for table in db.list_tables()["TableNames"]:
        for page in db.get_paginator("scan").paginate(TableName=table):
            rows += page["Items"]
    assert rows
    return json.dumps(rows, default=lambda b: base64.b64encode(b).decode()).encode() + \
        repr(rows).encode()


def _stream_records(endpoint: str) -> bytes:
    streams = _dynamodb(endpoint, "dynamodbstreams")
    records: list[Any] = []
    for stream in streams.list_streams()["Streams"]:
        described = streams.describe_stream(StreamArn=stream["StreamArn"])["StreamDescription"]
        for shard in described["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=stream["StreamArn"], ShardId=shard["ShardId"],
                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            for _ in range(50):  # bounded: a closed shard ends, an open one goes quiet
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                records += page["Records"]
                iterator = page.get("NextShardIterator")
                if not iterator or not page["Records"]:
                    break
    assert records
    return json.dumps(records, default=str).encode() + repr(records).encode()


def _files(root: Path) -> dict[Path, bytes]:
    """Every file under a folder, gzip ones decompressed."""
    found: dict[Path, bytes] = {}
    for path in root.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            found[path] = gzip.decompress(raw) if path.suffix == ".gz" else raw
    return found


def _newest_export_after(data: Path, moment: float) -> bool:
    summaries = list((data / "exports").rglob("manifest-summary.json"))
    return any(s.stat().st_mtime > moment for s in summaries)


def _assert_clean(where: str, content: bytes) -> None:
    for secret in _forbidden():
        assert secret not in content, f"{secret!r} in clear text in {where}"


def test_no_plaintext_of_an_encrypted_queue_reaches_any_store(
    server: DmqProcess, store: str, data: Path,
) -> None:
    sqs = _sqs(server)
    # GIVEN the plaintexts sent, and read back whole (sealed and opened again)
    urls = _send_everything(sqs)
    sent_at = time.time()
    got = _receive(sqs, urls["plain"], 3)
    assert sorted(m["Body"] for m in got) == sorted(
        [SECRETS["small"], SECRETS["small"] + "-batch", SECRETS["large"] * 300])
    first = next(m for m in got if m["Body"] == SECRETS["small"])
    assert first["MessageAttributes"]["raw"]["BinaryValue"] == BINARY
    assert first["MessageAttributes"]["count"]["StringValue"] == SECRETS["number"]
    assert first["Attributes"]["AWSTraceHeader"] == SECRETS["trace"]
    (large,) = _receive(sqs, urls["kms"], 1)
    assert large["Body"] == SECRETS["large"] * 800
    assert large["MessageAttributes"]["big"]["StringValue"] == SECRETS["bigattr"] * 400
    assert [m["Body"] for m in _receive(sqs, urls["fifo"], 1)] == [SECRETS["fifo"]]
    # AND one message dead-lettered (received once, then moved on the next receive)
    assert [m["Body"] for m in _receive(sqs, urls["work"], 1)] == [SECRETS["dead"]]
    assert "Messages" not in sqs.receive_message(QueueUrl=urls["work"])
    assert [m["Body"] for m in _receive(sqs, urls["dlq"], 1)] == [SECRETS["dead"]]
    assert len(_receive(sqs, urls["clear"], 2)) == 2

    # WHEN the tables and the stream records are read directly
    items = _table_items(store)
    records = _stream_records(store)
    # THEN no encrypted plaintext is in either, while the unencrypted queue's body is
    _assert_clean("the DynamoDB items", items)
    _assert_clean("the stream records", records)
    assert CONTROL.encode() in items and CONTROL.encode() in records

    # WHEN the server has written an export after the sends, and has stopped
    deadline = time.monotonic() + EXPORT_WAIT_S
    while not _newest_export_after(data, sent_at) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _newest_export_after(data, sent_at), server.output
    assert server.stop(STOP_TIMEOUT_S) == 0, server.output
    files = _files(data)
    # THEN the body folder, the archive and the exports hold no encrypted plaintext
    bodies = {p: c for p, c in files.items() if "bodies" in p.relative_to(data).parts}
    archive = {p: c for p, c in files.items() if p.relative_to(data).parts[0] == "archive"}
    exports = {p: c for p, c in files.items() if p.relative_to(data).parts[0] == "exports"}
    assert bodies and archive and exports
    for path, content in files.items():
        _assert_clean(str(path.relative_to(data)), content)
    # AND the unencrypted queue's large body is there in clear (the scan reads content)
    assert any(CONTROL.encode() * 10 in c for c in bodies.values())
    # AND the local master key exists, private to its owner
    key = data / "keys" / "sse.key"
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o077 == 0
