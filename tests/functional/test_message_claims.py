"""GIVEN visible messages WHEN a receive claims several THEN one transaction claims them,
the messages come from the index query that found them (no second read), and lost races
only shorten the answer. On a table made by an earlier version, whose index projects only
`expires_ms` and `rc`, one consistent batch read returns them.

DynamoDB requests are counted as the benchmark counts them (`bench/counting.py`):
botocore `before-call` hooks on the message store's client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.dynamo_counter import DynamoCounter
from tests.legacy_tables import MESSAGES_TABLE, use_legacy_index

Hook = Callable[[dict[str, Any]], None]


def _queue(sqs: Any, name: str = "claims", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _send(sqs: Any, url: str, count: int) -> list[str]:
    entries = [{"Id": f"e{i}", "MessageBody": f"body-{i}"} for i in range(count)]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]
    return [str(e["MessageId"]) for e in sent]


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                    MessageSystemAttributeNames=["All"],
                                    **kwargs).get("Messages", []))


def _store_client() -> Any:
    return runtime.backend().stores.of("default")._db


@pytest.fixture
def counter(dmq: Client) -> Iterator[DynamoCounter]:
    """Counts the message store's DynamoDB requests, as the benchmark does."""
    counting = DynamoCounter()
    counting.attach(_store_client())
    yield counting
    counting.detach()


@pytest.fixture
def before(dmq: Client) -> Iterator[Callable[[str, Hook], None]]:
    """Run `hook(request)` once, before the store's next call of an operation."""
    registered: list[tuple[str, str]] = []

    def add(operation: str, hook: Hook) -> None:
        done: list[bool] = []

        def handler(params: dict[str, Any], **kwargs: Any) -> None:
            if not done:
                done.append(True)
                hook(json.loads(params.get("body") or b"{}"))

        event, uid = f"before-call.dynamodb.{operation}", f"dmq-test-claims-{operation}"
        _store_client().meta.events.register_first(event, handler, unique_id=uid)
        registered.append((event, uid))

    yield add
    for event, uid in registered:
        _store_client().meta.events.unregister(event, unique_id=uid)


@pytest.fixture
def legacy_index(aws: Clients) -> None:
    """The messages table as earlier versions made it (`tests/legacy_tables.py`)."""
    use_legacy_index(aws.dynamodb)


def _claim_behind(aws: Clients, key: dict[str, Any], token: str) -> None:
    """Another receiver's claim of one item, made with a client of its own."""
    aws.dynamodb.update_item(
        TableName=MESSAGES_TABLE, Key=key,
        UpdateExpression="SET visible_at = visible_at + :later, claim = :tok, rc = rc + :one",
        ExpressionAttributeValues={":later": {"N": "60000"}, ":tok": {"S": token},
                                   ":one": {"N": "1"}},
    )


@pytest.mark.parametrize(("index", "expected"), [
    ("current", {"Query": 1, "TransactWriteItems": 1}),
    ("earlier", {"Query": 1, "TransactWriteItems": 1, "BatchGetItem": 1}),
])
def test_a_receive_of_ten_is_one_query_and_one_claim_transaction(
    aws: Clients, sqs: Any, counter: DynamoCounter, index: str, expected: dict[str, int],
) -> None:
    # GIVEN 10 visible messages (in a table of an earlier version, whose index projects
    # only expires_ms and rc, the claims are read back with one batch read)
    if index == "earlier":
        use_legacy_index(aws.dynamodb)
    url = _queue(sqs)
    sent = _send(sqs, url, 10)
    # WHEN one receive asks for 10
    start = counter.snapshot()
    got = _receive(sqs, url)
    used = counter.snapshot() - start
    # THEN all 10 come back, whole, from one Query and one claim transaction
    assert sorted(m["MessageId"] for m in got) == sorted(sent)
    assert sorted(m["Body"] for m in got) == sorted(f"body-{i}" for i in range(10))
    assert used.calls == expected
    # AND their receipt handles delete them
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got)])
    assert len(deleted["Successful"]) == 10
    print(f"[claims] DynamoDB requests per received message ({index} index): "
          f"{used.total_calls / len(got):.2f}")


def test_a_lone_message_is_still_claimed_with_one_update(
    sqs: Any, counter: DynamoCounter
) -> None:
    # GIVEN one visible message
    url = _queue(sqs)
    _send(sqs, url, 1)
    # WHEN it is received THEN the claim is one UpdateItem returning the item
    start = counter.snapshot()
    assert len(_receive(sqs, url)) == 1
    assert (counter.snapshot() - start).calls == {"Query": 1, "UpdateItem": 1}


