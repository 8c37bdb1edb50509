"""GIVEN traffic on queues WHEN it is served THEN each queue's counts (sent, received,
deleted, empty receives, errors, throttles, dead-letter moves) match it, in memory for
`GET /metrics` and, as on AWS, in one EMF document per queue with Account and Queue
dimensions; the Prometheus gauges are the queue's counts and oldest-message age, and a
scrape costs the store the same whatever the backlog."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib import observability
from dmqlocal.metrics import MetricsEndpoint
from tests.clocks import FakeClock
from tests.dynamo_counter import DynamoCounter
from tests.functional.test_observability import assert_valid_emf, json_lines

ACCOUNT = "000000000000"


@pytest.fixture
def counts() -> Iterator[dict[tuple[str, str, str], float]]:
    """The counts before the test; a test reads what it added (the totals are the
    process's, shared by every test)."""
    yield observability.queue_totals()


def added(before: dict[tuple[str, str, str], float], queue: str) -> dict[str, float]:
    """What each metric of `queue` gained since `before`."""
    now = observability.queue_totals()
    return {metric: value - before.get((metric, account, name), 0)
            for (metric, account, name), value in now.items()
            if (account, name) == (ACCOUNT, queue) and value != before.get(
                (metric, account, name), 0)}


def test_sends_receives_deletes_and_empty_receives_are_counted_per_queue(
    sqs: Any, counts: dict[tuple[str, str, str], float],
) -> None:
    # GIVEN a queue, and another one that stays empty
    url = sqs.create_queue(QueueName="counted")["QueueUrl"]
    empty = sqs.create_queue(QueueName="counted-empty")["QueueUrl"]
    # WHEN one message is sent alone and two in a batch, two received, both deleted in a
    # batch, and the empty queue is read twice
    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "two"},
                                                  {"Id": "b", "MessageBody": "three"}])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert len(got) == 2
    sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    sqs.receive_message(QueueUrl=empty)
    sqs.receive_message(QueueUrl=empty)
    # THEN each queue counts its own traffic, and nothing else
    assert added(counts, "counted") == {"NumberOfMessagesSent": 3,
                                        "NumberOfMessagesReceived": 2,
                                        "NumberOfMessagesDeleted": 2}
    assert added(counts, "counted-empty") == {"NumberOfEmptyReceives": 2}


def test_failed_requests_and_failed_batch_entries_are_errors_of_their_queue(
    sqs: Any, counts: dict[tuple[str, str, str], float],
) -> None:
    # GIVEN a queue
    url = sqs.create_queue(QueueName="erring")["QueueUrl"]
    # WHEN a batch has one good entry and one invalid body, and a receive asks for 11
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "good", "MessageBody": "fine"},
                                                  {"Id": "bad", "MessageBody": "bad\x00"}])
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    # THEN the failed entry and the failed request are its errors, the good entry a send
    assert added(counts, "erring") == {"NumberOfMessagesSent": 1, "Errors": 2}


def test_the_query_protocol_is_counted_as_the_json_protocol_is(
    sqs: Any, dmq: Client, counts: dict[tuple[str, str, str], float],
) -> None:
    sqs.create_queue(QueueName="counted-query")
    reply = dmq.http.post(f"/{ACCOUNT}/counted-query", body="Action=SendMessage&MessageBody=x",
                          headers={"Content-Type": "application/x-www-form-urlencoded",
                                   "Host": "dmq.test"})
    assert reply.status_code == 200
    assert added(counts, "counted-query") == {"NumberOfMessagesSent": 1}


def _redriven(sqs: Any, fifo: bool) -> tuple[str, str]:
    suffix = ".fifo" if fifo else ""
    extra = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    dlq = sqs.create_queue(QueueName=f"metric-dead{suffix}", Attributes=extra)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    policy = json.dumps({"deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                         "maxReceiveCount": 1})
    source = sqs.create_queue(QueueName=f"metric-work{suffix}", Attributes={
        **extra, "RedrivePolicy": policy, "VisibilityTimeout": "5"})["QueueUrl"]
    return str(source), str(dlq)


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_move_to_the_dead_letter_queue_is_counted_on_the_source_queue(
    sqs: Any, clock: FakeClock, counts: dict[tuple[str, str, str], float], fifo: bool,
) -> None:
    # GIVEN maxReceiveCount=1 and a message received once, its visibility timeout over
    source, dlq = _redriven(sqs, fifo)
    group = {"MessageGroupId": "g"} if fifo else {}
    sqs.send_message(QueueUrl=source, MessageBody="poison", **group)
    assert len(sqs.receive_message(QueueUrl=source)["Messages"]) == 1
    clock.advance(6)
    # WHEN the next receive moves it to the dead-letter queue
    assert sqs.receive_message(QueueUrl=source).get("Messages", []) == []
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=dlq)["Messages"]] == ["poison"]
    # THEN the source queue counts one move
    name = "metric-work.fifo" if fifo else "metric-work"
    assert added(counts, name)["DeadLetterMoves"] == 1


