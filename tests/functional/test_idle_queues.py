"""With many idle queues, what the background passes, `GET /metrics` and the console's list
cost the store follows the activity, not the number of queues.

Every DynamoDB request of the process is counted where it leaves botocore (the app's
clients, PynamoDB's and the test's alike). Each schedule handler runs twice with a few
queues, then twice again once hundreds of idle queues were added: its second run makes
as many requests as before. The views of every queue read the counts of the active shards
in batches: with hundreds more idle queues they make the same requests.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.endpoint import Endpoint
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.domain.queues import QueueRecord, QueueStatus, Shard
from dmqlocal.metrics import read_gauges
from tests.clocks import FakeClock

ACCOUNT = "000000000000"
ADMIN = {"Authorization": "Basic " + base64.b64encode(b"AKIDADMIN:secret").decode()}
FEW, MANY = 10, 300
PASSES = ("manage_shards", "autoscale_shards", "manage_clusters", "sweep_retention",
          "region_heartbeat")


class StoreRequests:
    """Counts DynamoDB requests by operation at botocore's endpoint (every client)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def since(self, before: Counter[str]) -> Counter[str]:
        """The requests made after `before` was taken (a copy of `calls`)."""
        return self.calls - before


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreRequests]:
    counted = StoreRequests()
    original = Endpoint.make_request

    def make_request(self: Endpoint, operation_model: Any, request_dict: Any) -> Any:
        if operation_model.service_model.service_name == "dynamodb":
            counted.calls[operation_model.name] += 1
        return original(self, operation_model, request_dict)

    monkeypatch.setattr(Endpoint, "make_request", make_request)
    yield counted


def _idle_queues(start: int, count: int, now_ms: int) -> None:
    """Idle queues written as records (as CreateQueue writes them, without the requests)."""
    repo = runtime.backend().repo
    for n in range(start, start + count):
        repo.save(QueueRecord(account=ACCOUNT, name=f"idle-{n:04d}", region="us-east-1",
                              attributes={}, tags={}, created_ms=now_ms, modified_ms=now_ms,
                              shards=(Shard(0),), status=QueueStatus.ACTIVE))


def _run(dmq: Client, name: str) -> None:
    event = dmq.events.generate_cw_event(source="aws.events", detail_type="Scheduled Event",
                                         detail={}, resources=[])
    dmq.lambda_.invoke(name, event)


def _pass_costs(dmq: Client, requests: StoreRequests) -> dict[str, Counter[str]]:
    """Each pass run twice; the requests of its second run."""
    costs = {}
    for name in PASSES:
        _run(dmq, name)
        before = Counter(requests.calls)
        _run(dmq, name)
        costs[name] = requests.since(before)
    return costs


