"""GIVEN bodies beyond the inline limit WHEN sent THEN they live in S3 and come back intact."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.dynamo_counter import DynamoCounter

INLINE_LIMIT = 2048
MESSAGES_TABLE = "dmq-messages"
BODIES_BUCKET = "dmq-bodies"


@pytest.fixture
def settings() -> Settings:
    """A small inline limit, so that modest bodies already go to S3."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    inline_body_limit=INLINE_LIMIT)


def _queue(sqs: Any, name: str = "big", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _item(aws: Clients, message_id: str) -> dict[str, Any]:
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    (item,) = [i for i in items if i["sk"]["S"] == message_id]
    return dict(item)


def _object(aws: Clients, key: str) -> str:
    return aws.s3.get_object(Bucket=BODIES_BUCKET, Key=key)["Body"].read().decode()


def test_large_body_goes_to_s3_and_the_item_keeps_only_its_key(sqs: Any, aws: Clients) -> None:
    # GIVEN a body well beyond the inline limit, on a queue without encryption at rest (so
    # that the stored body can be compared; tests/functional/test_encryption.py covers
    # encrypted ones)
    url = _queue(sqs, SqsManagedSseEnabled="false")
    body = "ü" * (INLINE_LIMIT * 2)
    # WHEN it is sent
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    # THEN the item holds a body key and no body, and the bucket holds the body
    item = _item(aws, sent["MessageId"])
    assert "body" not in item
    assert _object(aws, item["body_key"]["S"]) == body
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()


def test_small_body_stays_in_the_item(sqs: Any, aws: Clients) -> None:
    # GIVEN a body well under the inline limit, on a queue without encryption at rest
    url = _queue(sqs, SqsManagedSseEnabled="false")
    # WHEN it is sent THEN the item holds it and no body key, and the bucket stays empty
    sent = sqs.send_message(QueueUrl=url, MessageBody="small")
    item = _item(aws, sent["MessageId"])
    assert item["body"]["S"] == "small"
    assert "body_key" not in item
    assert aws.s3.list_objects_v2(Bucket=BODIES_BUCKET).get("KeyCount", 0) == 0


def test_large_body_with_attributes_round_trips(sqs: Any) -> None:
    # GIVEN a large JSON body with attributes
    url = _queue(sqs)
    body = json.dumps({"rows": [{"id": i, "name": f"row-{i}-é"} for i in range(500)]})
    attributes = {"kind": {"DataType": "String", "StringValue": "report"},
                  "raw": {"DataType": "Binary", "BinaryValue": b"\x00" * 64}}
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    # WHEN it is received
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    # THEN body, digest and attributes are as sent
    assert message["Body"] == body
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


def test_large_body_comes_back_intact_on_every_redelivery(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a large message received once
    url = _queue(sqs, VisibilityTimeout="5")
    body = "line\n" * INLINE_LIMIT
    sqs.send_message(QueueUrl=url, MessageBody=body)
    (first,) = sqs.receive_message(QueueUrl=url)["Messages"]
    # WHEN its visibility ends and it is received again
    clock.advance(5)
    (second,) = sqs.receive_message(QueueUrl=url)["Messages"]
    # THEN the same body comes back both times
    assert first["Body"] == second["Body"] == body


def test_batch_mixes_inline_and_s3_bodies(sqs: Any, aws: Clients) -> None:
    # GIVEN a batch with one small and two large bodies
    url = _queue(sqs)
    bodies = {"small": "tiny", "large1": "1" * (INLINE_LIMIT + 100), "large2": "2" * 100_000}
    result = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": k, "MessageBody": v} for k, v in bodies.items()]
    )
    ids = {e["Id"]: e["MessageId"] for e in result["Successful"]}
    # THEN only the large ones are in S3
    assert "body_key" not in _item(aws, ids["small"])
    assert "body_key" in _item(aws, ids["large1"])
    assert "body_key" in _item(aws, ids["large2"])
    # AND all three come back intact
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == sorted(bodies.values())


def test_ten_large_messages_claimed_together_come_back_intact(sqs: Any) -> None:
    # GIVEN 10 messages whose bodies (and for some, attributes) live in S3
    url = _queue(sqs)
    big = {"Big": {"DataType": "String", "StringValue": "a" * (INLINE_LIMIT * 2)}}
    entries = [{"Id": f"e{i}", "MessageBody": f"{i}" * (INLINE_LIMIT + 10 * i),
                **({"MessageAttributes": big} if i % 3 == 0 else {})} for i in range(10)]
    for start in (0, 5):  # two batches keep each request under the 1 MiB batch limit
        sqs.send_message_batch(QueueUrl=url, Entries=entries[start:start + 5])
    counter = DynamoCounter()
    counter.attach(runtime.backend().stores.of("default")._db)
    try:
        # WHEN one receive claims all 10
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                  MessageAttributeNames=["All"])["Messages"]
        used = counter.snapshot()
    finally:
        counter.detach()
    # THEN they were found by one Query and claimed in one transaction
    assert used.calls == {"Query": 1, "TransactWriteItems": 1}
    # AND every body and attribute came back from S3 intact, its MD5 checked by botocore
    assert sorted(m["Body"] for m in got) == sorted(e["MessageBody"] for e in entries)
    with_attributes = [m for m in got if "MessageAttributes" in m]
    assert len(with_attributes) == 4
    assert all(m["MessageAttributes"]["Big"]["StringValue"] == big["Big"]["StringValue"]
               for m in with_attributes)


