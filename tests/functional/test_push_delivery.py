"""GIVEN a queue with a push subscription WHEN DMQ delivers its messages THEN the target
gets Lambda's SQS event, and failures, partial batches, dead letters, FIFO groups, batch
sizes, batching windows and the concurrency cap behave as Lambda's SQS event source
mapping (AWS Lambda developer guide: "Using Lambda with Amazon SQS")."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.push import targets
from chalicelib.push.delivery import PushDelivery, PushOptions
from chalicelib.push.events import EVENT_SOURCE
from chalicelib.push.registry import SubscriptionRepository
from chalicelib.settings import Settings
from tests.admin_signing import admin_call
from tests.clocks import FakeClock

ACCOUNT = "000000000000"
WAIT_S = 15.0


@pytest.fixture
def settings() -> Settings:
    """One delivery worker per subscription, so that batches are not split between
    workers (the concurrency tests run more); the loopback receiver's network allowed."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, push_workers=1,
                    push_allowed_networks=("127.0.0.0/8",))


class Recorder:
    """A push function that records each event and answers as told."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.answer: Callable[[dict[str, Any]], Any] = lambda event: None

    def __call__(self, event: Any) -> Any:
        raw = event.to_dict()
        with self.lock:
            self.events.append(raw)
        return self.answer(raw)

    def bodies(self) -> list[list[str]]:
        with self.lock:
            return [[r["body"] for r in e["Records"]] for e in self.events]

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.events) >= count:
                    return
            time.sleep(0.02)
        raise AssertionError(f"{count} events expected, got {self.bodies()}")


@pytest.fixture
def recorder(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    recorder = Recorder()
    name = f"fn-{request.node.name[:40]}"
    targets.on_queue_message(name)(recorder)
    recorder.name = name  # type: ignore[attr-defined]
    yield recorder
    targets.unregister(name)


class Delivering:
    """The region's push delivery running in a thread for the length of a test."""

    def __init__(self, delivery: PushDelivery) -> None:
        self.delivery = delivery
        self.stop = threading.Event()
        self.thread = threading.Thread(target=delivery.run, args=(WAIT_S * 4, self.stop))

    def __enter__(self) -> PushDelivery:
        self.thread.start()
        return self.delivery

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive()


def subscribe(dmq: Client, name: str, **body: Any) -> dict[str, Any]:
    response = admin_call(dmq, "POST", f"/admin/queues/{ACCOUNT}/{name}/subscriptions",
                          json.dumps(body).encode())
    assert response.status_code == 200, response.body
    return dict(response.json_body)


def wait_until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def counts(dmq: Client, name: str) -> tuple[int, int]:
    shown = admin_call(dmq, "GET", f"/admin/queues/{ACCOUNT}/{name}").json_body
    return shown["visible"], shown["in_flight"]


def test_a_function_gets_lambdas_sqs_event_and_delivered_messages_are_deleted(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    subscribe(dmq, "events", FunctionName=recorder.name)  # type: ignore[attr-defined]
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello", MessageAttributes={
        "kind": {"DataType": "String", "StringValue": "greeting"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})
    with Delivering(runtime.push()):
        recorder.wait_for(1)
        wait_until(lambda: counts(dmq, "events") == (0, 0))
    record = recorder.events[0]["Records"][0]
    assert set(record) == {"messageId", "receiptHandle", "body", "attributes",
                           "messageAttributes", "md5OfBody", "md5OfMessageAttributes",
                           "eventSource", "eventSourceARN", "awsRegion"}
    assert record["messageId"] == sent["MessageId"]
    assert record["body"] == "hello"
    assert record["md5OfBody"] == sent["MD5OfMessageBody"]
    assert record["md5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == (
        EVENT_SOURCE, arn, "us-east-1")
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert set(record["attributes"]) == {"ApproximateReceiveCount", "SentTimestamp",
                                         "SenderId", "ApproximateFirstReceiveTimestamp"}
    assert record["messageAttributes"]["kind"] == {
        "stringValue": "greeting", "stringListValues": [], "binaryListValues": [],
        "dataType": "String"}
    assert base64.b64decode(record["messageAttributes"]["blob"]["binaryValue"]) == b"\x00\x01"


