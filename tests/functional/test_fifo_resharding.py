"""GIVEN FIFO queues whose shards split and merge ranges of the group hash WHEN messages
are sent before, at and after the switch THEN every group's messages come in the order
they were sent, with increasing sequence numbers, the new shards deliver only once the
old ones are drained, deduplication holds across the change, and drained shards are
forgotten."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from app import runtime
from chalicelib.clusters.shards import DRAIN_GRACE_MS, SWITCH_MS
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo import gate as fifo_gate
from tests.clocks import FakeClock

ACCOUNT = "000000000000"
REGION = "us-east-1"
GROUPS = [f"g{i}" for i in range(8)]


def _fifo(sqs: Any, name: str, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true", **attributes})["QueueUrl"])


def _record(name: str) -> QueueRecord:
    return runtime.services_for(REGION).queues.get(ACCOUNT, name)


def _send_round(sqs: Any, url: str, label: str) -> None:
    for group in GROUPS:
        sqs.send_message(QueueUrl=url, MessageBody=f"{group}/{label}", MessageGroupId=group)


def _drain(sqs: Any, url: str, clock: FakeClock, expected: int) -> list[dict[str, Any]]:
    """Receive and delete until `expected` messages came (bounded), in arrival order."""
    got: list[dict[str, Any]] = []
    for _ in range(4 * expected + 10):
        if len(got) >= expected:
            break
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                     AttributeNames=["All"])
        messages = answer.get("Messages", [])
        if not messages:
            clock.advance(fifo_gate.RECHECK_MS / 1000)
            continue
        got += messages
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    return got


def _check_order(got: list[dict[str, Any]], labels: list[str]) -> None:
    by_group: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for message in got:
        group, label = message["Body"].split("/")
        by_group[group].append((label, int(message["Attributes"]["SequenceNumber"])))
    assert sorted(by_group) == sorted(GROUPS)
    for group, seen in by_group.items():
        assert [label for label, _ in seen] == labels, group
        numbers = [number for _, number in seen]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), group


def test_a_split_keeps_every_groups_order_and_numbers(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, "split.fifo")
    _send_round(sqs, url, "a")
    _send_round(sqs, url, "b")
    # WHEN the queue splits in two
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "2"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])[
        "Attributes"]["DmqShardCount"] == "2"
    shards = _record("split.fifo").shards
    assert [(s.id, s.draining, s.parents) for s in shards] == [
        (0, True, ()), (1, False, (0,)), (2, False, (0,))]
    # THEN until the switch, sends still go to the old shard
    _send_round(sqs, url, "c")
    counts = runtime.services_for(REGION).messages.shard_counts(_record("split.fifo"))
    assert counts[0].visible == 24 and counts[1].visible == counts[2].visible == 0
    clock.advance(SWITCH_MS / 1000)
    _send_round(sqs, url, "d")
    _send_round(sqs, url, "e")
    counts = runtime.services_for(REGION).messages.shard_counts(_record("split.fifo"))
    assert counts[0].visible == 24 and counts[1].visible + counts[2].visible == 16
    assert counts[1].visible > 0 and counts[2].visible > 0
    # AND every group comes in the order it was sent, its numbers increasing
    _check_order(_drain(sqs, url, clock, 40), ["a", "b", "c", "d", "e"])


def test_new_shards_wait_for_the_old_one_to_drain(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, "wait.fifo")
    sqs.send_message(QueueUrl=url, MessageBody="old/1", MessageGroupId="old")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "2"})
    clock.advance(SWITCH_MS / 1000)
    sqs.send_message(QueueUrl=url, MessageBody="new/1", MessageGroupId="new")
    # WHEN a receiver asks for everything while the old shard holds a message in flight
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert [m["Body"] for m in first["Messages"]] == ["old/1"]
    clock.advance(1)
    # THEN the new group's message (in a new shard) waits, though its group is free
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []
    # AND once the old shard is empty, it comes
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["Messages"][0]["ReceiptHandle"])
    clock.advance(fifo_gate.RECHECK_MS / 1000)
    later = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert [m["Body"] for m in later["Messages"]] == ["new/1"]


def test_a_merge_keeps_every_groups_order(sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, "merge.fifo", DmqShardCount="4")
    _send_round(sqs, url, "a")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "1"})
    assert _record("merge.fifo").shard_count == 1
    clock.advance(SWITCH_MS / 1000)
    _send_round(sqs, url, "b")
    _check_order(_drain(sqs, url, clock, 16), ["a", "b"])


@pytest.mark.parametrize("scope", ["queue", "messageGroup"])
def test_deduplication_holds_across_a_split(sqs: Any, clock: FakeClock, scope: str) -> None:
    high = {"FifoThroughputLimit": "perMessageGroupId"} if scope == "messageGroup" else {}
    url = _fifo(sqs, f"dedup-{scope}.fifo", ContentBasedDeduplication="false",
                DeduplicationScope=scope, **high)
    before = _record(f"dedup-{scope}.fifo").shard_count
    ids = [sqs.send_message(QueueUrl=url, MessageBody=f"{g}/once", MessageGroupId=g,
                            MessageDeduplicationId=f"d-{g}")["MessageId"] for g in GROUPS]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": str(2 * before)})
    clock.advance(SWITCH_MS / 1000)
    # WHEN the same messages are sent again into the new shards, within 5 minutes
    again = [sqs.send_message(QueueUrl=url, MessageBody=f"{g}/twice", MessageGroupId=g,
                              MessageDeduplicationId=f"d-{g}")["MessageId"] for g in GROUPS]
    # THEN each is the original, and only the originals are stored
    assert again == ids
    got = _drain(sqs, url, clock, len(GROUPS))
    assert sorted(m["Body"] for m in got) == sorted(f"{g}/once" for g in GROUPS)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_drained_shards_are_forgotten_and_their_children_deliver(
    sqs: Any, clock: FakeClock,
) -> None:
    url = _fifo(sqs, "forget.fifo")
    _send_round(sqs, url, "a")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "2"})
    clock.advance(SWITCH_MS / 1000)
    _check_order(_drain(sqs, url, clock, 8), ["a"])
    queues = runtime.services_for(REGION).queues
    clock.advance(DRAIN_GRACE_MS / 1000)
    kept = queues.forget_drained(_record("forget.fifo"))
    assert [(s.id, s.draining) for s in kept.shards] == [(1, False), (2, False)]
    _send_round(sqs, url, "b")
    _check_order(_drain(sqs, url, clock, 8), ["b"])
    # AND a later split reuses the freed id, its numbers still above the group's last
    _send_round(sqs, url, "c")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "4"})
    assert sorted(s.id for s in _record("forget.fifo").active_shards) == [0, 3, 4, 5]
    clock.advance(SWITCH_MS / 1000)
    _send_round(sqs, url, "d")
    _check_order(_drain(sqs, url, clock, 16), ["c", "d"])


def test_resizes_faster_than_the_old_shards_drain_are_refused_clearly(
    sqs: Any, clock: FakeClock,
) -> None:
    url = _fifo(sqs, "churn.fifo")
    _send_round(sqs, url, "a")  # the old shards keep messages: nothing is forgotten
    # WHEN an owner flips the count back and forth within the drain's grace
    refused = None
    for flip in range(20):
        try:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={
                "DmqShardCount": "64" if flip % 2 == 0 else "1"})
        except sqs.exceptions.ClientError as error:
            refused = error.response["Error"]
            break
        clock.advance(1)
    # THEN it is told to wait, with an SQS error, not a server error
    assert refused is not None and refused["Code"] == "InvalidAttributeValue"
    assert "still draining" in refused["Message"]
    assert len(_record("churn.fifo").shards) <= 256
    _check_order(_drain(sqs, url, clock, 8), ["a"])