def test_deleting_a_large_message_removes_its_item(sqs: Any, aws: Clients) -> None:
    # GIVEN a large message received
    url = _queue(sqs)
    sent = sqs.send_message(QueueUrl=url, MessageBody="x" * (INLINE_LIMIT * 3))
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    # WHEN it is deleted THEN its item is gone from the table
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    assert [i for i in items if i["sk"]["S"] == sent["MessageId"]] == []


def test_large_attributes_go_to_s3_and_come_back_intact(sqs: Any, aws: Clients) -> None:
    # GIVEN a small body with attributes far beyond the inline limit
    url = _queue(sqs)
    attributes = {"blob": {"DataType": "Binary", "BinaryValue": bytes(range(256)) * 20},
                  "note": {"DataType": "String", "StringValue": "n" * INLINE_LIMIT}}
    # WHEN it is sent
    sent = sqs.send_message(QueueUrl=url, MessageBody="small", MessageAttributes=attributes)
    # THEN the item keeps neither body nor attributes inline
    item = _item(aws, sent["MessageId"])
    assert "attrs" not in item
    assert "attrs_key" in item
    # AND the message comes back with its attributes and their digest
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert message["Body"] == "small"
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


def test_large_body_and_attributes_move_to_the_dlq_intact(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN a queue redriving after one receive, and a message with S3 body and attributes
    dlq = _queue(sqs, "big-dlq")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    url = _queue(sqs, RedrivePolicy=policy, VisibilityTimeout="1")
    body = "b" * (INLINE_LIMIT * 4)
    attributes = {"blob": {"DataType": "Binary", "BinaryValue": b"\xff" * (INLINE_LIMIT * 2)}}
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    assert len(sqs.receive_message(QueueUrl=url)["Messages"]) == 1
    clock.advance(1)
    # WHEN it moves to the DLQ
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    (moved,) = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    # THEN body and attributes are intact, in objects of the DLQ's own
    assert moved["Body"] == body
    assert moved["MessageAttributes"] == attributes
    item = _item(aws, moved["MessageId"])
    assert "/big-dlq/" in item["body_key"]["S"]
    assert "/big-dlq/" in item["attrs_key"]["S"]


def _removals(aws: Clients) -> list[dict[str, Any]]:
    """The REMOVE records of the messages table's stream, shaped as Lambda delivers them."""
    arn = aws.dynamodb.describe_table(TableName=MESSAGES_TABLE)["Table"]["LatestStreamArn"]
    shards = aws.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    records = []
    for shard in shards:
        iterator = aws.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += aws.streams.get_records(ShardIterator=iterator)["Records"]
    return [
        {"eventID": r["eventID"], "eventName": "REMOVE", "awsRegion": "us-east-1",
         "eventSourceARN": arn,
         "dynamodb": {"OldImage": r["dynamodb"]["OldImage"], "ApproximateCreationDateTime": 0,
                      "SequenceNumber": r["dynamodb"]["SequenceNumber"], "SizeBytes": 1,
                      "StreamViewType": "NEW_AND_OLD_IMAGES"}}
        for r in records if r["eventName"] == "REMOVE"
    ]


def test_stream_handler_releases_the_objects_of_deleted_messages(
    sqs: Any, aws: Clients, dmq: Client
) -> None:
    # GIVEN a message with its body and attributes in S3, received and deleted
    url = _queue(sqs)
    attributes = {"blob": {"DataType": "Binary", "BinaryValue": b"\x07" * (INLINE_LIMIT * 2)}}
    sqs.send_message(QueueUrl=url, MessageBody="x" * (INLINE_LIMIT * 2),
                     MessageAttributes=attributes)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert aws.s3.list_objects_v2(Bucket=BODIES_BUCKET)["KeyCount"] == 2
    # WHEN the stream handler receives the item's REMOVE record
    dmq.lambda_.invoke("on_message_change", {"Records": _removals(aws)})
    # THEN both objects are gone from the bucket
    assert aws.s3.list_objects_v2(Bucket=BODIES_BUCKET)["KeyCount"] == 0