def test_record_throttle_counts_a_throttle_of_the_queue(
    counts: dict[tuple[str, str, str], float],
) -> None:
    observability.record_throttle(ACCOUNT, "throttled")
    observability.record_throttle(ACCOUNT, "throttled")
    assert added(counts, "throttled") == {"Throttles": 2}


def test_series_beyond_the_cap_are_folded_into_one(
    monkeypatch: pytest.MonkeyPatch, counts: dict[tuple[str, str, str], float],
) -> None:
    # GIVEN room for one more series only
    monkeypatch.setattr(observability, "MAX_SERIES", len(counts) + 1)
    # WHEN three new queues are counted
    for name in ("cap-1", "cap-2", "cap-3"):
        observability.count_queue("Errors", ACCOUNT, name)
    # THEN the first has its own series and the others are added to (other)
    totals = observability.queue_totals()
    assert totals[("Errors", ACCOUNT, "cap-1")] == 1
    assert ("Errors", ACCOUNT, "cap-2") not in totals
    other = ("Errors", observability.OTHER_QUEUE, observability.OTHER_QUEUE)
    assert totals[other] - counts.get(other, 0) == 2


@pytest.fixture
def deployed() -> Iterator[None]:
    """EMF on, as on Lambda; off again afterwards."""
    observability.configure(json_logs=False, emit_metrics=True)
    yield
    observability.configure(json_logs=False, emit_metrics=False)


@pytest.mark.usefixtures("deployed")
def test_each_queue_gets_one_emf_document_with_account_and_queue_dimensions(
    sqs: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a queue made earlier
    url = sqs.create_queue(QueueName="emf-queue")["QueueUrl"]
    capsys.readouterr()
    # WHEN a batch of two is sent
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"},
                                                  {"Id": "b", "MessageBody": "y"}])
    # THEN the invocation prints a valid EMF document for the queue, with its count
    documents = [d for d in json_lines(capsys.readouterr().out) if "Queue" in d]
    assert len(documents) == 1, documents
    (document,) = documents
    assert_valid_emf(document)
    assert (document["Account"], document["Queue"]) == (ACCOUNT, "emf-queue")
    assert document["NumberOfMessagesSent"] in (2.0, [2.0])
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert sorted(directive["Dimensions"][0]) == ["Account", "Queue", "service"]


def _counted() -> None:
    """Let the counts take in the stream: a scrape reads them as they are (on the local
    server they trail the writes by at most about a second)."""
    assert runtime.count_catch_up is not None
    runtime.count_catch_up("us-east-1")


def _scrape(endpoint: MetricsEndpoint) -> dict[str, float]:
    status, headers, body = endpoint.respond()
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            values[series] = float(value)
    return values


