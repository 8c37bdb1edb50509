"""GIVEN the app on moto WHEN clients do what AWS's own recorded runs did (LocalStack's
AWS-validated snapshots, the SQS developer guide) THEN DMQ answers as SQS did: FIFO
sequence numbers, visibility changes after a timeout, purges and deduplication, the
order of FIFO groups and of a standard queue, and dead-letter receive counts. Where the
answer is protocol-visible, it is checked over JSON and over Query."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import urlencode

from chalice.test import Client

from tests.clocks import FakeClock

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Host": "dmq.test"}
ACCOUNT = "000000000000"


def query(dmq: Client, name: str, action: str, **params: str) -> tuple[int, Any]:
    """A Query request at queue `name`'s URL: its status and parsed XML."""
    body = urlencode({"Version": "2012-11-05", "Action": action, **params})
    result = dmq.http.post(f"/{ACCOUNT}/{name}", headers=FORM, body=body)
    return result.status_code, ET.fromstring(result.body)


def _fifo(sqs: Any, name: str = "orders.fifo", **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name,
                                Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]
    return url


def _send(sqs: Any, url: str, body: str, group: str = "g", dedup: str | None = None) -> Any:
    return sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group,
                            MessageDeduplicationId=dedup or body)


def _receive(sqs: Any, url: str, count: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=count, MessageSystemAttributeNames=["All"],
        **kwargs).get("Messages", [])
    return found


# -- 9: FIFO sequence numbers ----------------------------------------------------------------

def test_a_groups_sequence_numbers_increase_and_carry_no_shard(sqs: Any) -> None:
    # GIVEN a FIFO queue spread over shards (high throughput)
    url = _fifo(sqs, DeduplicationScope="messageGroup",
                FifoThroughputLimit="perMessageGroupId")
    # WHEN one group's messages are sent one after another
    numbers = [int(_send(sqs, url, f"m{i}", group="g")["SequenceNumber"]) for i in range(3)]
    # THEN each is a 20-digit number above the one before
    assert all(len(str(n)) == 20 for n in numbers)
    assert numbers == sorted(set(numbers))
    # AND no stride is left in them for a shard's id: the next number follows closely
    assert all(0 < later - earlier < 1000 for earlier, later in itertools.pairwise(numbers))
    # AND the received messages carry the numbers the sends returned
    assert [int(m["Attributes"]["SequenceNumber"]) for m in _receive(sqs, url)] == numbers


def test_a_query_send_and_receive_carry_the_sequence_number(dmq: Client, sqs: Any) -> None:
    _fifo(sqs, "query.fifo")
    status, root = query(dmq, "query.fifo", "SendMessage", MessageBody="a",
                         MessageGroupId="g", MessageDeduplicationId="a")
    assert status == 200
    first = root.findtext(f"{NS}SendMessageResult/{NS}SequenceNumber")
    status, root = query(dmq, "query.fifo", "SendMessage", MessageBody="b",
                         MessageGroupId="g", MessageDeduplicationId="b")
    second = root.findtext(f"{NS}SendMessageResult/{NS}SequenceNumber")
    assert len(first) == len(second) == 20 and 0 < int(second) - int(first) < 1000
    status, root = query(dmq, "query.fifo", "ReceiveMessage", MaxNumberOfMessages="10",
                         **{"AttributeName.1": "All"})
    numbers = [{a.findtext(f"{NS}Name"): a.findtext(f"{NS}Value")
                for a in m.findall(f"{NS}Attribute")}["SequenceNumber"]
               for m in root.findall(f"{NS}ReceiveMessageResult/{NS}Message")]
    assert numbers == [first, second]


# -- 10: a visibility change after the timeout, with the latest handle -----------------------

def _expired_in_flight(sqs: Any, clock: FakeClock, name: str) -> tuple[str, dict[str, Any]]:
    """A standard queue (5 s visibility timeout) whose one message was received and whose
    timeout has passed, nobody having received it since."""
    url = str(sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "5"})[
        "QueueUrl"])
    sqs.send_message(QueueUrl=url, MessageBody="job")
    (message,) = _receive(sqs, url, 1)
    clock.advance(6)
    return url, message