def test_a_lost_race_on_some_candidates_returns_the_others(
    sqs: Any, aws: Clients, before: Callable[[str, Hook], None], counter: DynamoCounter
) -> None:
    # GIVEN 10 visible messages, 3 of which another receiver claims just before the
    # claim transaction runs
    url = _queue(sqs)
    _send(sqs, url, 10)
    stolen: list[str] = []

    def race(request: dict[str, Any]) -> None:
        for op in request["TransactItems"][:3]:
            _claim_behind(aws, op["Update"]["Key"], "other")
            stolen.append(op["Update"]["Key"]["sk"]["S"])

    before("TransactWriteItems", race)
    # WHEN a receive asks for 10
    start = counter.snapshot()
    got = _receive(sqs, url)
    used = counter.snapshot() - start
    # THEN it returns the 7 it won (the cancelled transaction runs again without the 3)
    assert len(got) == 7
    assert not set(stolen) & {m["MessageId"] for m in got}
    assert used.calls == {"Query": 1, "TransactWriteItems": 2}
    assert runtime.services_for().messages.stats.lost_claims == 3
    # AND the 3 stay with the other receiver: their claim is untouched
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    claims = {i["sk"]["S"]: i["claim"]["S"] for i in items}
    assert all(claims[m] == "other" for m in stolen)


def test_a_message_claimed_again_before_the_read_back_is_not_returned(
    legacy_index: None, sqs: Any, aws: Clients, before: Callable[[str, Hook], None]
) -> None:
    # GIVEN 10 visible messages on a queue whose visibility timeout is 0, in a table of an
    # earlier version, and another receiver that claims one of them between the claim
    # transaction and its read-back
    url = _queue(sqs, VisibilityTimeout="0")
    _send(sqs, url, 10)
    taken: list[str] = []

    def reclaim(request: dict[str, Any]) -> None:
        key = request["RequestItems"][MESSAGES_TABLE]["Keys"][0]
        _claim_behind(aws, key, "thief")
        taken.append(key["sk"]["S"])

    before("BatchGetItem", reclaim)
    # WHEN a receive asks for 10
    got = _receive(sqs, url)
    # THEN the re-claimed message is not handed out under the other receiver's claim
    assert len(got) == 9
    assert taken[0] not in {m["MessageId"] for m in got}
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in got)


def test_a_batch_claim_counts_receives_and_keeps_the_first_receive_time(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN 10 messages received once at t0
    url = _queue(sqs, VisibilityTimeout="30")
    _send(sqs, url, 10)
    t0 = clock.now_ms()
    first = _receive(sqs, url)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in first] == ["1"] * 10
    assert {m["Attributes"]["ApproximateFirstReceiveTimestamp"] for m in first} == {str(t0)}
    # WHEN their visibility timeout passes and they are received again
    clock.advance(31)
    again = _receive(sqs, url)
    # THEN the count is 2 and the first receive time is still t0
    assert sorted(m["MessageId"] for m in again) == sorted(m["MessageId"] for m in first)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2"] * 10
    assert {m["Attributes"]["ApproximateFirstReceiveTimestamp"] for m in again} == {str(t0)}
    # AND an old receipt handle still deletes its message, as SQS's do on standard queues
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    clock.advance(31)
    left = _receive(sqs, url)
    assert len(left) == 9
    assert first[0]["MessageId"] not in {m["MessageId"] for m in left}



@pytest.mark.parametrize(("count", "operation", "code"), [
    (5, "TransactWriteItems", "ProvisionedThroughputExceededException"),
    (1, "UpdateItem", "ConditionalCheckFailedException"),
], ids=["claims-throttled", "claim-condition-lost"])
def test_messages_whose_claim_failed_unwritten_stay_receivable_where_changes_are_followed(
    dmq: Client, sqs: Any, before: Callable[[str, Hook], None], count: int, operation: str,
    code: str,
) -> None:
    # GIVEN a process that follows every change of its shards (as the local server's
    # stream pump makes it), and visible messages
    runtime.changes_followed = lambda region: True
    url = _queue(sqs)
    sent = _send(sqs, url, count)
    # AND a receive whose claim stalls, then fails without writing anything: throttled,
    # or its condition lost (as DMQ_CHAOS injects both)
    stalled, release = threading.Event(), threading.Event()

    def stall(request: dict[str, Any]) -> None:
        stalled.set()
        release.wait(10)
        raise ClientError({"Error": {"Code": code, "Message": "injected"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)

    before(operation, stall)
    claimer = sqs_client(dmq, "us-east-1", Config(retries={"total_max_attempts": 1}))
    answers: list[Any] = []

    def receive() -> None:
        try:
            answers.append(_receive(claimer, url, VisibilityTimeout=30))
        except ClientError as exc:
            answers.append(exc.response["Error"]["Code"])

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    assert stalled.wait(10)
    # WHEN another receive reads the shard meanwhile (every visible message is reserved
    # by the stalled one), and the stalled claim then fails
    assert _receive(sqs, url, VisibilityTimeout=30) == []
    release.set()
    thread.join(10)
    assert answers in (["RequestThrottled"], [[]]), answers
    # THEN the messages, still visible, come to the next receive: the shard was not
    # taken for empty (once the producers stop, no write would void such a hint)
    got = _receive(sqs, url, VisibilityTimeout=30)
    assert sorted(m["MessageId"] for m in got) == sorted(sent)