def test_gauges_are_the_queue_counts_and_the_oldest_message_age(
    sqs: Any, clock: FakeClock,
) -> None:
    # GIVEN a queue with a message sent 90 s ago, one received (in flight), one delayed
    url = sqs.create_queue(QueueName="gauged", Attributes={"DmqShardCount": "3"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    clock.advance(90)
    sqs.send_message(QueueUrl=url, MessageBody="newer")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    assert len(sqs.receive_message(QueueUrl=url)["Messages"]) == 1
    # WHEN the metrics are scraped
    _counted()
    values = _scrape(MetricsEndpoint(runtime, cache_s=0, now_ms=clock.now_ms))
    # THEN the gauges say so
    labels = f'{{account="{ACCOUNT}",queue="gauged",region="us-east-1"}}'
    assert values[f"dmq_messages_visible{labels}"] == 1
    assert values[f"dmq_messages_in_flight{labels}"] == 1
    assert values[f"dmq_messages_delayed{labels}"] == 1
    assert values[f"dmq_oldest_message_age_seconds{labels}"] == 90
    assert values[f"dmq_queue_shards{labels}"] == 3
    counter = f'dmq_messages_sent_total{{account="{ACCOUNT}",queue="gauged"}}'
    assert values[counter] >= 3


def test_a_scrape_costs_the_store_the_same_whatever_the_backlog(sqs: Any) -> None:
    # GIVEN a queue with 120 messages, then with 300 (the oldest message's age is read
    # from a bounded sample of each shard, PEEK_SAMPLE items: message ids do not sort in
    # send order; both backlogs exceed it)
    url = sqs.create_queue(QueueName="backlog")["QueueUrl"]
    endpoint = MetricsEndpoint(runtime, cache_s=0)
    counter = DynamoCounter()
    counter.attach(runtime.backend().stores.of("default")._db)

    def scrape_cost() -> tuple[int, int]:
        before = counter.snapshot()
        _scrape(endpoint)
        used = counter.snapshot() - before
        return used.total_calls, used.items_returned

    def send(count: int) -> None:
        for start in range(0, count, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": "x"} for i in range(start, start + 10)])

    try:
        _scrape(endpoint)  # what a process reads once (the older count slots of a shard)
        send(120)
        small = scrape_cost()
        send(180)
        large = scrape_cost()
    finally:
        counter.detach()
    # THEN the scrape made the same calls and read the same items
    assert small == large
    assert small[0] > 0


def test_scrapes_within_the_cache_time_read_the_store_once(dmq: Client) -> None:
    endpoint = MetricsEndpoint(runtime, cache_s=60)
    _scrape(endpoint)
    _scrape(endpoint)
    assert endpoint.reads == 1


def _invoke_gauges(dmq: Client) -> None:
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[])
    dmq.lambda_.invoke("emit_queue_gauges", event)


@pytest.mark.usefixtures("deployed")
def test_the_scheduled_handler_prints_each_queues_gauges_as_emf(
    sqs: Any, dmq: Client, clock: FakeClock, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a work queue with two messages, the first sent 30 s ago, and its dead-letter
    # queue holding one moved message
    work, _ = _redriven(sqs, fifo=False)
    sqs.send_message(QueueUrl=work, MessageBody="poison")
    sqs.receive_message(QueueUrl=work)
    clock.advance(6)
    assert sqs.receive_message(QueueUrl=work).get("Messages", []) == []
    sqs.send_message(QueueUrl=work, MessageBody="a")
    clock.advance(30)
    sqs.send_message(QueueUrl=work, MessageBody="b")
    capsys.readouterr()
    # WHEN the minute's handler runs
    _counted()
    _invoke_gauges(dmq)
    # THEN each queue has one valid EMF document of gauges, the DLQ's with its depth
    documents = {d["Queue"]: d for d in json_lines(capsys.readouterr().out)
                 if "ApproximateAgeOfOldestMessage" in d}
    assert set(documents) == {"metric-work", "metric-dead"}
    for document in documents.values():
        assert_valid_emf(document)
        assert document["Account"] == ACCOUNT

    def values(document: dict[str, Any]) -> dict[str, float]:
        found = {m["Name"]: document[m["Name"]] for m in
                 document["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
        return {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in found.items()}

    assert values(documents["metric-work"]) == {
        "ApproximateNumberOfMessagesVisible": 2, "ApproximateNumberOfMessagesNotVisible": 0,
        "ApproximateNumberOfMessagesDelayed": 0, "ApproximateAgeOfOldestMessage": 30}
    assert values(documents["metric-dead"]) == {
        "ApproximateNumberOfMessagesVisible": 1, "ApproximateNumberOfMessagesNotVisible": 0,
        "ApproximateNumberOfMessagesDelayed": 0, "DeadLetterQueueDepth": 1,
        "ApproximateAgeOfOldestMessage": 36}


def test_the_scheduled_handler_prints_nothing_while_metrics_are_off(
    sqs: Any, dmq: Client, capsys: pytest.CaptureFixture[str],
) -> None:
    sqs.create_queue(QueueName="quiet")
    capsys.readouterr()
    _invoke_gauges(dmq)
    assert json_lines(capsys.readouterr().out) == []


def test_a_name_no_exposition_can_encode_is_counted_under_a_readable_one(
    dmq: Client, counts: dict[tuple[str, str, str], float],
) -> None:
    # GIVEN a queue name from a bad request: a lone surrogate, and far too long
    observability.count_queue("Errors", ACCOUNT, "bad\ud800" + "x" * 200)
    # THEN it is counted under a label that encodes, cut to SQS's longest name
    label = "bad?" + "x" * (observability.MAX_NAME_CHARS - 4)
    assert added(counts, label) == {"Errors": 1}
    status, _, body = MetricsEndpoint(runtime, cache_s=60).respond()
    assert status == 200
    assert f'dmq_errors_total{{account="{ACCOUNT}",queue="{label}"}}' in body.decode()