def test_reported_item_failures_stay_and_come_back_after_the_visibility_timeout(
        sqs: Any, dmq: Client, recorder: Recorder, clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="partial", Attributes={"VisibilityTimeout": "30"})[
        "QueueUrl"]
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)

    def fail_b(event: dict[str, Any]) -> Any:
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]}
                                      for r in event["Records"] if r["body"] == "b"]}

    recorder.answer = fail_b
    subscribe(dmq, "partial", FunctionName=recorder.name,  # type: ignore[attr-defined]
              FunctionResponseTypes=["ReportBatchItemFailures"])
    with Delivering(runtime.push()) as delivery:
        wait_until(lambda: delivery.stats.batches >= 1 and counts(dmq, "partial") == (0, 1))
        assert sorted(b for e in recorder.bodies() for b in e) == ["a", "b", "c"]
        recorder.answer = lambda event: None
        clock.advance(31)
        wait_until(lambda: counts(dmq, "partial") == (0, 0))
    again = recorder.events[-1]["Records"]
    assert [r["body"] for r in again] == ["b"]
    assert again[0]["attributes"]["ApproximateReceiveCount"] == "2"


def test_an_unusable_partial_response_fails_the_whole_batch(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    # Every other unusable answer is read by the same rule: tests/unit/test_push_domain.py.
    answer = {"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]}
    url = sqs.create_queue(QueueName="unusable")["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    recorder.answer = lambda event: answer
    subscribe(dmq, "unusable", FunctionName=recorder.name,  # type: ignore[attr-defined]
              FunctionResponseTypes=["ReportBatchItemFailures"])
    with Delivering(runtime.push()) as delivery:
        wait_until(lambda: delivery.stats.failed >= 2)
        assert counts(dmq, "unusable") == (0, 2)
        assert delivery.stats.delivered == 0


def test_an_empty_partial_response_is_a_complete_success(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    answer: dict[str, Any] = {"batchItemFailures": []}
    url = sqs.create_queue(QueueName="empty-answer")["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    recorder.answer = lambda event: answer
    subscribe(dmq, "empty-answer", FunctionName=recorder.name,  # type: ignore[attr-defined]
              FunctionResponseTypes=["ReportBatchItemFailures"])
    with Delivering(runtime.push()):
        wait_until(lambda: counts(dmq, "empty-answer") == (0, 0))


def test_without_report_batch_item_failures_the_response_is_ignored(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="ignored")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a")
    recorder.answer = lambda event: {"batchItemFailures": [
        {"itemIdentifier": event["Records"][0]["messageId"]}]}
    subscribe(dmq, "ignored", FunctionName=recorder.name)  # type: ignore[attr-defined]
    with Delivering(runtime.push()):
        wait_until(lambda: counts(dmq, "ignored") == (0, 0))


def test_a_raising_handler_leaves_the_batch_until_the_dlq_takes_it_after_max_receives(
        sqs: Any, dmq: Client, recorder: Recorder, clock: FakeClock) -> None:
    dlq = sqs.create_queue(QueueName="push-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="poison", Attributes={
        "VisibilityTimeout": "10",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})})[
        "QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")["MessageId"]

    def explode(event: dict[str, Any]) -> Any:
        raise RuntimeError("handler failed")

    recorder.answer = explode
    subscribe(dmq, "poison", FunctionName=recorder.name)  # type: ignore[attr-defined]
    with Delivering(runtime.push()):
        recorder.wait_for(1)
        assert counts(dmq, "poison") == (0, 1)
        clock.advance(11)
        recorder.wait_for(2)
        assert recorder.events[1]["Records"][0]["attributes"]["ApproximateReceiveCount"] == "2"
        clock.advance(11)  # a third receive would exceed maxReceiveCount: to the DLQ
        wait_until(lambda: counts(dmq, "push-dlq") == (1, 0))
    assert len(recorder.events) == 2
    assert counts(dmq, "poison") == (0, 0)
    moved = sqs.receive_message(QueueUrl=dlq)["Messages"]
    assert moved[0]["MessageId"] == sent


def test_fifo_delivery_stops_at_a_groups_first_failure(
        sqs: Any, dmq: Client, recorder: Recorder, clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="orders.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true",
        "VisibilityTimeout": "30"})["QueueUrl"]
    for group, body in (("A", "a1"), ("A", "a2"), ("B", "b1"), ("A", "a3"), ("B", "b2")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)

    def fail_a2(event: dict[str, Any]) -> Any:
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]}
                                      for r in event["Records"] if r["body"] == "a2"]}

    recorder.answer = fail_a2
    subscribe(dmq, "orders.fifo", FunctionName=recorder.name,  # type: ignore[attr-defined]
              FunctionResponseTypes=["ReportBatchItemFailures"])
    with Delivering(runtime.push()):
        wait_until(lambda: sum(len(b) for b in recorder.bodies()) >= 5
                   and counts(dmq, "orders.fifo") == (0, 2))
        first = recorder.events[0]["Records"]
        assert {r["attributes"]["MessageGroupId"] for r in first} <= {"A", "B"}
        assert all("SequenceNumber" in r["attributes"] for r in first)
        recorder.answer = lambda event: None
        clock.advance(31)
        wait_until(lambda: counts(dmq, "orders.fifo") == (0, 0))
    bodies = recorder.bodies()
    delivered_a = [b for batch in bodies for b in batch if b.startswith("a")]
    assert delivered_a == ["a1", "a2", "a3", "a2", "a3"]  # a3 again: it came after a2
    assert [b for batch in bodies for b in batch if b.startswith("b")] == ["b1", "b2"]


