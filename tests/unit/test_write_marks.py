"""The local server knows when it last wrote to each region's store: every DynamoDB client
of the region is hooked, a write's answer (or any failed call) marks the region, a read
does not, and a client it had not hooked yet counts as a write just now."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from botocore.hooks import HierarchicalEmitter

from dmqlocal.write_marks import WriteMarks


def _client() -> Any:
    return SimpleNamespace(meta=SimpleNamespace(events=HierarchicalEmitter()))


def _answer(client: Any, operation: str) -> None:
    client.meta.events.emit(f"after-call.dynamodb.{operation}",
                            model=SimpleNamespace(name=operation), parsed={})


def test_writes_mark_their_region_and_reads_do_not() -> None:
    # GIVEN a region's client, hooked by a first look (which counts as a write now)
    client = _client()
    marks = WriteMarks(lambda region: [client])
    first = marks.last_write("us-east-1")
    assert first <= time.monotonic()
    # WHEN the client reads THEN the mark stays
    _answer(client, "GetItem")
    _answer(client, "Query")
    assert marks.last_write("us-east-1") == first
    # WHEN it writes THEN the mark moves on
    for operation in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                      "TransactWriteItems"):
        before = marks.last_write("us-east-1")
        time.sleep(0.001)
        _answer(client, operation)
        assert marks.last_write("us-east-1") > before


def test_a_failed_call_marks_its_region() -> None:
    client = _client()
    marks = WriteMarks(lambda region: [client])
    before = marks.last_write("us-east-1")
    time.sleep(0.001)
    client.meta.events.emit("after-call-error.dynamodb.GetItem", exception=OSError(),
                            context={})
    assert marks.last_write("us-east-1") > before


def test_regions_are_marked_apart() -> None:
    east, west = _client(), _client()
    marks = WriteMarks(lambda region: [east] if region == "us-east-1" else [west])
    marks.last_write("us-east-1")
    quiet = marks.last_write("us-west-2")
    time.sleep(0.001)
    _answer(east, "PutItem")
    assert marks.last_write("us-west-2") == quiet


def test_a_client_not_hooked_before_counts_as_a_write_now() -> None:
    # GIVEN a region whose backend is built again with a new client
    clients = [_client()]
    marks = WriteMarks(lambda region: clients)
    marks.last_write("us-east-1")
    _answer(clients[0], "GetItem")
    settled = marks.last_write("us-east-1")
    clients.append(_client())
    # WHEN the region is looked at THEN it counts as written just now
    time.sleep(0.001)
    assert marks.last_write("us-east-1") > settled


def test_a_region_whose_clients_cannot_be_listed_is_always_waited_for() -> None:
    def clients_of(region: str) -> list[Any]:
        raise RuntimeError("the region is down")

    assert WriteMarks(clients_of).last_write("us-east-1") == float("inf")
