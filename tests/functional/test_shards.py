"""GIVEN a queue with several shards WHEN it is used, resized and drained THEN nothing is lost."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.clock import SystemClock
from chalicelib.clusters.shards import DRAIN_GRACE_MS
from chalicelib.service.messages import HandleEntry, SendRequest
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.purges import remove_purged

ACCOUNT = "000000000000"


def _shards(sqs: Any, url: str) -> list[dict[str, Any]]:
    raw = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShards"])
    return list(json.loads(raw["Attributes"]["DmqShards"]))


def _shard_of(settings: Settings, handle: str, queue_id: str) -> int:
    del settings  # the key is the runtime's (made for the process: no data folder)
    return ReceiptCodec(runtime.receipt_key()).decode(handle, queue_id).shard


def _manage_shards(dmq: Client) -> None:
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[]
    )
    dmq.lambda_.invoke("manage_shards", event)


def _error(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return str(info.value.response["Error"]["Code"])


# -- the attribute -----------------------------------------------------------------------------


def test_shard_count_is_a_dmq_attribute_that_sdks_pass_through(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="wide", Attributes={"DmqShardCount": "4"})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])
    assert got["Attributes"] == {"DmqShardCount": "4"}
    assert [(s["id"], s["state"]) for s in _shards(sqs, url)] == [
        (0, "active"), (1, "active"), (2, "active"), (3, "active")]
    everything = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert not [name for name in everything if name.startswith("Dmq")]
    plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
    one = sqs.get_queue_attributes(QueueUrl=plain, AttributeNames=["DmqShardCount"])
    assert one["Attributes"]["DmqShardCount"] == "1"


@pytest.mark.parametrize("value", ["0", "65", "two", "1.5", ""])
def test_shard_count_outside_1_to_64_is_invalid(sqs: Any, value: str) -> None:
    code = _error(sqs.create_queue, QueueName="bad", Attributes={"DmqShardCount": value})
    assert code == "InvalidAttributeValue"
    url = sqs.create_queue(QueueName="good")["QueueUrl"]
    code = _error(sqs.set_queue_attributes, QueueUrl=url, Attributes={"DmqShardCount": value})
    assert code == "InvalidAttributeValue"


def test_shard_count_limits_are_accepted(sqs: Any) -> None:
    for count in ("1", "64"):
        url = sqs.create_queue(QueueName=f"q{count}",
                               Attributes={"DmqShardCount": count})["QueueUrl"]
        assert len(_shards(sqs, url)) == int(count)


def test_create_again_with_another_shard_count_is_a_name_clash(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q", Attributes={"DmqShardCount": "2"})["QueueUrl"]
    assert sqs.create_queue(QueueName="q", Attributes={"DmqShardCount": "2"})["QueueUrl"] == url
    assert sqs.create_queue(QueueName="q")["QueueUrl"] == url
    code = _error(sqs.create_queue, QueueName="q", Attributes={"DmqShardCount": "3"})
    assert code == "QueueAlreadyExists"


# -- concurrent producers and consumers --------------------------------------------------------


@pytest.fixture
def real_time(aws: Clients, settings: Settings) -> Iterator[None]:
    """DMQ on the system clock: message order in the index follows real send times."""
    runtime.configure(settings, SystemClock())
    yield
    runtime.configure(None)


@pytest.mark.usefixtures("real_time")
def test_four_shards_with_concurrent_producers_and_consumers_lose_nothing(
    settings: Settings,
) -> None:
    """Every acknowledged message is delivered; the shards share sends and receives evenly."""
    services = runtime.services_for()
    queue = services.queues.create(ACCOUNT, "us-east-1", "busy", {"DmqShardCount": "4"}, {})
    producers, consumers, per_producer = 4, 4, 150
    acked: set[str] = set()
    delivered: list[tuple[str, int]] = []
    lock = threading.Lock()
    done_producing = threading.Event()
    deadline = time.monotonic() + 120

    def produce(index: int) -> None:
        for start in range(0, per_producer, 10):
            batch = [SendRequest(str(i), f"p{index}-{start + i}") for i in range(10)]
            sent, failed = services.messages.send_batch(queue, batch)
            assert not failed
            with lock:
                acked.update(m.message_id for _, m in sent)

    def consume() -> None:
        while time.monotonic() < deadline:
            got = services.messages.receive(queue, 10, 60, 0)
            if got:
                services.messages.delete(queue, [HandleEntry(str(i), r.receipt_handle)
                                                  for i, r in enumerate(got)])
                with lock:
                    delivered.extend(
                        (r.message.message_id,
                         _shard_of(settings, r.receipt_handle, queue.queue_id))
                        for r in got)
            elif done_producing.is_set():
                with lock:
                    if len({m for m, _ in delivered}) >= len(acked):
                        return
                time.sleep(0.01)

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    makers = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for thread in threads + makers:
        thread.start()
    for thread in makers:
        thread.join(timeout=120)
    done_producing.set()
    for thread in threads:
        thread.join(timeout=150)
    ids = [m for m, _ in delivered]
    assert len(acked) == producers * per_producer
    assert set(ids) == acked, "an acknowledged message was lost"
    assert len(ids) == len(set(ids)), "a message was delivered twice"
    spread = Counter(shard for _, shard in delivered)
    first_half = Counter(shard for _, shard in delivered[: len(delivered) // 2])
    print(f"\nmessages per shard: {dict(sorted(spread.items()))}; "
          f"in the first half of deliveries: {dict(sorted(first_half.items()))}")
    total = len(delivered)
    assert set(spread) == {0, 1, 2, 3}
    assert all(0.15 * total <= n <= 0.35 * total for n in spread.values()), spread
    # No shard waits for the end: each delivers from the first quarter of the deliveries
    # on. (How much of the first half a shard serves depends on thread timing on a loaded
    # machine: a bound of 5% of it, where 25% is even, failed twice in six loaded runs,
    # one shard serving 10 and 11 of 300.)
    first_at = {shard: at for at, (_, shard) in reversed(list(enumerate(delivered)))}
    assert all(at < total // 4 for at in first_at.values()), (first_at, first_half)
    assert services.messages.counts(queue).visible == 0


# -- scaling in and out ------------------------------------------------------------------------


def test_scaling_in_from_four_to_two_with_messages_in_flight_loses_nothing(
    sqs: Any, dmq: Client, clock: FakeClock,
) -> None:
    url = sqs.create_queue(QueueName="shrink", Attributes={
        "DmqShardCount": "4", "VisibilityTimeout": "30"})["QueueUrl"]
    sent = set()
    for start in range(0, 200, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"before-{start + i}"} for i in range(10)])
        sent |= {e["MessageId"] for e in result["Successful"]}
    in_flight: list[dict[str, Any]] = []
    while len(in_flight) < 50:
        in_flight += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    # WHEN the queue is scaled in while 50 messages are in flight
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "2"})
    states = {s["id"]: s["state"] for s in _shards(sqs, url)}
    assert states == {0: "active", 1: "active", 2: "draining", 3: "draining"}
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])[
        "Attributes"]["DmqShardCount"] == "2"
    queue = runtime.services_for().queues.get(ACCOUNT, "shrink")
    before = runtime.services_for().messages.shard_counts(queue)
    for start in range(0, 100, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"after-{start + i}"} for i in range(10)])
        sent |= {e["MessageId"] for e in result["Successful"]}
    after = runtime.services_for().messages.shard_counts(queue)
    # THEN new messages go only to the active shards
    assert all(after[s].visible == before[s].visible for s in (2, 3))
    # AND in-flight messages of draining shards can still be deleted with their handles
    half = in_flight[:25]
    sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(half[:10])])
    for m in half[10:]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    deleted = {m["MessageId"] for m in half}
    # AND a draining shard is not forgotten while it holds messages, even past the grace
    clock.advance(DRAIN_GRACE_MS / 1000 + 1)
    _manage_shards(dmq)
    assert len(_shards(sqs, url)) == 4
    # WHEN the rest is received (the other 25 reappear after their visibility timeout)
    for _ in range(200):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            if deleted >= sent:
                break
            clock.advance(1)
            continue
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        deleted |= {m["MessageId"] for m in got}
    assert deleted == sent, f"{len(sent - deleted)} messages stranded"
    # THEN the drained shards are forgotten by the internal cluster manager
    _manage_shards(dmq)
    assert [(s["id"], s["state"]) for s in _shards(sqs, url)] == [(0, "active"), (1, "active")]


def test_drained_shards_are_kept_for_the_grace_period(
    sqs: Any, dmq: Client, clock: FakeClock,
) -> None:
    url = sqs.create_queue(QueueName="grace", Attributes={"DmqShardCount": "3"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "1"})
    clock.advance(DRAIN_GRACE_MS / 1000 - 1)
    _manage_shards(dmq)
    assert len(_shards(sqs, url)) == 3
    clock.advance(2)
    _manage_shards(dmq)
    assert [s["id"] for s in _shards(sqs, url)] == [0]


def test_scaling_out_again_takes_back_draining_shards_first(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="grow", Attributes={"DmqShardCount": "4"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "1"})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "6"})
    assert [(s["id"], s["state"]) for s in _shards(sqs, url)] == [
        (i, "active") for i in range(6)]


def test_purge_and_counts_cover_draining_shards(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="counted", Attributes={"DmqShardCount": "4"})["QueueUrl"]
    for _ in range(4):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": "x"} for i in range(10)])
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "1"})
    count = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]
    assert count == "40"
    sqs.purge_queue(QueueUrl=url)
    remove_purged()  # the background removal, from every shard, draining ones too
    count = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]
    assert count == "0"


# -- cost --------------------------------------------------------------------------------------


def test_an_empty_shard_costs_almost_nothing(sqs: Any) -> None:
    """Receives skip shards known to be empty: the second receive makes no DynamoDB call."""
    url = sqs.create_queue(QueueName="idle", Attributes={"DmqShardCount": "8"})["QueueUrl"]
    client: Any = runtime.backend().stores.of("default")
    calls: list[str] = []

    def count(model: Any, **kwargs: Any) -> None:
        calls.append(model.name)

    client._db.meta.events.register("before-call.dynamodb", count)
    try:
        assert sqs.receive_message(QueueUrl=url).get("Messages") is None
        first = len(calls)
        assert sqs.receive_message(QueueUrl=url).get("Messages") is None
        second = len(calls) - first
        sqs.send_message(QueueUrl=url, MessageBody="wake")
        calls.clear()
        got = sqs.receive_message(QueueUrl=url)["Messages"]
    finally:
        client._db.meta.events.unregister("before-call.dynamodb", count)
    assert first <= 8
    assert second == 0
    assert [m["Body"] for m in got] == ["wake"]
    assert calls.count("Query") <= 2
