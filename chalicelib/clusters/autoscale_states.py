"""What the shard autoscaler remembers of each queue, in the control table.

One item per queue, `autoscale#<queue id>`: the checks in a row over the target, since
when the queue has been quiet, its last split or merge, and whether an admin pinned its
shard count. Kept in the table (not in memory) because on AWS each scheduled check may
run in another Lambda instance. A check writes the item only when the state changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chalicelib.clusters.autoscale_rules import ScaleState
from chalicelib.dynamo_batches import get_all
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PREFIX = "autoscale#"


def _key(queue_id: str) -> dict[str, Any]:
    return {"key": {"S": f"{PREFIX}{queue_id}"}}


def _state(item: dict[str, Any]) -> ScaleState:
    below = item.get("below_since", {}).get("N")
    above_since = item.get("above_since", {}).get("N")
    return ScaleState(above=int(item.get("above", {}).get("N", "0")),
                      above_since_ms=int(above_since) if above_since is not None else None,
                      below_since_ms=int(below) if below is not None else None,
                      changed_ms=int(item.get("changed", {}).get("N", "0")),
                      pinned=bool(item.get("pinned", {}).get("BOOL", False)))


class AutoscaleStates:
    """Reads and writes the autoscaler's per-queue state."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def get_many(self, queue_ids: Sequence[str]) -> dict[str, ScaleState]:
        """Every queue's state (the initial state where none is stored): one BatchGetItem
        per hundred queues."""
        found = get_all(self._db, self._table, [_key(q) for q in queue_ids], consistent=False)
        stored = {str(i["key"]["S"])[len(PREFIX):]: _state(i) for i in found}
        return {q: stored.get(q, ScaleState()) for q in queue_ids}

    def get(self, queue_id: str) -> ScaleState:
        """One queue's state."""
        return self.get_many([queue_id])[queue_id]

    def put(self, queue_id: str, state: ScaleState) -> None:
        """Store a queue's state (an admin's pin set meanwhile is kept: it is only ever
        changed by `pin`)."""
        values: dict[str, Any] = {":above": {"N": str(state.above)},
                                  ":changed": {"N": str(state.changed_ms)}}
        update = "SET above = :above, changed = :changed"
        removed = []
        for name, value in (("below_since", state.below_since_ms),
                            ("above_since", state.above_since_ms)):
            if value is None:
                removed.append(name)
            else:
                update += f", {name} = :{name}"
                values[f":{name}"] = {"N": str(value)}
        if removed:
            update += " REMOVE " + ", ".join(removed)
        with translate_errors():
            self._db.update_item(TableName=self._table, Key=_key(queue_id),
                                 UpdateExpression=update, ExpressionAttributeValues=values)

    def pin(self, queue_id: str, pinned: bool) -> None:
        """Pin a queue's shard count (an admin set it), or hand it back to the autoscaler
        (which then starts afresh)."""
        with translate_errors():
            if pinned:
                self._db.update_item(TableName=self._table, Key=_key(queue_id),
                                     UpdateExpression="SET pinned = :yes",
                                     ExpressionAttributeValues={":yes": {"BOOL": True}})
            else:
                self._db.delete_item(TableName=self._table, Key=_key(queue_id))