def _busy(sqs: Any) -> None:
    """Two queues with traffic: one holds messages, one was emptied; one idle wide queue."""
    held = sqs.create_queue(QueueName="busy-held")["QueueUrl"]
    emptied = sqs.create_queue(QueueName="busy-emptied")["QueueUrl"]
    sqs.create_queue(QueueName="wide", Attributes={"DmqShardCount": "2"})
    for url in (held, emptied):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    got = sqs.receive_message(QueueUrl=emptied, MaxNumberOfMessages=10)["Messages"]
    sqs.delete_message_batch(QueueUrl=emptied, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    runtime.services_for().messages.catch_up_counts()  # the stream counted them


def test_each_pass_costs_the_same_with_hundreds_more_idle_queues(
        sqs: Any, dmq: Client, clock: FakeClock, requests: StoreRequests) -> None:
    # GIVEN a few busy queues and a few idle ones
    _busy(sqs)
    _idle_queues(0, FEW, clock.now_ms())
    few = _pass_costs(dmq, requests)
    # WHEN hundreds of idle queues are added
    _idle_queues(FEW, MANY, clock.now_ms())
    many = _pass_costs(dmq, requests)
    # THEN each pass makes the same requests as before
    assert many == few
    assert sum(sum(c.values()) for c in many.values()) < 40
    assert "Scan" not in sum(many.values(), Counter())  # the catalogue had not moved


def test_the_retention_sweep_visits_only_shards_with_messages_or_traffic(
        sqs: Any, dmq: Client, clock: FakeClock, aws: Clients,
        requests: StoreRequests) -> None:
    # GIVEN a queue holding messages among idle ones, past the first sweep
    _busy(sqs)
    _idle_queues(0, MANY, clock.now_ms())
    _run(dmq, "sweep_retention")
    # WHEN the sweep runs again before any message expires
    before = Counter(requests.calls)
    _run(dmq, "sweep_retention")
    # THEN no shard is read: their sweeps are not due
    assert "Query" not in requests.since(before)
    # WHEN the messages are past retention (4 days) and the traffic quiet
    clock.advance(4 * 86400 + 1)
    before = Counter(requests.calls)
    _run(dmq, "sweep_retention")
    swept = requests.since(before)
    # THEN only the shards of the queues that had traffic are read: two lanes each of the
    # two shards that held or took messages (an idle queue's shard is never read)
    assert 0 < swept["Query"] <= 4
    left = aws.dynamodb.scan(TableName="dmq-messages")["Items"]
    assert not [i for i in left if i["pk"]["S"].startswith(f"{ACCOUNT}/busy-held#")]


def _list_cost(dmq: Client, requests: StoreRequests) -> Counter[str]:
    dmq.http.get("/console", headers=ADMIN)  # the catalogue is read once after a change
    before = Counter(requests.calls)
    page = dmq.http.get("/console", headers=ADMIN)
    assert page.status_code == 200
    return requests.since(before)


def _scrape_cost(requests: StoreRequests, clock: FakeClock) -> Counter[str]:
    """What reading every queue's gauges for a scrape costs (the rendering's reads)."""
    read_gauges(runtime, clock.now_ms)  # the catalogue is read once after a change
    before = Counter(requests.calls)
    assert len(read_gauges(runtime, clock.now_ms)) > FEW
    return requests.since(before)


def test_metrics_and_the_queue_list_read_counts_in_batches(
        sqs: Any, dmq: Client, clock: FakeClock, requests: StoreRequests) -> None:
    # GIVEN a few queues with messages and a few idle ones
    _busy(sqs)
    _idle_queues(0, FEW, clock.now_ms())
    few = (_scrape_cost(requests, clock), _list_cost(dmq, requests))
    # WHEN hundreds of idle queues are added
    _idle_queues(FEW, MANY, clock.now_ms())
    many = (_scrape_cost(requests, clock), _list_cost(dmq, requests))
    # THEN a scrape and a list page each make the same requests as before: the counts of
    # the active shards in batches (an idle queue's shards are not in the set)
    for before, after in zip(few, many, strict=True):
        assert after["BatchGetItem"] >= 2  # the active shards, then their counts
        assert after == before
        assert sum(after.values()) < 20


def test_the_queue_list_is_paged(sqs: Any, dmq: Client, clock: FakeClock) -> None:
    # GIVEN 250 queues
    _idle_queues(0, 250, clock.now_ms())
    # WHEN the list's pages are read
    first = dmq.http.get("/console", headers=ADMIN).body.decode()
    third = dmq.http.get("/console?page=3", headers=ADMIN).body.decode()
    # THEN each shows its hundred (or the rest), with the total and links between them
    assert first.count('<tr data-queue="') == 100 and "idle-0000" in first
    assert "250 queues" in first and "Page 1 of 3" in first and 'rel="next"' in first
    assert third.count('<tr data-queue="') == 50 and "idle-0249" in third
    assert "idle-0000<" not in third and 'rel="prev"' in third and 'rel="next"' not in third
    assert 'data-live="/console/live?page=3"' in third
    # WHEN a queue is made and another deleted THEN the next list shows it (the catalogue
    # of queues is read again once a record changed)
    sqs.create_queue(QueueName="zz-new")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="idle-0000")["QueueUrl"])
    again = dmq.http.get("/console?page=3", headers=ADMIN).body.decode()
    assert "250 queues" in again and "zz-new" in again
    assert "idle-0000<" not in dmq.http.get("/console", headers=ADMIN).body.decode()


def test_an_empty_quiet_shard_leaves_the_active_set_and_a_send_brings_it_back(
        sqs: Any, dmq: Client, clock: FakeClock) -> None:
    # GIVEN a queue that took a message and gave it away
    url = sqs.create_queue(QueueName="comes-and-goes")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="once")
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    runtime.services_for().messages.catch_up_counts()
    store = runtime.backend().stores.of("default")
    shard = (f"{ACCOUNT}/comes-and-goes", 0)
    assert shard in store.active_shards()  # type: ignore[attr-defined]
    # WHEN the sweep runs while its traffic is recent THEN it stays
    _run(dmq, "sweep_retention")
    assert shard in store.active_shards()  # type: ignore[attr-defined]
    # WHEN it has been quiet for five minutes THEN the sweep takes it out
    clock.advance(301)
    _run(dmq, "sweep_retention")
    assert shard not in store.active_shards()  # type: ignore[attr-defined]
    # WHEN a message comes again THEN it is back
    sqs.send_message(QueueUrl=url, MessageBody="again")
    runtime.services_for().messages.catch_up_counts()
    assert shard in store.active_shards()  # type: ignore[attr-defined]


def test_the_active_set_is_filled_once_from_counts_kept_before_it(
        dmq: Client, aws: Clients) -> None:
    # GIVEN count items written before the set was kept: an older slot that holds two
    # messages, and a shard counted down to nothing
    for key, n in (("count#dmq-messages#000000000000/old#0#1", "2"),
                   ("count#dmq-messages#000000000000/gone#0#0", "0")):
        aws.dynamodb.put_item(TableName="dmq-control",
                              Item={"key": {"S": key}, "n": {"N": n}})
    store = runtime.backend().stores.of("default")
    # WHEN the active shards are first read THEN the shard that holds messages is in
    assert store.active_shards() == [(f"{ACCOUNT}/old", 0)]  # type: ignore[attr-defined]
    # and the set is marked whole: it is not filled again
    aws.dynamodb.put_item(TableName="dmq-control", Item={
        "key": {"S": "count#dmq-messages#000000000000/later#0#1"}, "n": {"N": "1"}})
    assert store.active_shards() == [(f"{ACCOUNT}/old", 0)]  # type: ignore[attr-defined]
