"""GIVEN queues holding messages (visible, in flight, delayed)
WHEN PurgeQueue or DeleteQueue is called
THEN the request marks the queue and records a pending purge, with no request per message;
no message sent before the purge is received from then on, messages sent after it are;
and the background removal (the `remove_purged_messages` schedule) deletes the stored
messages in bounded, resumable steps. The counts drop at the purge, not as the removal
goes, and show what is left throughout."""

from __future__ import annotations

from typing import Any

import pytest

from app import runtime
from chalicelib.aws import Clients
from chalicelib.frontend import queue_metrics
from chalicelib.service import purges as purge_service
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.count_pumps import CountPumps
from tests.dynamo_counter import DynamoCounter
from tests.purges import remove_purged

COUNTS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed"]
# What a purge or a delete may ask of DynamoDB through boto3 (the queue record goes
# through PynamoDB): the queue's counts (its shards' count items, one BatchGetItem) and
# the pending purge, recorded in one transaction. Nothing per message.
PER_MESSAGE = {"BatchWriteItem", "DeleteItem", "Query", "Scan", "TransactWriteItems"}


def _fill(sqs: Any, url: str, visible: int, in_flight: int = 0, delayed: int = 0) -> None:
    """`visible + in_flight` messages, of which `in_flight` are received (5 min timeout),
    and `delayed` messages delayed by 2 minutes."""
    for start in range(0, visible + in_flight, 10):
        count = min(10, visible + in_flight - start)
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"old-{start + i}"} for i in range(count)])
    taken = 0
    while taken < in_flight:
        got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=300,
                                  MaxNumberOfMessages=min(10, in_flight - taken))
        taken += len(got.get("Messages", []))
    for start in range(0, delayed, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"late-{start + i}", "DelaySeconds": 120}
            for i in range(min(10, delayed - start))])


def _counts(sqs: Any, url: str) -> tuple[int, ...]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
    return tuple(int(found[n]) for n in COUNTS)


def _drain(sqs: Any, url: str, rounds: int = 30) -> list[str]:
    """Every body a receiver gets, each received once (a long visibility timeout)."""
    bodies: list[str] = []
    for _ in range(rounds):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
        batch = [m["Body"] for m in got.get("Messages", [])]
        if not batch:
            break
        bodies += batch
    return sorted(bodies)


def _stored(aws: Clients, settings: Settings, name: str) -> int:
    """Items of the queue's messages left in the messages table."""
    found = aws.dynamodb.scan(TableName=settings.messages_table, Select="COUNT",
                              FilterExpression="begins_with(pk, :q)",
                              ExpressionAttributeValues={":q": {"S": f"000000000000/{name}#"}})
    return int(found["Count"])


def _pending(aws: Clients, settings: Settings) -> list[dict[str, Any]]:
    found = aws.dynamodb.scan(TableName=settings.control_table,
                              FilterExpression="begins_with(#k, :p)",
                              ExpressionAttributeNames={"#k": "key"},
                              ExpressionAttributeValues={":p": {"S": "purge#"}})
    return list(found["Items"])


def _restart(settings: Settings, clock: FakeClock) -> None:
    """A new process: a new runtime, which knows nothing of the purges in progress."""
    runtime.configure(settings, clock)
    runtime.count_catch_up = CountPumps(settings)


def _counted(call: Any) -> dict[str, int]:
    """The boto3 DynamoDB requests `call()` makes (message stores and control table)."""
    counter = DynamoCounter()
    clients = {id(c): c for c in (runtime.backend().stores.of("default")._db,  # type: ignore[attr-defined]
                                  runtime.backend().clients.dynamodb)}
    for client in clients.values():
        counter.attach(client)
    try:
        before = counter.snapshot()
        call()
        return dict((counter.snapshot() - before).calls)
    finally:
        counter.detach()


