"""Message move tasks in the control table, so that they outlive any process.

Three kinds of item, none read by a scan:
- `movetask#<task id>`: one task (its source, destination, rate, status, counts, times);
- `movetasks#<source ARN>`: a source's newest task ids (at most 10, newest first), the id
  of its active task (`active`, absent when none) and a version `v` for optimistic locking;
- `movetasks#running`: the string set `ids` of the tasks the back end still has to run.

Starting a task is one transaction over all three, conditional on the source having no
active task and its list being unchanged since it was read: two concurrent starts cannot
both win. A task that falls off the end of its source's list is deleted in the same
transaction, so a source never holds more than 10 task items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import ConditionFailedError, TransactionCancelledError
from chalicelib.domain.move_tasks import KEPT_PER_SOURCE, MoveTask, MoveTaskStatus
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import lost_race, translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

RUNNING_KEY = "movetasks#running"


class SourceBusyError(Exception):
    """The source already has an active task (or another start won the race)."""


def _task_key(task_id: str) -> dict[str, Any]:
    return {"key": {"S": f"movetask#{task_id}"}}


def _source_key(source_arn: str) -> dict[str, Any]:
    return {"key": {"S": f"movetasks#{source_arn}"}}


def _to_item(task: MoveTask) -> dict[str, Any]:
    item: dict[str, Any] = {
        **_task_key(task.task_id),
        "task_id": {"S": task.task_id},
        "source_arn": {"S": task.source_arn},
        "status": {"S": task.status.value},
        "started_ms": {"N": str(task.started_ms)},
        "to_move": {"N": str(task.to_move)},
        "moved": {"N": str(task.moved)},
        "paced_ms": {"N": str(task.paced_ms)},
    }
    if task.destination_arn:
        item["destination_arn"] = {"S": task.destination_arn}
    if task.max_per_second is not None:
        item["rate"] = {"N": str(task.max_per_second)}
    if task.failure_reason:
        item["failure"] = {"S": task.failure_reason}
    return item


def _from_item(item: dict[str, Any]) -> MoveTask:
    def text(name: str) -> str | None:
        return str(item[name]["S"]) if name in item else None

    def number(name: str) -> int:
        return int(item[name]["N"]) if name in item else 0

    return MoveTask(
        task_id=str(item["task_id"]["S"]), source_arn=str(item["source_arn"]["S"]),
        destination_arn=text("destination_arn"),
        max_per_second=int(item["rate"]["N"]) if "rate" in item else None,
        status=MoveTaskStatus(str(item["status"]["S"])), started_ms=number("started_ms"),
        to_move=number("to_move"), moved=number("moved"), failure_reason=text("failure"),
        paced_ms=number("paced_ms"),
    )


class MoveTaskRepository:
    """Reads and writes move tasks in one region's control table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    # -- reads ---------------------------------------------------------------------------
    def get(self, task_id: str) -> MoveTask | None:
        """One task, read consistently, or None."""
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key=_task_key(task_id),
                                     ConsistentRead=True).get("Item")
        return _from_item(dict(item)) if item else None

    def recent(self, source_arn: str, limit: int) -> list[MoveTask]:
        """A source's newest tasks, newest first (one GetItem, one BatchGetItem)."""
        ids, _active, _version = self._source(source_arn)
        return self._many(ids[:limit])

    def active(self, source_arn: str) -> str | None:
        """The id of the source's active task, or None."""
        return self._source(source_arn)[1]

    def running(self) -> list[MoveTask]:
        """Every task the back end still has to run (one GetItem, then batch reads)."""
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key={"key": {"S": RUNNING_KEY}},
                                     ConsistentRead=True).get("Item") or {}
        return self._many(sorted(item.get("ids", {}).get("SS", [])))

    def _source(self, source_arn: str) -> tuple[list[str], str | None, int]:
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key=_source_key(source_arn),
                                     ConsistentRead=True).get("Item") or {}
        ids = [str(v["S"]) for v in item.get("recent", {}).get("L", [])]
        active = str(item["active"]["S"]) if "active" in item else None
        return ids, active, int(item["v"]["N"]) if "v" in item else 0

    def _many(self, task_ids: Sequence[str]) -> list[MoveTask]:
        tasks = (_from_item(item) for item in
                 get_all(self._db, self._table, [_task_key(t) for t in task_ids]))
        found = {task.task_id: task for task in tasks}
        return [found[t] for t in task_ids if t in found]

    # -- writes --------------------------------------------------------------------------
    def start(self, task: MoveTask) -> None:
        """Record a new running task; SourceBusyError when its source has an active one
        or another start changed the source's list first."""
        ids, active, version = self._source(task.source_arn)
        if active is not None:
            raise SourceBusyError(active)
        kept = [task.task_id, *ids][:KEPT_PER_SOURCE]
        dropped = [t for t in ids if t not in kept]
        source_update: dict[str, Any] = {
            "TableName": self._table, "Key": _source_key(task.source_arn),
            "UpdateExpression": "SET recent = :recent, active = :id, v = :next",
            "ConditionExpression": "attribute_not_exists(active) AND "
                                   "(attribute_not_exists(v) OR v = :v)",
            "ExpressionAttributeValues": {
                ":recent": {"L": [{"S": t} for t in kept]}, ":id": {"S": task.task_id},
                ":next": {"N": str(version + 1)}, ":v": {"N": str(version)},
            },
        }
        ops: list[dict[str, Any]] = [
            {"Put": {"TableName": self._table, "Item": _to_item(task),
                     "ConditionExpression": "attribute_not_exists(#k)",
                     "ExpressionAttributeNames": {"#k": "key"}}},
            {"Update": source_update},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": RUNNING_KEY}},
                        "UpdateExpression": "ADD ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [task.task_id]}}}},
            *({"Delete": {"TableName": self._table, "Key": _task_key(t)}} for t in dropped),
        ]
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError as exc:
            if lost_race(exc):
                raise SourceBusyError(task.source_arn) from exc
            raise

    def progress_op(self, task: MoveTask, moved: int, paced_ms: int) -> dict[str, Any]:
        """The transaction item that counts `moved` more messages for a task, conditional
        on the task still running (a cancel makes the moves that carry it fail)."""
        return {"Update": {
            "TableName": self._table, "Key": _task_key(task.task_id),
            "UpdateExpression": "ADD moved :n SET paced_ms = :p",
            "ConditionExpression": "#s = :running",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":n": {"N": str(moved)}, ":p": {"N": str(paced_ms)},
                                          ":running": {"S": MoveTaskStatus.RUNNING.value}},
        }}

    def add_progress(self, task: MoveTask, moved: int, paced_ms: int) -> bool:
        """`progress_op` as a write of its own, for moves that cannot share its transaction
        (a cluster in a store of its own); False when the task is no longer running."""
        try:
            with translate_errors():
                self._db.update_item(**self.progress_op(task, moved, paced_ms)["Update"])
        except ConditionFailedError:
            return False
        return True

    def cancel(self, task_id: str) -> MoveTask | None:
        """RUNNING to CANCELLING; the task as it now stands, or None if it was not running."""
        try:
            with translate_errors():
                result = self._db.update_item(
                    TableName=self._table, Key=_task_key(task_id),
                    UpdateExpression="SET #s = :cancelling", ConditionExpression="#s = :running",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={
                        ":cancelling": {"S": MoveTaskStatus.CANCELLING.value},
                        ":running": {"S": MoveTaskStatus.RUNNING.value}},
                    ReturnValues="ALL_NEW",
                )
        except ConditionFailedError:
            return None
        return _from_item(dict(result["Attributes"]))

    def finish(self, task: MoveTask, status: MoveTaskStatus, failure: str | None = None) -> bool:
        """End an active task: its final status, its source free again, off the running
        set, all in one transaction. False when another runner ended it first."""
        values: dict[str, Any] = {
            ":final": {"S": status.value}, ":running": {"S": MoveTaskStatus.RUNNING.value},
            ":cancelling": {"S": MoveTaskStatus.CANCELLING.value},
        }
        update = "SET #s = :final"
        if failure:
            update += ", failure = :why"
            values[":why"] = {"S": failure}
        ops: list[dict[str, Any]] = [
            {"Update": {"TableName": self._table, "Key": _task_key(task.task_id),
                        "UpdateExpression": update,
                        "ConditionExpression": "#s IN (:running, :cancelling)",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": values}},
            {"Update": {"TableName": self._table, "Key": _source_key(task.source_arn),
                        "UpdateExpression": "REMOVE active",
                        "ConditionExpression": "active = :id",
                        "ExpressionAttributeValues": {":id": {"S": task.task_id}}}},
            {"Update": {"TableName": self._table, "Key": {"key": {"S": RUNNING_KEY}},
                        "UpdateExpression": "DELETE ids :id",
                        "ExpressionAttributeValues": {":id": {"SS": [task.task_id]}}}},
        ]
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError as exc:
            if lost_race(exc):
                return False
            raise
        return True
