"""GIVEN a rejoining old home whose copy of a queue shard differs from the new home's
WHEN the resync replaces it and the store hands writes back unprocessed
THEN nothing is deleted before its replacement is confirmed written, a write that never
goes through fails the resync (which stays pending) instead of being dropped, and no
message the copy keeps is removed (a removal would release its body)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.aws import Clients
from chalicelib.domain.exceptions import StoreError
from chalicelib.regions import resync
from chalicelib.regions.replica import TOMB
from chalicelib.regions.resync import resync_partition
from chalicelib.settings import Settings
from infra import provision
from tests.functional.test_faults import Faults, every

HOME, REJOINING = "us-east-1", "eu-west-1"
TABLE = "dmq-messages"
PK = "000000000000/q#0"


@pytest.fixture
def settings() -> Settings:
    return Settings(regions=(HOME, REJOINING), hosted_regions=(HOME, REJOINING))


@pytest.fixture
def regions(aws: Clients, settings: Settings) -> dict[str, Any]:
    rejoining = Clients(settings, REJOINING)
    provision.create_all(rejoining.dynamodb, rejoining.s3, region=REJOINING)
    return {HOME: aws.dynamodb, REJOINING: rejoining.dynamodb}


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    pauses: list[float] = []
    monkeypatch.setattr(resync, "_pause", pauses.append, raising=False)
    yield pauses


def _item(message_id: str, **extra: str) -> dict[str, Any]:
    item = {"pk": {"S": PK}, "sk": {"S": message_id}, "visible_at": {"N": "0"},
            "body": {"S": f"body of {message_id}"}}
    item.update({k: {"S": v} for k, v in extra.items()})
    return item


def _tombstone(message_id: str) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": message_id}, TOMB: {"N": "1"}}


def _fill(client: Any, items: list[dict[str, Any]]) -> None:
    for item in items:
        client.put_item(TableName=TABLE, Item=item)


def _ids(client: Any) -> set[str]:
    items = client.query(TableName=TABLE, KeyConditionExpression="pk = :pk",
                         ExpressionAttributeValues={":pk": {"S": PK}})["Items"]
    return {str(i["sk"]["S"]) for i in items}


def _shards(regions: dict[str, Any]) -> None:
    # GIVEN the home holds m1..m30 (m1..m20 large, their bodies in S3), the rejoining
    # region m1..m20 (shared), tombstones s1..s5 (of messages the home no longer holds)
    # and o1..o3 (orphans its async replication never shipped: they are recovered)
    _fill(regions[HOME], [_item(f"m{i}", body_key=f"bodies/q/m{i}") for i in range(1, 21)]
          + [_item(f"m{i}") for i in range(21, 31)])
    _fill(regions[REJOINING], [_item(f"m{i}", body_key=f"bodies/q/m{i}") for i in range(1, 21)]
          + [_tombstone(f"s{i}") for i in range(1, 6)] + [_item(f"o{i}") for i in range(1, 4)])


def _writes(client: Any) -> list[dict[str, Any]]:
    """Every batch write request the client sends, as sent."""
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **kwargs: Any) -> None:
        seen.extend(params["RequestItems"][TABLE])

    client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", record)
    return seen


def test_resync_removes_only_what_the_home_no_longer_holds(regions: dict[str, Any]) -> None:
    _shards(regions)
    writes = _writes(regions[REJOINING])
    # WHEN the rejoining region resyncs
    result = resync_partition(regions[HOME], regions[REJOINING], TABLE, PK)
    # THEN both hold the home's messages and the orphans
    expected = {f"m{i}" for i in range(1, 31)} | {"o1", "o2", "o3"}
    assert _ids(regions[HOME]) == _ids(regions[REJOINING]) == expected
    assert result.recovered == 3 and result.removed == 5
    # AND only messages the home does not hold were removed from the rejoining region:
    # a message it keeps is overwritten in place, so its S3 body is never released
    deleted = {str(w["DeleteRequest"]["Key"]["sk"]["S"]) for w in writes if "DeleteRequest" in w}
    assert deleted == {f"s{i}" for i in range(1, 6)}
    # AND the puts came before the deletes
    kinds = [next(iter(w)) for w in writes]
    assert kinds.index("DeleteRequest") > max(i for i, k in enumerate(kinds) if k == "PutRequest")


def test_unprocessed_writes_are_retried_with_backoff(
    regions: dict[str, Any], _no_pauses: list[float],
) -> None:
    _shards(regions)
    faults = Faults(regions[REJOINING])
    # GIVEN a store that hands every other batch back unprocessed, half of it
    flip = [False]

    def half(request: dict[str, Any]) -> bool:
        flip[0] = not flip[0]
        return flip[0]

    faults.hold = half
    faults.add("BatchWriteItem", every(2, "unprocessed"))
    # WHEN the rejoining region resyncs
    resync_partition(regions[HOME], regions[REJOINING], TABLE, PK)
    # THEN everything lands after a pause before each retry (jittered: separate batches
    # start their backoff afresh, so pauses are bounded, not ordered)
    assert _ids(regions[REJOINING]) == {f"m{i}" for i in range(1, 31)} | {"o1", "o2", "o3"}
    assert faults.count() > 0 and len(_no_pauses) == faults.count()
    assert all(resync.FIRST_PAUSE_S / 2 <= p <= resync.MAX_PAUSE_S for p in _no_pauses)


def test_writes_that_never_go_through_fail_the_resync_and_delete_nothing(
    regions: dict[str, Any],
) -> None:
    _shards(regions)
    before = _ids(regions[REJOINING])
    faults = Faults(regions[REJOINING])
    # GIVEN a rejoining region whose store hands every batch write back unprocessed
    faults.add("BatchWriteItem", lambda call, request: "unprocessed")
    # WHEN it resyncs
    with pytest.raises(StoreError):
        resync_partition(regions[HOME], regions[REJOINING], TABLE, PK)
    # THEN it still holds every message it had (nothing was dropped or deleted)
    assert _ids(regions[REJOINING]) == before
    # AND the orphans are safe at the home
    assert {"o1", "o2", "o3"} <= _ids(regions[HOME])
