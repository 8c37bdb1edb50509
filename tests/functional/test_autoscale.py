"""GIVEN standard queues whose load the stream keeps per shard WHEN the autoscaler checks
them THEN a sustained excess splits a queue (at most x2 a step), a quiet queue merges back
after the cool-down, an admin's count pins a queue, and a FIFO queue scales with its
groups in order."""

from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.clusters.autoscale_rules import ScalePolicy, ScaleState
from chalicelib.clusters.autoscale_states import AutoscaleStates
from chalicelib.clusters.autoscaler import Autoscaler, ScaleEvent
from tests.clocks import FakeClock

ACCOUNT = "000000000000"
REGION = "us-east-1"
POLICY = ScalePolicy(target_rate=2.0, interval_s=10, cooldown_s=30, checks=2)


@pytest.fixture
def scaler(dmq: Client, aws: Clients, clock: FakeClock) -> tuple[Autoscaler, list[ScaleEvent]]:
    events: list[ScaleEvent] = []
    services = runtime.services_for(REGION)
    return Autoscaler(services.queues, runtime.backend(REGION).stores,
                      AutoscaleStates(aws.dynamodb, "dmq-control"), POLICY, clock,
                      events.append), events


def _send(sqs: Any, url: str, count: int) -> None:
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{start + i}"}
                   for i in range(min(10, count - start))]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def _interval(sqs: Any, url: str, clock: FakeClock, messages: int) -> None:
    """One check interval with `messages` sent in it, counted from the stream."""
    _send(sqs, url, messages)
    runtime.count_catch_up(REGION)  # type: ignore[misc]
    clock.advance(POLICY.interval_s)


def _shards(name: str) -> int:
    return runtime.services_for(REGION).queues.get(ACCOUNT, name).shard_count


def test_a_sustained_excess_splits_and_quiet_merges_back(
    sqs: Any, scaler: tuple[Autoscaler, list[ScaleEvent]], clock: FakeClock,
) -> None:
    autoscaler, events = scaler
    url = sqs.create_queue(QueueName="busy")["QueueUrl"]
    quiet = sqs.create_queue(QueueName="quiet")["QueueUrl"]
    # GIVEN 60 messages in each of two intervals: 6/s, three times the target of 2/s
    _interval(sqs, url, clock, 60)
    assert autoscaler.check(REGION) == []  # one check over the target: not yet
    _send(sqs, quiet, 1)
    _interval(sqs, url, clock, 60)
    # WHEN the second check in a row sees it THEN the queue doubles (no more in one step)
    assert [(e.queue.name, e.kind, e.before, e.after) for e in autoscaler.check(REGION)] \
        == [("busy", "split", 1, 2)]
    assert events[0].rate == pytest.approx(6.0)
    assert _shards("busy") == 2 and _shards("quiet") == 1
    # AND sends now spread over both shards
    _interval(sqs, url, clock, 60)
    counts = runtime.services_for(REGION).messages.shard_counts(
        runtime.services_for(REGION).queues.get(ACCOUNT, "busy"))
    assert all(c.visible > 0 for c in counts.values()) and len(counts) == 2
    # WHEN the load stops THEN after the cool-down (30 s) it merges back to one shard
    changes = []
    for _ in range(5):
        clock.advance(POLICY.interval_s)
        changes += autoscaler.check(REGION)
    assert [(e.kind, e.before, e.after) for e in changes] == [("merge", 2, 1)]
    assert _shards("busy") == 1


def test_an_admin_count_pins_a_queue_until_unpinned(
    sqs: Any, scaler: tuple[Autoscaler, list[ScaleEvent]], clock: FakeClock, dmq: Client,
) -> None:
    autoscaler, _ = scaler
    url = sqs.create_queue(QueueName="pinned")["QueueUrl"]
    queue = runtime.services_for(REGION).queues.get(ACCOUNT, "pinned")
    autoscaler.pin(queue, True)
    for _ in range(4):
        _interval(sqs, url, clock, 60)
        assert autoscaler.check(REGION) == []
    assert autoscaler.pinned(queue)
    autoscaler.pin(queue, False)
    assert not autoscaler.pinned(queue)
    _interval(sqs, url, clock, 60)
    autoscaler.check(REGION)
    _interval(sqs, url, clock, 60)
    assert [e.kind for e in autoscaler.check(REGION)] == ["split"]


