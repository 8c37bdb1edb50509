"""GIVEN two clusters (two messages tables) WHEN queues are placed, loaded and split
THEN placement follows the ring and capacity, and a split queue delivers every message."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.aws import Clients
from chalicelib.settings import Settings
from infra import provision
from tests.admin_signing import admin_call
from tests.clocks import FakeClock

ACCOUNT = "000000000000"
CLUSTERS = ("default", "c2")


@pytest.fixture
def settings() -> Settings:
    """Two clusters: `default` (dmq-messages) and `c2` (dmq-messages-c2)."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, clusters=CLUSTERS)


@pytest.fixture
def tables(aws: Clients, settings: Settings) -> Iterator[None]:
    """The second cluster's table, made like the template's messages table."""
    provision.create_cluster_tables(aws.dynamodb, [settings.cluster_table("c2")])
    yield


def _clusters_of(sqs: Any, url: str) -> list[str]:
    raw = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShards"])
    return [s["cluster"] for s in json.loads(raw["Attributes"]["DmqShards"])]


def _admin(dmq: Client, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    response = admin_call(dmq, method, path,
                          json.dumps(body).encode() if body is not None else b"")
    return response.status_code, json.loads(response.body or b"{}")


def _table_items(aws: Clients, table: str) -> int:
    return int(aws.dynamodb.scan(TableName=table, Select="COUNT")["Count"])


@pytest.mark.usefixtures("tables")
def test_new_queues_are_spread_over_the_clusters_by_the_ring(sqs: Any) -> None:
    placed = Counter()
    for i in range(60):
        url = sqs.create_queue(QueueName=f"q{i}")["QueueUrl"]
        placed.update(_clusters_of(sqs, url))
    print(f"\nqueues per cluster: {dict(placed)}")
    assert set(placed) == set(CLUSTERS)
    assert all(n >= 15 for n in placed.values()), placed


@pytest.mark.usefixtures("tables")
def test_a_cluster_over_capacity_gets_no_new_queues(sqs: Any, dmq: Client) -> None:
    status, body = _admin(dmq, "PUT", "/admin/clusters/c2", {"capacity": 0})
    assert status == 200
    assert {c["cluster"]: c["accepting"] for c in body["clusters"]} == {
        "default": True, "c2": False}
    for i in range(30):
        url = sqs.create_queue(QueueName=f"full{i}")["QueueUrl"]
        assert _clusters_of(sqs, url) == ["default"]


@pytest.mark.usefixtures("tables")
def test_utilization_is_recorded_and_weighs_placement(sqs: Any, dmq: Client) -> None:
    _admin(dmq, "PUT", "/admin/clusters/default", {"capacity": 10})
    _admin(dmq, "PUT", "/admin/clusters/c2", {"capacity": 10})
    url = sqs.create_queue(QueueName="big", Attributes={"DmqShardCount": "10"})["QueueUrl"]
    full = _clusters_of(sqs, url)[0]
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[])
    dmq.lambda_.invoke("manage_clusters", event)
    _, view = _admin(dmq, "GET", "/admin/clusters")
    by_name = {c["cluster"]: c for c in view["clusters"]}
    assert by_name[full]["utilization"] == 10 and by_name[full]["accepting"] is False
    assert "000000000000/big" in by_name[full]["queues"]
    other = next(c for c in CLUSTERS if c != full)
    for i in range(10):
        assert _clusters_of(sqs, sqs.create_queue(QueueName=f"n{i}")["QueueUrl"]) == [other]


@pytest.mark.usefixtures("tables")
def test_a_queue_split_across_two_clusters_delivers_every_message(
    sqs: Any, dmq: Client, aws: Clients, settings: Settings,
) -> None:
    url = sqs.create_queue(QueueName="hot", Attributes={"DmqShardCount": "2"})["QueueUrl"]
    home = _clusters_of(sqs, url)[0]
    sent = set()
    for start in range(0, 50, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"before-{start + i}"} for i in range(10)])
        sent |= {e["MessageId"] for e in result["Successful"]}
    # WHEN the admin splits the queue (the ring picks the other cluster)
    status, record = _admin(dmq, "POST", f"/admin/queues/{ACCOUNT}/hot/split", {})
    assert status == 200
    assert sorted({s["cluster"] for s in record["shards"]}) == sorted(CLUSTERS)
    assert Counter(_clusters_of(sqs, url)) == Counter({home: 2, next(
        c for c in CLUSTERS if c != home): 2})
    for start in range(0, 200, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"after-{start + i}"} for i in range(10)])
        sent |= {e["MessageId"] for e in result["Successful"]}
    # THEN both tables hold messages of the queue
    assert all(_table_items(aws, settings.cluster_table(c)) > 0 for c in CLUSTERS)
    # AND every message is delivered once
    received: list[str] = []
    for _ in range(100):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            break
        received += [m["MessageId"] for m in got]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    assert sorted(received) == sorted(sent)
    assert all(_table_items(aws, settings.cluster_table(c)) == 0 for c in CLUSTERS)