def test_the_latest_handle_changes_the_visibility_after_the_timeout_passed(
        sqs: Any, clock: FakeClock) -> None:
    url, message = _expired_in_flight(sqs, clock, "late")
    # WHEN its latest handle changes its visibility to 60 s THEN SQS accepts it
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"],
                                  VisibilityTimeout=60)
    # AND the message is hidden for those 60 s, then received a second time
    clock.advance(59)
    assert _receive(sqs, url) == []
    clock.advance(2)
    (again,) = _receive(sqs, url)
    assert again["MessageId"] == message["MessageId"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


def test_the_latest_handle_changes_the_visibility_in_a_batch_after_the_timeout(
        sqs: Any, clock: FakeClock) -> None:
    url, message = _expired_in_flight(sqs, clock, "late-batch")
    result = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 30}])
    assert [e["Id"] for e in result["Successful"]] == ["a"] and not result.get("Failed")
    assert _receive(sqs, url) == []


def test_a_handle_of_a_message_received_since_is_not_in_flight(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message received again after its first handle's timeout, and visible again
    url, first = _expired_in_flight(sqs, clock, "again")
    assert len(_receive(sqs, url, 1)) == 1
    clock.advance(6)
    # WHEN the first handle changes its visibility THEN MessageNotInflight, as before
    try:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"],
                                      VisibilityTimeout=60)
        raise AssertionError("the change was accepted")
    except sqs.exceptions.MessageNotInflight:
        pass
    assert len(_receive(sqs, url)) == 1


def test_a_query_visibility_change_after_the_timeout_is_accepted(
        dmq: Client, sqs: Any, clock: FakeClock) -> None:
    _, message = _expired_in_flight(sqs, clock, "late-query")
    status, root = query(dmq, "late-query", "ChangeMessageVisibility",
                         ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout="60")
    assert status == 200 and root.tag == f"{NS}ChangeMessageVisibilityResponse"
    status, root = query(dmq, "late-query", "ReceiveMessage")
    assert root.findall(f"{NS}ReceiveMessageResult/{NS}Message") == []


# -- 11: a purge clears a FIFO queue's deduplication history ---------------------------------

def test_a_fifo_purge_forgets_the_deduplication_ids_sent_before_it(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN a FIFO queue with a message, purged
    url = _fifo(sqs)
    first = _send(sqs, url, "1", dedup="d")
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)  # a message sent in the purge's millisecond may go too
    # WHEN the same deduplication id is sent again within the 5 minutes
    again = _send(sqs, url, "1 again", dedup="d")
    # THEN it is a new message, and it is received
    assert again["MessageId"] != first["MessageId"]
    assert int(again["SequenceNumber"]) > int(first["SequenceNumber"])
    (received,) = _receive(sqs, url)
    assert (received["MessageId"], received["Body"]) == (again["MessageId"], "1 again")
    # AND it is deduplicated as usual from then on
    assert _send(sqs, url, "1 thrice", dedup="d")["MessageId"] == again["MessageId"]