@pytest.mark.parametrize("action", ["purge", "delete"])
def test_the_request_costs_the_same_whatever_the_backlog(sqs: Any, action: str) -> None:
    # GIVEN a queue of 20 messages and one of 400 (some in flight, some delayed)
    used = []
    for name, size in (("small", 20), ("large", 400)):
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        _fill(sqs, url, size, in_flight=5, delayed=5)
        assert sum(_counts(sqs, url)) == size + 10  # the stream's records are counted
        # WHEN it is purged (or deleted)
        if action == "purge":
            used.append(_counted(lambda url=url: sqs.purge_queue(QueueUrl=url)))
        else:
            used.append(_counted(lambda url=url: sqs.delete_queue(QueueUrl=url)))
    # THEN both make the same few requests, none of them over the messages
    small, large = used
    assert small == large, used
    assert sum(large.values()) <= 3, large
    assert not PER_MESSAGE & (set(large) - {"TransactWriteItems"}), large
    assert large.get("TransactWriteItems", 0) == 1, large  # the pending purge, recorded
    assert large.get("BatchGetItem", 0) == 1, large  # the counts it keeps


def test_no_message_sent_before_the_purge_is_received_after_it(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN 40 visible, 10 in-flight and 10 delayed messages, purged
    url = sqs.create_queue(QueueName="purged")["QueueUrl"]
    _fill(sqs, url, 40, in_flight=10, delayed=10)
    sqs.purge_queue(QueueUrl=url)
    # WHEN three messages are sent after the purge (its background removal not yet run)
    clock.advance(0.001)
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"new-{n}")
    # THEN exactly those are received, now and once the timeouts and delays have passed
    assert _drain(sqs, url) == ["new-0", "new-1", "new-2"]
    clock.advance(601)
    assert _drain(sqs, url) == ["new-0", "new-1", "new-2"]
    clock.advance(601)
    sqs.send_message(QueueUrl=url, MessageBody="newer")
    assert _drain(sqs, url) == ["new-0", "new-1", "new-2", "newer"]


def test_the_background_removal_empties_the_store_and_the_counts(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings) -> None:
    # GIVEN a purged queue of 120 visible, 10 in-flight and 10 delayed messages, and two
    # messages sent after the purge
    url = sqs.create_queue(QueueName="emptied")["QueueUrl"]
    _fill(sqs, url, 120, in_flight=10, delayed=10)
    assert _counts(sqs, url) == (120, 10, 10)
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)
    sqs.send_message(QueueUrl=url, MessageBody="kept-1")
    sqs.send_message(QueueUrl=url, MessageBody="kept-2", DelaySeconds=60)
    assert len(_pending(aws, settings)) == 1
    # WHEN the background removal runs
    remove_purged()
    # THEN only the later messages are stored and counted, and nothing is pending
    assert _stored(aws, settings, "emptied") == 2
    assert _counts(sqs, url) == (1, 0, 1)
    assert _pending(aws, settings) == []
    assert _drain(sqs, url) == ["kept-1"]


def test_the_counts_drop_at_the_purge_whatever_the_removal_has_done(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a queue of 120 visible, 10 in-flight and 10 delayed messages
    url = sqs.create_queue(QueueName="dropped")["QueueUrl"]
    _fill(sqs, url, 120, in_flight=10, delayed=10)
    # WHEN it is purged and two messages sent after, one of them delayed
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)
    sqs.send_message(QueueUrl=url, MessageBody="kept-1")
    sqs.send_message(QueueUrl=url, MessageBody="kept-2", DelaySeconds=60)
    # THEN the counts show only those two at once, before the removal took anything,
    assert _stored(aws, settings, "dropped") == 142
    assert _counts(sqs, url) == (1, 0, 1)
    # in a new process too (the purge is read from the control table),
    _restart(settings, clock)
    assert _counts(sqs, url) == (1, 0, 1)
    # part way through the removal (steps of 20, one run),
    monkeypatch.setattr(purge_service, "STEP_ITEMS", 20)
    purges = runtime.services_for("us-east-1").queues.purges
    assert purges is not None
    assert purges.advance(0) == 20
    assert _counts(sqs, url) == (1, 0, 1)
    # and once it is done, as `/metrics` reads every queue's counts as well
    remove_purged()
    assert _pending(aws, settings) == []
    assert _stored(aws, settings, "dropped") == 2
    assert _counts(sqs, url) == (1, 0, 1)
    services = runtime.services_for("us-east-1")
    (gauges,) = queue_metrics.read(services, "us-east-1", clock.now_ms(),
                                   stores=runtime.backend().stores)
    assert (gauges.visible, gauges.in_flight, gauges.delayed) == (1, 0, 1)