def test_batches_hold_batch_size_and_a_window_waits_for_more(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="batched")["QueueUrl"]
    for start in (0, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, start + 10)])
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(20, 25)])
    subscribe(dmq, "batched", FunctionName=recorder.name,  # type: ignore[attr-defined]
              BatchSize=20, MaximumBatchingWindowInSeconds=1)
    started = time.monotonic()
    with Delivering(runtime.push()):
        recorder.wait_for(2)
    took = time.monotonic() - started
    sizes = [len(b) for b in recorder.bodies()]
    assert sizes == [20, 5]
    assert took >= 1.0  # the second batch waited out the window for more messages
    assert sorted(b for batch in recorder.bodies() for b in batch) == sorted(
        f"m{i}" for i in range(25))


def test_without_a_window_a_batch_is_what_one_receive_returns(
        sqs: Any, dmq: Client, recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="no-window")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(7)])
    subscribe(dmq, "no-window", FunctionName=recorder.name,  # type: ignore[attr-defined]
              BatchSize=3)
    with Delivering(runtime.push()):
        recorder.wait_for(3)
        wait_until(lambda: counts(dmq, "no-window") == (0, 0))
    sizes = [len(b) for b in recorder.bodies()]
    assert max(sizes) <= 3 and sum(sizes) == 7


def test_maximum_concurrency_caps_the_workers_of_every_process(
        sqs: Any, dmq: Client, aws: Any, settings: Settings, clock: FakeClock,
        recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="capped")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)])
    inside = [0, 0]  # now, most
    lock = threading.Lock()

    def slow(event: dict[str, Any]) -> Any:
        with lock:
            inside[0] += 1
            inside[1] = max(inside[1], inside[0])
        time.sleep(0.15)
        with lock:
            inside[0] -= 1
        return None

    recorder.answer = slow
    subscribe(dmq, "capped", FunctionName=recorder.name,  # type: ignore[attr-defined]
              BatchSize=1, ScalingConfig={"MaximumConcurrency": 2})
    services = runtime.services_for()
    repo = SubscriptionRepository(aws.dynamodb, settings.control_table)
    # Two processes' worth of delivery, five workers each, against a cap of two.
    processes = [PushDelivery(repo, services.queues, services.messages, clock, "us-east-1",
                              PushOptions(workers=5)) for _ in range(2)]
    with Delivering(processes[0]), Delivering(processes[1]):
        wait_until(lambda: counts(dmq, "capped") == (0, 0))
    assert sum(len(b) for b in recorder.bodies()) == 10
    assert inside[1] == 2


