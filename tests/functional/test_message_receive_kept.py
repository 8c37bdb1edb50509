"""GIVEN a steady receiver of one message at a time WHEN it drains a queue THEN most of
its receives are one store request (the claim): a read of the visibility index asks for
a page, and what its receive does not take is kept for the next receive of the shard in
this process. Every message still comes exactly once; a kept candidate another receiver
claimed meanwhile is a lost claim, which drops the rest so that the next receive reads.

DynamoDB requests are counted with botocore event hooks on the message store's client,
as the benchmark counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from tests.dynamo_counter import DynamoCounter
from tests.legacy_tables import MESSAGES_TABLE

# Kept candidates live a second of wall-clock time: beside the other tests' load the
# receives could come further apart. `make test` runs this module alone, after the rest.
pytestmark = pytest.mark.quiet

MESSAGES = 30


@pytest.fixture
def counter(dmq: Client) -> Iterator[DynamoCounter]:
    """Counts the message store's DynamoDB requests."""
    counting = DynamoCounter()
    counting.attach(runtime.backend().stores.of("default")._db)
    yield counting
    counting.detach()


def _queue(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="steady")["QueueUrl"])


def _send(sqs: Any, url: str, count: int) -> list[str]:
    sent: list[str] = []
    for first in range(0, count, 10):
        entries = [{"Id": f"e{i}", "MessageBody": f"body-{first + i}"}
                   for i in range(min(10, count - first))]
        sent += [str(e["MessageId"])
                 for e in sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]]
    return sent


def _receive_one(sqs: Any, url: str) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600,
                                    WaitTimeSeconds=0).get("Messages", []))


def test_a_steady_receiver_of_one_makes_about_one_store_request_per_receive(
    sqs: Any, counter: DynamoCounter
) -> None:
    # GIVEN 30 visible messages
    url = _queue(sqs)
    sent = _send(sqs, url, MESSAGES)
    # WHEN they are received one per call
    start = counter.snapshot()
    received = [m for _ in range(MESSAGES) for m in _receive_one(sqs, url)]
    used = (counter.snapshot() - start).calls
    # THEN each came once, and all of them
    ids = [m["MessageId"] for m in received]
    assert len(ids) == len(set(ids)) == MESSAGES
    assert set(ids) == set(sent)
    # AND each receive was its claim, with a query for every page of ten (a few more if
    # a page outlived the head interval on a slow machine)
    assert used.get("UpdateItem") == MESSAGES, used
    assert 3 <= used.get("Query", 0) <= 6, used
    assert sum(used.values()) <= 1.2 * MESSAGES, used
    assert runtime.services_for().messages.stats.lost_claims == 0
    # AND the queue is then empty
    assert _receive_one(sqs, url) == []


def test_a_kept_candidate_claimed_elsewhere_is_a_lost_claim_and_the_rest_is_dropped(
    sqs: Any, aws: Clients, counter: DynamoCounter
) -> None:
    # GIVEN 11 messages, two received one after the other (the second read, a steady
    # receiver's, asks ahead: the other nine are kept by this process)
    url = _queue(sqs)
    _send(sqs, url, 11)
    (zeroth,) = _receive_one(sqs, url)
    (first,) = _receive_one(sqs, url)
    # AND another process claims the next of them in index order
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    (pk,) = {i["pk"]["S"] for i in items if i["sk"]["S"] == first["MessageId"]}
    stolen = min((int(i["visible_at"]["N"]), i["sk"]["S"]) for i in items
                 if i["pk"]["S"] == pk and "claim" not in i)[1]
    aws.dynamodb.update_item(
        TableName=MESSAGES_TABLE, Key={"pk": {"S": pk}, "sk": {"S": stolen}},
        UpdateExpression="SET visible_at = visible_at + :later, claim = :tok",
        ExpressionAttributeValues={":later": {"N": "60000"}, ":tok": {"S": "other"}},
    )
    # WHEN the next receive comes
    start = counter.snapshot()
    (second,) = _receive_one(sqs, url)
    used = (counter.snapshot() - start).calls
    # THEN its claim of the kept candidate is lost, it reads again and claims another
    assert second["MessageId"] not in (stolen, first["MessageId"], zeroth["MessageId"])
    assert used == {"UpdateItem": 2, "Query": 1}
    assert runtime.services_for().messages.stats.lost_claims == 1
    # AND the receive after it takes what that read kept, without a read
    start = counter.snapshot()
    (third,) = _receive_one(sqs, url)
    assert (counter.snapshot() - start).calls == {"UpdateItem": 1}
    assert third["MessageId"] not in (stolen, zeroth["MessageId"], first["MessageId"],
                                      second["MessageId"])