def _kept_and_purged(sqs: Any, clock: FakeClock, names: tuple[str, str],
                     sizes: tuple[int, int]) -> tuple[str, str]:
    """A queue kept and one purged (the removal not run), then sent one message."""
    kept, purged = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in names)
    _fill(sqs, kept, sizes[0])
    _fill(sqs, purged, sizes[1])
    sqs.purge_queue(QueueUrl=purged)
    clock.advance(0.001)
    sqs.send_message(QueueUrl=purged, MessageBody="after")
    return kept, purged


def test_the_bulk_counts_drop_at_the_purge_too(sqs: Any, clock: FakeClock) -> None:
    # GIVEN two queues of 30 messages, one of them purged, then sent one message
    kept, _ = _kept_and_purged(sqs, clock, ("kept", "purged"), (30, 30))
    assert _counts(sqs, kept) == (30, 0, 0)  # and the stream's records are counted
    # WHEN `/metrics` reads every queue's counts at once (the removal not run)
    services = runtime.services_for("us-east-1")
    gauges = {g.queue: g.visible for g in queue_metrics.read(
        services, "us-east-1", clock.now_ms(), stores=runtime.backend().stores)}
    # THEN the purged queue shows only its later message, the other all of its own
    assert gauges == {"kept": 30, "purged": 1}