def test_a_fifo_purge_forgets_group_scoped_and_content_based_ids(
        sqs: Any, clock: FakeClock) -> None:
    url = _fifo(sqs, "content.fifo", ContentBasedDeduplication="true",
                DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    first = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    sqs.purge_queue(QueueUrl=url)
    clock.advance(0.001)
    again = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert again["MessageId"] != first["MessageId"]
    assert [m["MessageId"] for m in _receive(sqs, url)] == [again["MessageId"]]


def test_a_query_send_after_a_fifo_purge_is_enqueued(dmq: Client, sqs: Any,
                                                     clock: FakeClock) -> None:
    url = _fifo(sqs, "purged.fifo")
    first = _send(sqs, url, "1", dedup="d")
    status, _ = query(dmq, "purged.fifo", "PurgeQueue")
    assert status == 200
    clock.advance(0.001)
    status, root = query(dmq, "purged.fifo", "SendMessage", MessageBody="1",
                         MessageGroupId="g", MessageDeduplicationId="d")
    assert status == 200
    assert root.findtext(f"{NS}SendMessageResult/{NS}MessageId") != first["MessageId"]
    status, root = query(dmq, "purged.fifo", "ReceiveMessage")
    assert len(root.findall(f"{NS}ReceiveMessageResult/{NS}Message")) == 1


# -- 12: high throughput's deduplication per group -------------------------------------------

def test_after_a_switch_to_high_throughput_a_dedup_id_is_per_group(sqs: Any) -> None:
    # GIVEN a FIFO queue created with the queue-wide scope, then switched to high throughput
    url = _fifo(sqs, "switched.fifo")
    _send(sqs, url, "before", group="g0", dedup="before")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
    # WHEN one deduplication id is sent in two groups
    one = _send(sqs, url, "in g1", group="g1", dedup="same")
    two = _send(sqs, url, "in g2", group="g2", dedup="same")
    # THEN they are two messages, and both are received
    assert one["MessageId"] != two["MessageId"]
    bodies = sorted(m["Body"] for m in _receive(sqs, url))
    assert bodies == ["before", "in g1", "in g2"]
    # AND within one group the id still deduplicates
    assert _send(sqs, url, "again", group="g1", dedup="same")["MessageId"] == one["MessageId"]


# -- 13: groups just received go behind the others -------------------------------------------

def _five_in_three_groups(sqs: Any, name: str) -> str:
    url = _fifo(sqs, name)
    for group, body in (("g1", "g1-m1"), ("g2", "g2-m1"), ("g2", "g2-m2"), ("g3", "g3-m1"),
                        ("g1", "g1-m2")):
        _send(sqs, url, body, group=group)
    return url


def test_groups_just_received_go_behind_the_others(sqs: Any) -> None:
    # GIVEN g1-m1, g2-m1, g2-m2, g3-m1, g1-m2 sent in that order
    url = _five_in_three_groups(sqs, "behind.fifo")
    # WHEN three are received with no visibility timeout
    first = [m["Body"] for m in _receive(sqs, url, 3, VisibilityTimeout=0)]
    # THEN they are g1's two and g2's first (AWS's recorded answer)
    assert first == ["g1-m1", "g1-m2", "g2-m1"]
    # AND the next receive serves g3, never received, before g1 and g2, in the order they
    # were received
    second = [m["Body"] for m in _receive(sqs, url, 10)]
    assert second == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_query_receives_put_groups_just_received_behind(dmq: Client, sqs: Any) -> None:
    _five_in_three_groups(sqs, "behind-query.fifo")

    def bodies(**params: str) -> list[str]:
        status, root = query(dmq, "behind-query.fifo", "ReceiveMessage", **params)
        assert status == 200
        return [m.findtext(f"{NS}Body") or ""
                for m in root.findall(f"{NS}ReceiveMessageResult/{NS}Message")]

    assert bodies(MaxNumberOfMessages="3", VisibilityTimeout="0") == [
        "g1-m1", "g1-m2", "g2-m1"]
    assert bodies(MaxNumberOfMessages="10") == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_groups_received_together_come_back_in_the_order_they_were_taken(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN group "zeta" older than group "alpha"
    url = _fifo(sqs, "taken.fifo")
    _send(sqs, url, "zeta-m1", group="zeta")
    clock.advance(0.001)
    _send(sqs, url, "alpha-m1", group="alpha")
    # WHEN both are received together with no visibility timeout, then again
    assert [m["Body"] for m in _receive(sqs, url, 10, VisibilityTimeout=0)] == [
        "zeta-m1", "alpha-m1"]
    # THEN they come back in the order they were taken, not by name
    assert [m["Body"] for m in _receive(sqs, url, 10)] == ["zeta-m1", "alpha-m1"]


# -- 14: a standard queue's oldest messages first --------------------------------------------

def test_a_message_visible_again_comes_before_those_sent_after_it(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN m1 received with a 5 s timeout, then m2 and m3 sent while it is in flight
    url = str(sqs.create_queue(QueueName="redelivered")["QueueUrl"])
    sqs.send_message(QueueUrl=url, MessageBody="m1")
    assert [m["Body"] for m in _receive(sqs, url, 1, VisibilityTimeout=5)] == ["m1"]
    clock.advance(2)
    for body in ("m2", "m3"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
        clock.advance(0.001)  # two calls in one millisecond have no order
    # WHEN m1's timeout has passed THEN it comes first, as the oldest
    clock.advance(4)
    assert [m["Body"] for m in _receive(sqs, url, 10)] == ["m1", "m2", "m3"]


def test_a_batch_to_an_idle_queue_comes_back_in_batch_order(sqs: Any) -> None:
    # GIVEN batches of ten, each to an idle queue, all in one millisecond
    for round_ in range(5):
        url = str(sqs.create_queue(QueueName=f"batch-{round_}")["QueueUrl"])
        bodies = [f"{round_}-{i}" for i in range(10)]
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"e{i}", "MessageBody": body} for i, body in enumerate(bodies)])
        assert len(result["Successful"]) == 10
        # THEN a receive of ten returns them in the batch's order
        assert [m["Body"] for m in _receive(sqs, url, 10)] == bodies


def test_a_query_batch_comes_back_in_batch_order(dmq: Client, sqs: Any) -> None:
    sqs.create_queue(QueueName="query-batch")
    bodies = [f"q{i}" for i in range(10)]
    entries: dict[str, str] = {}
    for i, body in enumerate(bodies, start=1):
        entries[f"SendMessageBatchRequestEntry.{i}.Id"] = f"e{i}"
        entries[f"SendMessageBatchRequestEntry.{i}.MessageBody"] = body
    form = urlencode({"Version": "2012-11-05", "Action": "SendMessageBatch", **entries})
    result = dmq.http.post(f"/{ACCOUNT}/query-batch", body=form, headers={
        **FORM, "amz-sdk-invocation-id": "0b4f3c9e-8d1a-4c55-9a7e-3f1d2b6c7a88"})
    assert result.status_code == 200
    status, root = query(dmq, "query-batch", "ReceiveMessage", MaxNumberOfMessages="10")
    assert status == 200
    assert [m.findtext(f"{NS}Body") for m in
            root.findall(f"{NS}ReceiveMessageResult/{NS}Message")] == bodies


# -- 15: a dead letter's receive count --------------------------------------------------------

def _dead_letter_once(sqs: Any, clock: FakeClock, name: str) -> tuple[str, str]:
    """A message received once from a queue whose maxReceiveCount is 1, then moved to its
    dead-letter queue by the next receive."""
    dlq = str(sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    source = str(sqs.create_queue(QueueName=name, Attributes={
        "VisibilityTimeout": "5",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})})[
        "QueueUrl"])
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert len(_receive(sqs, source)) == 1
    clock.advance(6)
    assert _receive(sqs, source) == []  # the receive past maxReceiveCount moves it
    return source, dlq


