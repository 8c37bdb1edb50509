"""GIVEN the real local server on DynamoDB Local, every store request it makes counted at a
proxy in front of the store WHEN messages are sent, received and deleted one per call,
then in batches of ten, each phase counted from a quiet server until it is quiet again
THEN a send makes one store request on its path (its conditional write), a receive of one
two (the index query and the claim) and a delete one (its conditional delete); a receive
of ten is the index query and one claim transaction (the index projects the messages);
and the counts the stream keeps cost far less than one request per message.

The batched lifecycle's target (0.45 billed requests per message, background included)
is printed by `python -m bench.request_cost` over 1,000 messages; here, with 30, its path
share is asserted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import floor
from bench.idle_cost import IdleServer
from bench.request_cost import (
    latency_table,
    measure_latency,
    measure_requests,
    request_checks,
    requests_table,
)

pytestmark = pytest.mark.e2e

MESSAGES = 30
IDLE_WINDOW_S = 3.0


@pytest.fixture
def counted_server() -> Iterator[IdleServer]:
    server = IdleServer(on_disk=True)
    try:
        yield server.start()
    finally:
        server.stop()


def test_store_requests_per_call_are_within_their_targets(
    counted_server: IdleServer,
) -> None:
    counts = measure_requests(counted_server, MESSAGES, IDLE_WINDOW_S)
    table = "\n".join(requests_table(counts))

    # Every phase moved every message and ended on a quiet server ...
    phases = (*counts.single, *counts.batched)
    assert all(phase.messages == MESSAGES for phase in phases), table
    assert all(phase.settled for phase in phases), table
    # ... and the stream pump's requests were counted with them.
    assert counts.send.by_operation.get("GetRecords", 0) >= 1, table

    over = [(figure, round(measured, 3), most)
            for figure, measured, most in request_checks(counts) if measured > most]
    assert not over, f"over target: {over}\n{table}"
    # The counts kept from the stream: one update per queue shard per batch of records
    # (a second's window), not one per message.
    updates = sum(p.by_operation.get("UpdateItem", 0) for p in (counts.send, counts.delete))
    assert updates <= 0.25 * (counts.send.messages + counts.delete.messages), table
    # In batches of ten: a transaction per send and per delete, and a receive is the
    # index query and the claim transaction, with no read-back of the claimed messages.
    receive = counts.receive_batch
    assert receive.by_operation.get("BatchGetItem", 0) == 0, table
    assert receive.path_requests <= 0.2 * receive.messages + 2, table
    path = sum(p.path_requests for p in counts.batched)
    assert path <= 0.4 * MESSAGES + 3, table


def test_single_calls_are_timed_through_the_lean_client_and_through_boto3(
    counted_server: IdleServer,
) -> None:
    # GIVEN DMQ on the store directly, and the floor's tables beside its own
    dmq = counted_server.start_dmq(counted=False)
    store = counted_server.store.endpoint
    floor.provision_tables(store)
    # WHEN a few rounds of single calls are timed
    pairs = measure_latency(dmq.url, store, rounds=12, blocks=2)
    table = "\n".join(latency_table(pairs))
    # THEN every call has its p50 through both clients, against its store call
    assert [p.store_call for p in pairs] == [
        floor.PUT_ITEM, "claim UpdateItem", "Query of one", floor.DELETE_ITEM], table
    for pair in pairs:
        assert pair.dmq.count == 12 and pair.store.count == 12, table
        assert pair.dmq_boto3 is not None and pair.dmq_boto3.count == 12, table
        assert pair.dmq.p50_ms > 0 and pair.store.p50_ms > 0, table
    assert "| SendMessage |" in table and "through boto3" in table