def test_a_finished_purge_costs_a_count_no_request(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue never purged and one purged, whose removal finished, one message each
    never, once = _kept_and_purged(sqs, clock, ("never", "once"), (1, 5))
    remove_purged()
    # WHEN each is counted (after a first count: the process learns the purge finished)
    assert _counts(sqs, never) == _counts(sqs, once) == (1, 0, 0)
    used = [_counted(lambda url=url: _counts(sqs, url)) for url in (never, once)]
    # THEN both counts make the same requests: no read of the finished purge
    assert used[0] == used[1], used
    # AND while a purge is pending, its count reads the purge once more (one BatchGetItem)
    clock.advance(61)
    sqs.purge_queue(QueueUrl=once)
    pending = _counted(lambda: _counts(sqs, once))
    assert pending.get("BatchGetItem", 0) == used[0].get("BatchGetItem", 0) + 1, pending


def test_the_removal_resumes_where_it_stopped(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a purged queue of 150 messages on two shards, and steps of 20 messages
    url = sqs.create_queue(QueueName="resumed", Attributes={"DmqShardCount": "2"})["QueueUrl"]
    _fill(sqs, url, 150)
    sqs.purge_queue(QueueUrl=url)
    monkeypatch.setattr(purge_service, "STEP_ITEMS", 20)
    # WHEN a run is cut short after its first step (no time left), twice
    purges = runtime.services_for("us-east-1").queues.purges
    assert purges is not None
    first = purges.advance(0)
    second = purges.advance(0)
    # THEN each removed one step's worth and the progress is kept in the control table
    assert 0 < first <= 20 and 0 < second <= 20
    (item,) = _pending(aws, settings)
    assert int(item["removed"]["N"]) == first + second
    assert _stored(aws, settings, "resumed") == 150 - first - second
    # WHEN the process restarts (a new runtime) and the removal runs to its end
    _restart(settings, clock)
    remove_purged()
    # THEN every message is gone, counted out, and the purge is finished
    assert _stored(aws, settings, "resumed") == 0
    assert _pending(aws, settings) == []
    assert _counts(sqs, url) == (0, 0, 0)


def test_a_step_run_again_removes_nothing_more(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings) -> None:
    # GIVEN a purge whose removal ran, then its progress reset (as if lost in a crash)
    url = sqs.create_queue(QueueName="again")["QueueUrl"]
    _fill(sqs, url, 30)
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    (item,) = _pending(aws, settings)
    remove_purged()
    aws.dynamodb.put_item(TableName=settings.control_table, Item=item)
    aws.dynamodb.update_item(TableName=settings.control_table,
                             Key={"key": {"S": "purges#pending"}},
                             UpdateExpression="ADD ids :i",
                             ExpressionAttributeValues={":i": {"SS": [
                                 str(item["key"]["S"]).removeprefix("purge#")]}})
    # WHEN it runs again from the start
    _restart(settings, clock)
    remove_purged()
    # THEN the message sent after the purge is still there, and the purge is finished
    assert _stored(aws, settings, "again") == 1
    assert _counts(sqs, url) == (1, 0, 0)
    assert _pending(aws, settings) == []


def test_a_queue_made_again_never_sees_the_deleted_ones_messages(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings) -> None:
    # GIVEN a deleted queue of 50 messages, its removal not run yet
    url = sqs.create_queue(QueueName="phoenix")["QueueUrl"]
    _fill(sqs, url, 45, in_flight=5)
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDeletedRecently):
        sqs.create_queue(QueueName="phoenix")
    # WHEN it is made again 61 s later and a message sent
    clock.advance(61)
    again = sqs.create_queue(QueueName="phoenix")["QueueUrl"]
    sqs.send_message(QueueUrl=again, MessageBody="reborn")
    # THEN only that message is counted and received, before and after the removal
    assert _counts(sqs, again) == (1, 0, 0)
    assert _drain(sqs, again) == ["reborn"]
    remove_purged()
    assert _stored(aws, settings, "phoenix") == 1
    clock.advance(601)
    assert _drain(sqs, again) == ["reborn"]
    assert _pending(aws, settings) == []


def test_a_deleted_queue_loses_every_message(
        sqs: Any, aws: Clients, settings: Settings) -> None:
    url = sqs.create_queue(QueueName="gone")["QueueUrl"]
    _fill(sqs, url, 60, in_flight=5, delayed=5)
    sqs.delete_queue(QueueUrl=url)
    remove_purged()
    assert _stored(aws, settings, "gone") == 0
    assert _pending(aws, settings) == []


def test_a_fifo_purge_keeps_later_messages_in_order(
        sqs: Any, clock: FakeClock, aws: Clients, settings: Settings) -> None:
    # GIVEN a FIFO queue with 30 messages in three groups, one of them received, purged
    url = sqs.create_queue(QueueName="ordered.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    for n in range(30):
        sqs.send_message(QueueUrl=url, MessageBody=f"old-{n}", MessageGroupId=f"g{n % 3}")
    sqs.purge_queue(QueueUrl=url)
    # WHEN messages are sent after the purge to the same groups
    clock.advance(0.001)
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"new-{n}", MessageGroupId="g0")
    # THEN only they are received, in order (before the background removal runs)
    got = []
    for _ in range(10):
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for message in batch:
            got.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if not batch and len(got) >= 3:
            break
    assert got == ["new-0", "new-1", "new-2"]
    # AND the removal leaves nothing stored of the messages, and nothing counted
    remove_purged()
    stored = aws.dynamodb.scan(
        TableName=settings.messages_table, Select="COUNT",
        FilterExpression="begins_with(pk, :q) AND begins_with(sk, :m)",
        ExpressionAttributeValues={":q": {"S": "000000000000/ordered.fifo#"},
                                   ":m": {"S": "f#"}})
    assert stored["Count"] == 0
    assert _counts(sqs, url) == (0, 0, 0)
