"""The store contract: the same cases against in-process moto, DynamoDB Local and DMQ's
own in-memory store (`DMQ_STORE=memory`, dmqlocal/memstore).

One DynamoDB Local (-inMemory) and one in-memory store serve the whole session; each case
gets its own tables, created from the real template under names of its own, and deletes
them afterwards. DynamoDB Local and the in-memory store are reached as DMQ reaches them
(`chalicelib.aws.Clients`: its item calls through the lean client,
chalicelib/dynamo_client.py); moto through botocore.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest

from chalicelib.aws import Clients
from chalicelib.backend.counters import ShardCounters
from chalicelib.dynamo_client import LeanDynamoDB
from chalicelib.settings import Settings
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal
from dmqlocal.embedded import EmbeddedAws
from dmqlocal.handlers import StreamBinding
from dmqlocal.memstore.process import MemoryStoreProcess
from dmqlocal.pump import StreamPump
from infra import provision

REGION = "us-east-1"
MOTO, DYNAMODB_LOCAL, MEMSTORE = "moto", "dynamodb-local", "memstore"


@dataclass
class Store:
    """A store under test: its name, a DynamoDB and a Streams client, DMQ's tables."""

    name: str
    dynamodb: Any
    streams: Any
    messages: str
    queues: str

    def stream_arn(self, table: str) -> str:
        """The table's current stream."""
        return str(self.dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"])


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[str]:
    """One DynamoDB Local in memory for the session; its endpoint."""
    server = DynamoDBLocal(None)
    endpoint = server.start()
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def memstore() -> Iterator[str]:
    """One in-memory store for the session; its endpoint."""
    server = MemoryStoreProcess()
    endpoint = server.start()
    yield endpoint
    server.stop()


def _create_tables(dynamodb: Any, suffix: str) -> dict[str, str]:
    """The template's tables, named with `suffix`; their names by resource."""
    names = {"MessagesTableName": f"dmq-messages-{suffix}",
             "QueuesTableName": f"dmq-queues-{suffix}",
             "ControlTableName": f"dmq-control-{suffix}"}
    for resource in provision.resources(names).values():
        if resource["Type"] == "AWS::DynamoDB::Table":
            provision._create_table(dynamodb, resource["Properties"])
    return names


@pytest.fixture(params=[MOTO, DYNAMODB_LOCAL, MEMSTORE])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """DMQ's tables on each store, with a DynamoDB and a Streams client."""
    suffix = uuid.uuid4().hex[:8]
    if request.param == MOTO:
        embedded = EmbeddedAws()
        embedded.start()
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        streams = boto3.client("dynamodbstreams", region_name=REGION)
        names = _create_tables(dynamodb, suffix)
        yield Store(MOTO, dynamodb, streams, names["MessagesTableName"],
                    names["QueuesTableName"])
        embedded.stop()
        return
    if request.param == MEMSTORE:
        yield from _local_store(request.getfixturevalue("memstore"), suffix, MEMSTORE)
        return
    yield from _local_store(request.getfixturevalue("dynamodb_local"), suffix)


@pytest.fixture(params=[DYNAMODB_LOCAL, MEMSTORE])
def local_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """DMQ's tables on a store served over HTTP, as the local server has them: DynamoDB
    Local, or the in-memory store."""
    endpoint = request.getfixturevalue("dynamodb_local" if request.param == DYNAMODB_LOCAL
                                       else "memstore")
    yield from _local_store(endpoint, uuid.uuid4().hex[:8], request.param)


def _local_store(endpoint: str, suffix: str, name: str = DYNAMODB_LOCAL) -> Iterator[Store]:
    clients = Clients(replace(Settings(), region=REGION, dynamodb_endpoint=endpoint,
                              store_credentials=(ACCESS_KEY, SECRET_KEY)))
    dynamodb, streams = clients.dynamodb, clients.streams
    assert isinstance(dynamodb, LeanDynamoDB)
    names = _create_tables(dynamodb, suffix)
    yield Store(name, dynamodb, streams, names["MessagesTableName"], names["QueuesTableName"])
    for table in names.values():
        dynamodb.delete_table(TableName=table)


def stream_counter(store: Store, counters: ShardCounters) -> Callable[[], None]:
    """A function that counts what the store's messages stream holds so far into
    `counters`, as the app's counting stream handler does (it reads the stream with the
    local server's pump)."""

    def handler(event: dict[str, Any], context: Any) -> None:
        counters.apply_records(event["Records"])

    pump = StreamPump(store.dynamodb, store.streams,
                      [StreamBinding(store.messages, handler, 500)], REGION)

    def run() -> None:
        for _ in range(20):
            if not pump.poll_once():
                return

    return run
