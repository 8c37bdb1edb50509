"""The deep-queue bench's store floor: `bench.stop_time.empty` deletes every message of a
queue's shard, page after page, and says how many went."""

from __future__ import annotations

from bench.stop_time import empty, fill
from chalicelib.aws import Clients
from chalicelib.backend.items import partition_key
from chalicelib.settings import Settings


def _held(clients: Clients, settings: Settings, queue_id: str) -> int:
    return int(clients.dynamodb.query(
        TableName=settings.messages_table, Select="COUNT", KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition_key(queue_id, 0)}})["Count"])


def test_empty_deletes_every_message_of_the_shard_and_no_other(
        aws: Clients, settings: Settings) -> None:
    # more than one page of keys (1,000), and a last BatchWriteItem of fewer than 25
    fill(aws.dynamodb, "000000000000/deep", 2_013, body_bytes=16, threads=4)
    fill(aws.dynamodb, "000000000000/other", 30, body_bytes=16, threads=1)
    assert _held(aws, settings, "000000000000/deep") == 2_013

    emptied = empty(aws.dynamodb, "000000000000/deep", threads=4)

    assert emptied.messages == 2_013 and emptied.seconds > 0
    assert _held(aws, settings, "000000000000/deep") == 0
    assert _held(aws, settings, "000000000000/other") == 30


def test_empty_of_an_empty_queue_deletes_nothing(aws: Clients) -> None:
    assert empty(aws.dynamodb, "000000000000/none").messages == 0
