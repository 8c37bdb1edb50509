"""Pending purges in the control table (`domain.purges`), so that a removal outlives any
process. Two kinds of item, none read by a scan:
- `purge#<queue id>#<cutoff>`: one purge or deletion (queue, cutoff, kind, each shard's
  progress, the queue's counts at the cutoff, and how many messages it removed so far,
  by count);
- `purges#pending`: the string set `ids` of the purges still to run.

Recording a purge is one transaction over both; so is finishing one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalicelib.domain.messages import Counts
from chalicelib.domain.purges import PendingPurge, PurgeKind, shards_from_json, shards_to_json
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PENDING_KEY = "purges#pending"


def _key(purge_id: str) -> dict[str, Any]:
    return {"key": {"S": f"purge#{purge_id}"}}


def _to_item(purge: PendingPurge) -> dict[str, Any]:
    return {
        **_key(purge.purge_id),
        "queue_id": {"S": purge.queue_id},
        "cutoff": {"N": str(purge.cutoff_ms)},
        "kind": {"S": purge.kind.value},
        "fifo": {"BOOL": purge.fifo},
        "shards": {"S": shards_to_json(purge.shards)},
        "removed": {"N": str(purge.removed)},
        "rv": {"N": str(purge.taken.visible)},
        "rf": {"N": str(purge.taken.in_flight)},
        "rd": {"N": str(purge.taken.delayed)},
        "pv": {"N": str(purge.present.visible)},
        "pf": {"N": str(purge.present.in_flight)},
        "pd": {"N": str(purge.present.delayed)},
    }


def _number(item: dict[str, Any], name: str) -> int:
    return int(item.get(name, {}).get("N", "0"))


def _from_item(item: dict[str, Any]) -> PendingPurge:
    return PendingPurge(
        queue_id=str(item["queue_id"]["S"]), cutoff_ms=int(item["cutoff"]["N"]),
        kind=PurgeKind(str(item["kind"]["S"])), fifo=bool(item["fifo"]["BOOL"]),
        shards=shards_from_json(str(item["shards"]["S"])),
        # A purge saved by a version that kept only a total: all it took counts as visible.
        taken=Counts(_number(item, "rv" if "rv" in item else "removed"),
                     _number(item, "rf"), _number(item, "rd")),
        present=Counts(_number(item, "pv"), _number(item, "pf"), _number(item, "pd")),
    )


class PurgeRepository:
    """Pending purges of one region's control table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def add(self, purge: PendingPurge) -> None:
        """Record a purge and list it as pending, in one transaction."""
        transact_write(self._db, [
            {"Put": {"TableName": self._table, "Item": _to_item(purge)}},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": PENDING_KEY}},
                        "UpdateExpression": "ADD ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [purge.purge_id]}}}},
        ])

    def pending(self) -> list[PendingPurge]:
        """The purges still to run, oldest cutoff first: one GetItem, and one
        BatchGetItem when there are any."""
        with translate_errors():
            listed = self._db.get_item(TableName=self._table, Key={"key": {"S": PENDING_KEY}},
                                       ConsistentRead=True).get("Item", {})
        ids = sorted(listed.get("ids", {}).get("SS", []))
        if not ids:
            return []
        found = [_from_item(i) for i in get_all(self._db, self._table, [_key(i) for i in ids])]
        missing = set(ids) - {p.purge_id for p in found}
        if missing:  # listed but never written (nothing to run): unlist them
            self._unlist(sorted(missing))
        return sorted(found, key=lambda p: (p.cutoff_ms, p.queue_id))

    def get_many(self, purge_ids: list[str]) -> dict[str, PendingPurge]:
        """The purges of these ids still pending, by id: one consistent BatchGetItem a
        hundred ids (a purge is written before its queue is marked, so a queue's mark
        always finds its purge or finds it finished)."""
        found = get_all(self._db, self._table, [_key(i) for i in purge_ids]) \
            if purge_ids else []
        return {p.purge_id: p for p in map(_from_item, found)}

    def save(self, purge: PendingPurge) -> None:
        """Keep a purge's progress."""
        with translate_errors():
            self._db.put_item(TableName=self._table, Item=_to_item(purge))

    def finish(self, purge: PendingPurge) -> None:
        """Remove a purge that is done (or void), and unlist it, in one transaction."""
        transact_write(self._db, [
            {"Delete": {"TableName": self._table, "Key": _key(purge.purge_id)}},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": PENDING_KEY}},
                        "UpdateExpression": "DELETE ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [purge.purge_id]}}}},
        ])

    def _unlist(self, ids: list[str]) -> None:
        with translate_errors():
            self._db.update_item(TableName=self._table, Key={"key": {"S": PENDING_KEY}},
                                 UpdateExpression="DELETE ids :ids",
                                 ExpressionAttributeValues={":ids": {"SS": ids}})
