"""GIVEN the queue registry of one process and another process's registry over the same
tables WHEN the first reads a queue's record again and again THEN past its time-to-live it
reads only the catalogue's version (at most once per check interval), not the record, for
as long as no queue record was written; a write through the other registry (which moves
the version) is seen at the next read; without a control table every read past the
time-to-live goes to the store, as before."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.endpoint import Endpoint

from chalicelib.aws import Clients
from chalicelib.domain.queues import QueueRecord, QueueStatus, Shard
from chalicelib.metadata.repository import KEPT_MAX_S, QueueRepository
from chalicelib.settings import Settings

Q = "000000000000/cached"
TTL_S = 0.05  # each read below comes past it


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """GetItems by table, counted where they leave botocore (every client)."""
    counted: Counter[str] = Counter()
    original = Endpoint.make_request

    def make_request(self: Endpoint, operation_model: Any, request_dict: Any) -> Any:
        if operation_model.name == "GetItem":
            counted[str(request_dict["body"]).split('"TableName": "')[-1].split('"')[0]] += 1
        return original(self, operation_model, request_dict)

    monkeypatch.setattr(Endpoint, "make_request", make_request)
    yield counted


def _repo(settings: Settings, cache_seconds: float) -> QueueRepository:
    return QueueRepository(settings.queues_table, settings.region, settings.dynamodb_endpoint,
                           cache_seconds, counts_table=settings.control_table,
                           keep_s=KEPT_MAX_S)


def _later(read: Any, queue_id: str) -> QueueRecord | None:
    """A read past the time-to-live of what was read before."""
    time.sleep(TTL_S * 1.5)
    return read(queue_id)  # type: ignore[no-any-return]


def _record(name: str = "cached", retention: str = "345600") -> QueueRecord:
    return QueueRecord(account="000000000000", name=name, region="us-east-1",
                       attributes={"MessageRetentionPeriod": retention}, tags={},
                       created_ms=1, modified_ms=1, shards=(Shard(0),),
                       status=QueueStatus.ACTIVE)


def test_a_record_past_its_time_is_kept_while_no_queue_record_was_written(
        aws: Clients, settings: Settings, reads: Counter[str]) -> None:
    here, elsewhere = _repo(settings, TTL_S), _repo(settings, 0.0)
    saved = elsewhere.save(_record())
    # WHEN this process reads the record four times, each past its time-to-live
    before = Counter(reads)
    got = [_later(here.get, Q) for _ in range(4)]
    # THEN the record is read from the store twice (the second read learns the version it
    # is kept under); each read past its time costs a version read
    assert [g.attributes["MessageRetentionPeriod"] for g in got if g] == ["345600"] * 4
    spent = reads - before
    assert spent[settings.queues_table] == 2, spent
    assert spent[settings.control_table] == 3, spent
    # WHEN the other process changes the record (which moves the catalogue's version)
    elsewhere.save(saved.with_changes(attributes={"MessageRetentionPeriod": "60"}))
    # THEN the next read here goes to the store and sees the change
    again = _later(here.get, Q)
    assert again is not None and again.attributes["MessageRetentionPeriod"] == "60"
    assert (reads - before)[settings.queues_table] == 3
    # AND a record made elsewhere is found at once (a miss is never kept)
    assert here.get("000000000000/later") is None
    elsewhere.save(_record("later"))
    assert here.get("000000000000/later") is not None


@pytest.mark.parametrize(("ttl_s", "control", "keep_s", "later", "reads_of"), [
    # without a control table (no version to keep a record under): each read past its time
    (TTL_S, False, KEPT_MAX_S, True, (3, 0)),
    # within its time-to-live: no read at all after the first (which reads no version)
    (60.0, True, KEPT_MAX_S, False, (1, 0)),
    # a time-to-live of 0 keeps nothing
    (0.0, True, KEPT_MAX_S, False, (3, 0)),
    # on Lambda (keep_s 0) each read past its time goes to the store
    (TTL_S, True, 0.0, True, (3, 0)),
], ids=["no-control-table", "within-its-time", "ttl-zero", "lambda"])
def test_what_each_read_costs_where_records_are_not_kept_past_their_time(
        aws: Clients, settings: Settings, reads: Counter[str], ttl_s: float, control: bool,
        keep_s: float, later: bool, reads_of: tuple[int, int]) -> None:
    here = QueueRepository(settings.queues_table, settings.region, settings.dynamodb_endpoint,
                           ttl_s, counts_table=settings.control_table if control else None,
                           keep_s=keep_s)
    _repo(settings, 0.0).save(_record())
    before = Counter(reads)
    assert all((_later(here.get, Q) if later else here.get(Q)) is not None for _ in range(3))
    spent = reads - before
    assert (spent[settings.queues_table], spent[settings.control_table]) == reads_of, spent
