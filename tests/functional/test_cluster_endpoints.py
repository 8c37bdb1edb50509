"""GIVEN two clusters, `c2` with a DynamoDB endpoint of its own (DMQ_CLUSTER_ENDPOINTS)
WHEN queues are created on c2 (DmqCluster, what `dmq queues create --cluster` sends) and
used, dead-lettered and redriven
THEN their messages are written and read through c2's client, into a table that exists
only in c2's store, while the default cluster, the queues and the control table stay on
the main store.

c2's store is a second moto: moto's server on a loopback port, under an account of its
own (moto keeps one namespace per account), so a table it holds is not in the main
store's namespace and a call that reached the wrong store would fail.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client
from moto.server import ThreadedMotoServer

from app import runtime
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from chalicelib.settings_clusters import cluster_endpoints
from infra import provision
from tests.clocks import FakeClock

CLUSTERS = ("default", "c2")
C2_ACCOUNT = "222222222222"  # c2's store: moto's namespace of another account
C2_TABLE = "dmq-messages-c2"


@pytest.fixture(scope="module")
def c2_endpoint() -> Iterator[str]:
    """A second moto, served over HTTP on a free loopback port."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def settings(c2_endpoint: str) -> Settings:
    """Two clusters, c2's table in c2's own store (parsed as DMQ_CLUSTER_ENDPOINTS is)."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, clusters=CLUSTERS,
                    cluster_endpoints=cluster_endpoints(f"c2={c2_endpoint}", CLUSTERS))


def _in_c2_store(client: Any) -> Any:
    """Make a client's requests land in c2's namespace of the second moto."""

    def header(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = C2_ACCOUNT

    client.meta.events.register_first("before-sign", header)
    return client


class Calls:
    """The DynamoDB operations each client made, with the tables they named."""

    def __init__(self) -> None:
        self.seen: dict[str, Counter[tuple[str, str]]] = {}

    def watch(self, name: str, client: Any) -> None:
        self.seen[name] = Counter()

        def count(params: Any, model: Any, **_: Any) -> None:
            tables = {params.get("TableName", "")} | set(params.get("RequestItems", {})) | {
                op.get("TableName", "") for item in params.get("TransactItems", [])
                for op in item.values()}
            for table in tables - {""}:
                self.seen[name][(model.name, table)] += 1

        client.meta.events.register("provide-client-params.dynamodb", count)

    def tables(self, name: str) -> set[str]:
        return {table for _, table in self.seen[name]}

    def operations(self, name: str, table: str) -> set[str]:
        return {op for op, t in self.seen[name] if t == table}


@pytest.fixture
def calls(dmq: Client, aws: Clients, settings: Settings) -> Calls:
    """c2's table made in c2's store; the runtime's clients watched."""
    c2_admin = _in_c2_store(Clients(settings).cluster_dynamodb("c2"))
    provision.create_cluster_tables(c2_admin, [C2_TABLE])
    clients = runtime.backend().clients
    _in_c2_store(clients.cluster_dynamodb("c2"))
    _in_c2_store(clients.cluster_streams("c2"))
    watched = Calls()
    watched.watch("main", clients.dynamodb)
    watched.watch("c2", clients.cluster_dynamodb("c2"))
    return watched


def _c2_items(settings: Settings) -> list[dict[str, Any]]:
    client = _in_c2_store(Clients(settings).cluster_dynamodb("c2"))
    return list(client.scan(TableName=C2_TABLE, ConsistentRead=True)["Items"])


def _roundtrip(sqs: Any, url: str, bodies: list[str]) -> list[str]:
    """Send (if any), receive and delete; the bodies received."""
    if bodies:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies)])
    received: list[str] = []
    for _ in range(20):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            break
        received += [m["Body"] for m in got]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    return received


def test_the_clients_of_a_cluster_with_its_own_endpoint(settings: Settings,
                                                          c2_endpoint: str) -> None:
    clients = Clients(settings)
    c2 = clients.cluster_dynamodb("c2")
    assert c2 is not clients.dynamodb and c2 is clients.cluster_dynamodb("c2")  # cached
    assert c2.meta.endpoint_url == c2_endpoint
    assert clients.cluster_streams("c2").meta.endpoint_url == c2_endpoint
    assert clients.cluster_dynamodb("default") is clients.dynamodb
    assert clients.cluster_streams("default") is clients.streams
    assert clients.table_dynamodb(C2_TABLE) is c2
    assert clients.table_dynamodb("dmq-messages") is clients.dynamodb
    assert clients.table_dynamodb(settings.queues_table) is clients.dynamodb
    assert clients.dynamodb_clients() == [clients.dynamodb, c2]