class _Receiver(BaseHTTPRequestHandler):
    answers: list[tuple[int, bytes]] = []
    events: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).events.append(json.loads(self.rfile.read(length)))
        status, body = type(self).answers.pop(0) if type(self).answers else (200, b"")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    """A loopback HTTP endpoint that records events and answers from a script."""
    handler = type("Receiver", (_Receiver,), {"answers": [], "events": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_an_http_endpoint_gets_the_event_and_an_error_status_fails_the_batch(
        sqs: Any, dmq: Client, clock: FakeClock,
        receiver: tuple[str, type[_Receiver]]) -> None:
    endpoint, handler = receiver
    url = sqs.create_queue(QueueName="webhook", Attributes={"VisibilityTimeout": "5"})[
        "QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    handler.answers.append((500, b"boom"))
    subscribe(dmq, "webhook", Endpoint=endpoint,
              FunctionResponseTypes=["ReportBatchItemFailures"])
    with Delivering(runtime.push()) as delivery:
        wait_until(lambda: delivery.stats.failed == 3)
        assert counts(dmq, "webhook") == (0, 3)
        ids = {r["body"]: r["messageId"] for r in handler.events[0]["Records"]}
        handler.answers.append((200, json.dumps(
            {"batchItemFailures": [{"itemIdentifier": ids["m1"]}]}).encode()))
        clock.advance(6)
        wait_until(lambda: delivery.stats.delivered == 2 and counts(dmq, "webhook") == (0, 1))
        clock.advance(6)
        wait_until(lambda: counts(dmq, "webhook") == (0, 0))
    assert [r["body"] for r in handler.events[-1]["Records"]] == ["m1"]
    assert all(r["eventSource"] == "aws:sqs" for e in handler.events for r in e["Records"])


def test_subscriptions_outlive_the_process_that_created_them(
        sqs: Any, dmq: Client, recorder: Recorder, settings: Settings,
        clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="durable")["QueueUrl"]
    created = subscribe(dmq, "durable", FunctionName=recorder.name)  # type: ignore[attr-defined]
    runtime.configure(settings, clock)  # a new container: nothing kept in memory
    listed = admin_call(dmq, "GET", f"/admin/queues/{ACCOUNT}/durable/subscriptions").json_body
    assert [s["UUID"] for s in listed["subscriptions"]] == [created["UUID"]]
    sqs.send_message(QueueUrl=url, MessageBody="after restart")
    with Delivering(runtime.push()):
        recorder.wait_for(1)
    assert recorder.bodies() == [["after restart"]]


def test_the_schedule_handler_delivers_for_its_run_time_on_aws(
        sqs: Any, dmq: Client, recorder: Recorder, settings: Settings,
        clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="scheduled")["QueueUrl"]
    subscribe(dmq, "scheduled", FunctionName=recorder.name)  # type: ignore[attr-defined]
    sqs.send_message(QueueUrl=url, MessageBody="by schedule")
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[])
    dmq.lambda_.invoke("deliver_push", event)  # DMQ_PUSH_RUN_S=0: the local loop delivers
    assert recorder.events == []
    runtime.configure(replace(settings, push_run_s=1.5), clock)
    started = time.monotonic()
    dmq.lambda_.invoke("deliver_push", event)
    assert 1.5 <= time.monotonic() - started < WAIT_S
    assert recorder.bodies() == [["by schedule"]]
    assert counts(dmq, "scheduled") == (0, 0)


def test_the_slots_of_a_crashed_worker_free_themselves_when_their_time_passes(
        sqs: Any, dmq: Client, aws: Any, settings: Settings, clock: FakeClock,
        recorder: Recorder) -> None:
    url = sqs.create_queue(QueueName="orphaned")["QueueUrl"]
    sub = subscribe(dmq, "orphaned", FunctionName=recorder.name,  # type: ignore[attr-defined]
                    ScalingConfig={"MaximumConcurrency": 2})
    repo = SubscriptionRepository(aws.dynamodb, settings.control_table)
    now = clock.now_ms()
    for slot in (0, 1):  # held by a process that died without giving them back
        assert repo.hold_slot(sub["UUID"], slot, "crashed", now, now + 30_000)
    assert not repo.hold_slot(sub["UUID"], 0, "another", now, now + 30_000)
    sqs.send_message(QueueUrl=url, MessageBody="waits for a slot")
    with Delivering(runtime.push()):
        time.sleep(1.5)
        assert recorder.events == []
        clock.advance(31)
        recorder.wait_for(1)
    assert recorder.bodies() == [["waits for a slot"]]


def test_subscribing_and_unsubscribing_wake_this_processs_delivery(
    dmq: Client, sqs: Any, recorder: Recorder
) -> None:
    # GIVEN a queue and this process's push delivery, not woken yet
    sqs.create_queue(QueueName="woken")
    delivery = runtime.push()
    delivery._woken.clear()
    # WHEN an endpoint subscribes THEN the delivery is woken to read the subscriptions
    sub = subscribe(dmq, "woken", FunctionName=recorder.name)  # type: ignore[attr-defined]
    assert delivery._woken.is_set()
    # AND likewise when it unsubscribes
    delivery._woken.clear()
    response = admin_call(
        dmq, "DELETE", f"/admin/queues/{ACCOUNT}/woken/subscriptions/{sub['UUID']}")
    assert response.status_code == 200, response.body
    assert delivery._woken.is_set()