@pytest.mark.usefixtures("tables")
def test_dead_letters_move_across_clusters(sqs: Any, dmq: Client, clock: FakeClock) -> None:
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    dlq_cluster = _clusters_of(sqs, dlq_url)[0]
    source = None
    for i in range(40):
        url = sqs.create_queue(QueueName=f"src{i}", Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": 1}),
            "VisibilityTimeout": "1"})["QueueUrl"]
        if _clusters_of(sqs, url)[0] != dlq_cluster:
            source = url
            break
    assert source is not None, "the ring put every queue on one cluster"
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert len(sqs.receive_message(QueueUrl=source)["Messages"]) == 1
    clock.advance(2)
    assert sqs.receive_message(QueueUrl=source).get("Messages") is None
    moved = sqs.receive_message(QueueUrl=dlq_url,
                                MessageSystemAttributeNames=["DeadLetterQueueSourceArn"])[
        "Messages"]
    assert [m["Body"] for m in moved] == ["poison"]
    # the move across clusters records the source queue as the one-transaction move does
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    assert moved[0]["Attributes"] == {"DeadLetterQueueSourceArn": source_arn}


@pytest.mark.usefixtures("tables")
def test_admin_shard_and_split_requests_are_validated(sqs: Any, dmq: Client) -> None:
    sqs.create_queue(QueueName="v")
    for bad in ({}, {"count": 0}, {"count": 65}, {"count": "3"}, {"count": 1.5}):
        status, body = _admin(dmq, "PUT", f"/admin/queues/{ACCOUNT}/v/shards", bad)
        assert status == 400 and body["code"] == "InvalidParameterValue", bad
    status, body = _admin(dmq, "PUT", f"/admin/queues/{ACCOUNT}/v/shards", {"count": 3})
    assert status == 200 and body["shard_count"] == 3
    status, body = _admin(dmq, "POST", f"/admin/queues/{ACCOUNT}/v/split", {"cluster": "nope"})
    assert status == 400 and "Unknown cluster" in body["message"]
    status, body = _admin(dmq, "PUT", f"/admin/queues/{ACCOUNT}/missing/shards", {"count": 2})
    assert status == 404
    status, body = _admin(dmq, "PUT", "/admin/clusters/nope", {"capacity": 5})
    assert status == 400


@pytest.mark.usefixtures("tables")
def test_the_clusters_view_counts_shards_as_they_are_now(sqs: Any, dmq: Client) -> None:
    # GIVEN a queue of 3 shards, and no manage_clusters schedule run since
    url = sqs.create_queue(QueueName="grows", Attributes={"DmqShardCount": "3"})["QueueUrl"]
    home = _clusters_of(sqs, url)[0]
    _, view = _admin(dmq, "GET", "/admin/clusters")
    assert {c["cluster"]: c["utilization"] for c in view["clusters"]}[home] == 3
    # WHEN the admin scales it out, then splits it
    status, _ = _admin(dmq, "PUT", f"/admin/queues/{ACCOUNT}/grows/shards", {"count": 5})
    assert status == 200
    _, view = _admin(dmq, "GET", "/admin/clusters")
    # THEN the view shows the active shards at once
    assert {c["cluster"]: c["utilization"] for c in view["clusters"]}[home] == 5
    status, _ = _admin(dmq, "POST", f"/admin/queues/{ACCOUNT}/grows/split", {})
    assert status == 200
    _, view = _admin(dmq, "GET", "/admin/clusters")
    by_name = {c["cluster"]: c["utilization"] for c in view["clusters"]}
    assert sum(by_name.values()) == len(_clusters_of(sqs, url))
    assert all(n > 0 for n in by_name.values())


@pytest.mark.parametrize("settings", [Settings(metadata_cache_seconds=0.0)])
def test_a_split_without_a_second_cluster_says_how_to_configure_one(
    sqs: Any, dmq: Client,
) -> None:
    # GIVEN the default single cluster
    sqs.create_queue(QueueName="lonely")
    # WHEN the admin splits a queue or sizes an unknown cluster
    status, body = _admin(dmq, "POST", f"/admin/queues/{ACCOUNT}/lonely/split", {})
    # THEN the error names DMQ_CLUSTERS
    assert status == 400 and "DMQ_CLUSTERS" in body["message"]
    status, body = _admin(dmq, "PUT", "/admin/clusters/c2", {"capacity": 10})
    assert status == 400 and "DMQ_CLUSTERS" in body["message"]