def test_a_queue_on_c2_writes_and_reads_through_c2s_client(
    sqs: Any, calls: Calls, aws: Clients, settings: Settings,
) -> None:
    # GIVEN a queue placed on c2 and a queue placed on the default cluster
    c2_url = sqs.create_queue(QueueName="far", Attributes={"DmqCluster": "c2"})["QueueUrl"]
    main_url = sqs.create_queue(QueueName="near",
                                Attributes={"DmqCluster": "default"})["QueueUrl"]
    shards = sqs.get_queue_attributes(QueueUrl=c2_url, AttributeNames=["DmqShards",
                                                                       "DmqCluster"])
    assert [s["cluster"] for s in json.loads(shards["Attributes"]["DmqShards"])] == ["c2"]
    assert shards["Attributes"]["DmqCluster"] == "c2"
    # WHEN messages are sent
    sqs.send_message_batch(QueueUrl=c2_url, Entries=[
        {"Id": str(i), "MessageBody": f"far-{i}"} for i in range(5)])
    assert len(_c2_items(settings)) == 5
    # THEN they are in c2's store, and its table is not in the main store
    assert C2_TABLE not in aws.dynamodb.list_tables()["TableNames"]
    assert {i["pk"]["S"] for i in _c2_items(settings)} == {"000000000000/far#0"}
    # AND the whole round trip delivers them
    assert sorted(_roundtrip(sqs, c2_url, [])) == [f"far-{i}" for i in range(5)]
    assert _c2_items(settings) == []
    assert _roundtrip(sqs, main_url, ["near-0"]) == ["near-0"]
    # AND c2's table was only ever called through c2's client, which called nothing else
    assert C2_TABLE not in calls.tables("main")
    assert calls.tables("c2") == {C2_TABLE}
    operations = calls.operations("c2", C2_TABLE)
    assert "Query" in operations
    assert operations & {"BatchWriteItem", "TransactWriteItems", "PutItem"}
    assert "dmq-messages" in calls.tables("main")


def test_an_unknown_or_changed_cluster_is_refused(sqs: Any, calls: Calls) -> None:
    with pytest.raises(ClientError) as refused:
        sqs.create_queue(QueueName="lost", Attributes={"DmqCluster": "c9"})
    error = refused.value.response["Error"]
    assert error["Code"] == "InvalidAttributeValue"
    assert "c9 is not a cluster of this deployment (default, c2)" in error["Message"]
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName="lost")
    url = sqs.create_queue(QueueName="kept", Attributes={"DmqCluster": "c2"})["QueueUrl"]
    # the same create again is the same queue; another cluster is another queue's name
    assert sqs.create_queue(QueueName="kept", Attributes={"DmqCluster": "c2"})[
        "QueueUrl"] == url
    with pytest.raises(ClientError) as taken:
        sqs.create_queue(QueueName="kept", Attributes={"DmqCluster": "default"})
    assert taken.value.response["Error"]["Code"] == "QueueAlreadyExists"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqCluster": "c2"})
    with pytest.raises(ClientError) as moved:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqCluster": "default"})
    assert moved.value.response["Error"]["Code"] == "InvalidAttributeValue"
    assert "dmq shards split" in moved.value.response["Error"]["Message"]


def test_dead_letters_and_redrive_cross_the_two_stores(
    sqs: Any, calls: Calls, clock: FakeClock, settings: Settings,
) -> None:
    # GIVEN a source queue on c2 whose dead-letter queue is on the default cluster
    dlq_url = sqs.create_queue(QueueName="dlq", Attributes={"DmqCluster": "default"})[
        "QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    source = sqs.create_queue(QueueName="src", Attributes={
        "DmqCluster": "c2", "VisibilityTimeout": "1",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}),
    })["QueueUrl"]
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert len(sqs.receive_message(QueueUrl=source)["Messages"]) == 1
    clock.advance(2)
    # WHEN it is received again, it moves across the stores to the dead-letter queue
    assert sqs.receive_message(QueueUrl=source).get("Messages") is None
    assert _c2_items(settings) == []
    # AND a redrive moves it back into c2's store
    task = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    for _ in range(20):
        runtime.services_for().move_tasks.advance()
        if _c2_items(settings):
            break
        clock.advance(1)
    runtime.services_for().move_tasks.advance()  # the DLQ is empty now: it completes
    # THEN the task counted it, and the message is back on c2
    listed = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0]
    assert task and listed["Status"] == "COMPLETED"
    assert listed["ApproximateNumberOfMessagesMoved"] == 1
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=source)["Messages"]] == ["poison"]
    assert C2_TABLE not in calls.tables("main")