def test_a_dead_letter_keeps_counting_its_receives(sqs: Any, clock: FakeClock) -> None:
    _, dlq = _dead_letter_once(sqs, clock, "counted")
    # WHEN it is received from the dead-letter queue THEN its count goes on from the
    # source queue's (AWS's recorded answer: 2)
    (moved,) = _receive(sqs, dlq, VisibilityTimeout=0)
    assert moved["Attributes"]["ApproximateReceiveCount"] == "2"
    # AND its first receive is the source queue's (as AWS's DLQ messages show it)
    assert int(moved["Attributes"]["ApproximateFirstReceiveTimestamp"]) < clock.now_ms() - 5000
    (again,) = _receive(sqs, dlq)
    assert again["Attributes"]["ApproximateReceiveCount"] == "3"


def test_a_query_receive_of_a_dead_letter_shows_its_count(
        dmq: Client, sqs: Any, clock: FakeClock) -> None:
    _dead_letter_once(sqs, clock, "counted-query")
    status, root = query(dmq, "counted-query-dlq", "ReceiveMessage",
                         **{"AttributeName.1": "ApproximateReceiveCount"})
    assert status == 200
    (message,) = root.findall(f"{NS}ReceiveMessageResult/{NS}Message")
    assert {a.findtext(f"{NS}Name"): a.findtext(f"{NS}Value")
            for a in message.findall(f"{NS}Attribute")} == {"ApproximateReceiveCount": "2"}


def test_a_fifo_dead_letter_keeps_counting_its_receives(sqs: Any, clock: FakeClock) -> None:
    dlq = _fifo(sqs, "dead.fifo")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    source = _fifo(sqs, "work.fifo", VisibilityTimeout="5", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": 1}))
    _send(sqs, source, "poison")
    assert len(_receive(sqs, source)) == 1
    clock.advance(6)
    assert _receive(sqs, source) == []
    (moved,) = _receive(sqs, dlq)
    assert moved["Attributes"]["ApproximateReceiveCount"] == "2"