def test_a_fifo_queue_splits_and_merges_with_every_group_in_order(
    sqs: Any, scaler: tuple[Autoscaler, list[ScaleEvent]], clock: FakeClock,
) -> None:
    autoscaler, _ = scaler
    url = sqs.create_queue(QueueName="ordered.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    sent = 0

    def interval(messages: int) -> None:
        nonlocal sent
        for _ in range(messages // 10):
            entries = [{"Id": str(i), "MessageBody": f"g{(sent + i) % 20}/{sent + i}",
                        "MessageGroupId": f"g{(sent + i) % 20}"} for i in range(10)]
            assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
            sent += 10
        runtime.count_catch_up(REGION)  # type: ignore[misc]
        clock.advance(POLICY.interval_s)

    # GIVEN 6 messages a second over 20 groups, three times the target, for two checks
    interval(60)
    assert autoscaler.check(REGION) == []
    interval(60)
    # THEN the FIFO queue splits its hash range in two
    assert [(e.kind, e.before, e.after) for e in autoscaler.check(REGION)] == [("split", 1, 2)]
    interval(60)
    # WHEN the load stops THEN after the cool-down it merges back to one shard
    changes = []
    for _ in range(5):
        clock.advance(POLICY.interval_s)
        changes += autoscaler.check(REGION)
    assert [(e.kind, e.before, e.after) for e in changes] == [("merge", 2, 1)]
    assert _shards("ordered.fifo") == 1
    # AND every message comes once, each group in the order it was sent
    seen: dict[str, list[int]] = {}
    for _ in range(100):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            if sum(map(len, seen.values())) >= sent:
                break
            clock.advance(1)
            continue
        for message in got:
            group, number = message["Body"].split("/")
            seen.setdefault(group, []).append(int(number))
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    assert sum(map(len, seen.values())) == sent == 180
    assert all(numbers == sorted(numbers) for numbers in seen.values())


def test_a_check_passes_idle_one_shard_queues_by(
    sqs: Any, scaler: tuple[Autoscaler, list[ScaleEvent]], clock: FakeClock, aws: Clients,
) -> None:
    autoscaler, _ = scaler
    for i in range(3):
        sqs.create_queue(QueueName=f"idle-{i}")
    calls: list[str] = []

    def seen(model: Any, **_: Any) -> None:
        calls.append(model.name)

    client = runtime.backend(REGION).stores.of("default").client  # type: ignore[attr-defined]
    clients = {id(client): client, id(aws.dynamodb): aws.dynamodb}
    for c in clients.values():
        c.meta.events.register("before-call.dynamodb", seen)
    try:
        autoscaler.check(REGION)  # three idle queues
        first = list(calls)
        calls.clear()
        clock.advance(POLICY.interval_s)
        autoscaler.check(REGION)  # still quiet: nothing to write
    finally:
        for c in clients.values():
            c.meta.events.unregister("before-call.dynamodb", seen)
    # one-shard queues with no traffic have nothing to split or merge: the check reads
    # the active shards (one BatchGetItem) and passes them by
    assert first.count("BatchGetItem") == 1 and "UpdateItem" not in first
    assert "UpdateItem" not in calls and calls.count("BatchGetItem") == 1


def test_a_shard_count_the_caller_sets_pins_the_queue(sqs: Any, dmq: Client) -> None:
    services = runtime.services_for(REGION)
    assert services.autoscaler is not None
    sqs.create_queue(QueueName="plain")
    sqs.create_queue(QueueName="wide", Attributes={"DmqShardCount": "4"})
    url = sqs.create_queue(QueueName="later")["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "2"})
    sqs.create_queue(QueueName="fifo.fifo", Attributes={"FifoQueue": "true"})
    sqs.create_queue(QueueName="fifo-wide.fifo", Attributes={"FifoQueue": "true",
                                                            "DmqShardCount": "2"})
    modes = {name: services.autoscaler.mode(services.queues.get(ACCOUNT, name))
             for name in ("plain", "wide", "later", "fifo.fifo", "fifo-wide.fifo")}
    assert modes == {"plain": "auto", "wide": "pinned", "later": "pinned", "fifo.fifo": "auto",
                     "fifo-wide.fifo": "pinned"}


def test_the_state_keeps_when_an_excess_and_a_quiet_time_began(aws: Clients) -> None:
    states = AutoscaleStates(aws.dynamodb, "dmq-control")
    busy = ScaleState(above=1, above_since_ms=1_000, changed_ms=500)
    states.put("acct/q", busy)
    assert states.get("acct/q") == busy
    quiet = ScaleState(below_since_ms=2_000, changed_ms=500)
    states.put("acct/q", quiet)  # the excess's start is removed, the quiet time's kept
    assert states.get("acct/q") == quiet
