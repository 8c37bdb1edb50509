"""The DynamoDB FIFO store's receive side: ready groups from the index, a group's head,
claims of whole groups in one TransactWriteItems, receive-attempt records, and the head's
removal or move to a dead-letter queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chalicelib.backend import items
from chalicelib.backend.items import VISIBLE_INDEX, Item
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    TransactionCancelledError,
)
from chalicelib.domain.messages import Message, MessageRef
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import translate_errors
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.dynamo_base import n_attr, s_attr
from chalicelib.fifo.dynamo_sends import FifoSends
from chalicelib.fifo.store import FifoEntry, GroupState


class FifoClaims(FifoSends):
    """Reading and claiming groups."""

    def ready_groups(self, queue_id: str, shard: int, now_ms: int, limit: int) -> list[GroupState]:
        """Groups whose `visible_at` has come, oldest first (the visibility index)."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, IndexName=VISIBLE_INDEX,
                KeyConditionExpression="pk = :pk AND visible_at <= :now",
                ExpressionAttributeValues={":pk": s_attr(items.partition_key(queue_id, shard)),
                                           ":now": n_attr(now_ms)},
                ProjectionExpression="sk, visible_at, claim", Limit=limit,
            )
        return [self._group_state(shard, item) for item in result.get("Items", [])]

    def first_visible_at(self, queue_id: str, shard: int, until_ms: int) -> int | None:
        """The earliest `visible_at` of the shard's groups, if one is before `until_ms`
        (one index entry read)."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, IndexName=VISIBLE_INDEX, Limit=1,
                KeyConditionExpression="pk = :pk AND visible_at < :until",
                ExpressionAttributeValues={":pk": s_attr(items.partition_key(queue_id, shard)),
                                           ":until": n_attr(until_ms)},
                ProjectionExpression="visible_at",
            )
        found = result.get("Items", [])
        return int(found[0]["visible_at"]["N"]) if found else None

    @staticmethod
    def _group_state(shard: int, item: Item) -> GroupState:
        return GroupState(shard, fifo.group_of_key(str(item["sk"]["S"])),
                          int(item["visible_at"]["N"]),
                          fifo.claim_place(str(item.get("claim", {}).get("S", ""))))

    def head(self, queue_id: str, shard: int, group: str, limit: int) -> list[FifoEntry]:
        """The first `limit` messages of a group, in sequence order (consistent read)."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, ConsistentRead=True, Limit=limit,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": s_attr(items.partition_key(queue_id, shard)),
                                           ":prefix": s_attr(fifo.message_prefix(group))},
            )
        return [self.entry(item) for item in result.get("Items", [])]

    def entry(self, item: Item) -> FifoEntry:
        """The FifoEntry of a message item (bodies kept in S3 are loaded)."""
        loaded = self._base.load(item)
        message = loaded.with_changes(
            message_id=str(item["mid"]["S"]), group_id=str(item["group"]["S"]),
            dedup_id=str(item.get("ddid", {}).get("S", "")) or None,
            sequence_number=str(item["gseq"]["S"]), visible_at=int(item["va"]["N"]),
        )
        return FifoEntry(items.shard_of(item), str(item["sk"]["S"]), message,
                         int(item.get("until", {}).get("N", "0")), int(item["va"]["N"]))

    def claim(
        self, queue_id: str, plans: Sequence[tuple[GroupState, Sequence[FifoEntry], str]],
        until: int, now_ms: int, attempt: tuple[str, str, bool] | None = None,
    ) -> list[int]:
        """Hold groups of one shard and claim their first messages, all in one transaction;
        returns the indexes of the plans claimed. A group another receiver took first (or
        whose message went meanwhile) drops out and the rest go again."""
        pending = list(range(len(plans)))
        for _ in range(3):
            if not pending:
                return []
            ops: list[dict[str, Any]] = []
            owners: list[int | None] = []
            for index in pending:
                group, entries, token = plans[index]
                group_ops = self._claim_ops(queue_id, group, entries, until, token, now_ms)
                ops += group_ops
                owners += [index] * len(group_ops)
            if attempt is not None:
                claimed = [(e, plans[i][2]) for i in pending for e in plans[i][1]]
                ops.append(self._attempt_op(queue_id, attempt, plans[pending[0]][0].shard,
                                            claimed, now_ms))
                owners.append(None)
            try:
                transact_write(self._db, ops)
            except TransactionCancelledError as exc:
                lost = {owner for owner, reason in zip(owners, exc.reasons, strict=False)
                        if reason.get("Code") not in ("None", "", None)}
                if None in lost:
                    return []  # the attempt id is another receive's
                pending = [i for i in pending if i not in lost]
                continue
            return pending
        return []

    def _claim_ops(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry],
                   until: int, token: str, now_ms: int) -> list[dict[str, Any]]:
        pk = items.partition_key(queue_id, group.shard)
        ops: list[dict[str, Any]] = [{"Update": {
            "TableName": self.table, "Key": self._key(pk, fifo.group_key(group.group)),
            "UpdateExpression": "SET visible_at = :until, claim = :tok, ifl = :ifl, rc = :held",
            "ConditionExpression": "visible_at = :seen",
            "ExpressionAttributeValues": {
                ":until": n_attr(until), ":tok": s_attr(token), ":seen": n_attr(group.visible_at),
                ":ifl": {"SS": [e.sort_key for e in entries]}, ":held": n_attr(len(entries)),
            },
        }}]
        for entry in entries:
            ops.append({"Update": {
                "TableName": self.table, "Key": self._key(pk, entry.sort_key),
                "UpdateExpression": "SET claim = :tok, #until = :until, rc = rc + :one, "
                                    "rcv = :now, frc = if_not_exists(frc, :now)",
                "ConditionExpression": "attribute_exists(sk) AND #until <= :now",
                "ExpressionAttributeNames": {"#until": "until"},
                "ExpressionAttributeValues": {":tok": s_attr(token), ":until": n_attr(until),
                                              ":one": n_attr(1), ":now": n_attr(now_ms)},
            }})
        return ops

    def set_group_visible_at(self, queue_id: str, group: GroupState, visible_at: int) -> None:
        """Move a group's `visible_at` (its head is delayed), if nobody moved it first."""
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self.table,
                    Key=self._key(items.partition_key(queue_id, group.shard),
                                  fifo.group_key(group.group)),
                    UpdateExpression="SET visible_at = :vis",
                    ConditionExpression="visible_at = :seen",
                    ExpressionAttributeValues={":vis": n_attr(visible_at),
                                               ":seen": n_attr(group.visible_at)})
        except ConditionFailedError:
            return

    def drop_group(self, queue_id: str, group: GroupState) -> None:
        """Delete the item of a group found empty (its messages expired and went by TTL),
        unless a send added to it since: its `last` sequence number is read first."""
        key = self._key(items.partition_key(queue_id, group.shard), fifo.group_key(group.group))
        with translate_errors():
            found = self._db.get_item(TableName=self.table, Key=key, ConsistentRead=True)
        item = found.get("Item")
        if not item or "last" not in item:
            return
        try:
            with translate_errors():
                self._db.delete_item(
                    TableName=self.table, Key=key,
                    ConditionExpression="visible_at = :seen AND #last = :last",
                    ExpressionAttributeNames={"#last": "last"},
                    ExpressionAttributeValues={":seen": n_attr(group.visible_at),
                                               ":last": item["last"]})
        except ConditionFailedError:
            return

    def remove_head(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry]) -> bool:
        """Delete messages at the head of an unheld group (expired ones), one transaction."""
        pk = items.partition_key(queue_id, group.shard)
        ops: list[dict[str, Any]] = [{"Update": {
            "TableName": self.table, "Key": self._key(pk, fifo.group_key(group.group)),
            "UpdateExpression": "ADD n :minus", "ConditionExpression": "visible_at = :seen",
            "ExpressionAttributeValues": {":seen": n_attr(group.visible_at),
                                          ":minus": n_attr(-len(entries))}}}]
        ops += [{"Delete": {"TableName": self.table, "Key": self._key(pk, e.sort_key)}}
                for e in entries]
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError:
            return False
        return True

    def move(
        self, queue_id: str, group: GroupState, entry: FifoEntry, target_queue_id: str,
        target_shard: int, moved: Message, target_seed_ms: int = 0,
    ) -> bool:
        """Move the head message of an unheld group to a FIFO dead-letter queue: delete it
        here and append it to its group in the target, one transaction. The target keeps
        the message id, group and dedup id; it takes the target shard's next number."""
        pk = items.partition_key(queue_id, group.shard)
        number = self.reserve(target_queue_id, target_shard, 1, target_seed_ms)
        sequence = fifo.sequence_number(number)
        copy = moved.with_changes(sequence_number=sequence)
        ops: list[dict[str, Any]] = [
            {"Update": {
                "TableName": self.table, "Key": self._key(pk, fifo.group_key(group.group)),
                "UpdateExpression": "ADD n :minus",
                "ConditionExpression": "visible_at = :seen",
                "ExpressionAttributeValues": {":seen": n_attr(group.visible_at),
                                              ":minus": n_attr(-1)}}},
            {"Delete": {"TableName": self.table, "Key": self._key(pk, entry.sort_key),
                        "ConditionExpression": "attribute_exists(sk)"}},
            {"Put": {"TableName": self.table,
                     "Item": self._message_item(target_queue_id, target_shard, copy)}},
            self._group_append(target_queue_id, target_shard, copy.group_id or "", [copy]),
        ]
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError:
            self.forget_blocks(target_queue_id, [target_shard])
            return False
        return True

    # -- receive attempts ---------------------------------------------------------------
    def _attempt_key(self, queue_id: str, attempt_id: str) -> Item:
        return self._key(f"{queue_id}#attempt", f"a#{attempt_id}")

    def _attempt_op(
        self, queue_id: str, attempt: tuple[str, str, bool], shard: int,
        entries: Sequence[tuple[FifoEntry, str]], now_ms: int,
    ) -> dict[str, Any]:
        """Record claimed messages under a receive attempt id: the receive's first claim
        creates the record (unless a live one exists), its later claims append to it
        (`rid` names the receive that owns the record)."""
        attempt_id, receive_id, first = attempt
        key = self._attempt_key(queue_id, attempt_id)
        refs = [{"L": [n_attr(shard), s_attr(e.sort_key), s_attr(token)]} for e, token in entries]
        if first:
            expires = now_ms + fifo.ATTEMPT_WINDOW_MS
            return {"Put": {
                "TableName": self.table,
                "Item": {**key, "refs": {"L": refs}, "rid": s_attr(receive_id),
                         "exp_ms": n_attr(expires), "expires_at": n_attr(expires // 1000 + 1)},
                "ConditionExpression": "attribute_not_exists(sk) OR exp_ms <= :now",
                "ExpressionAttributeValues": {":now": n_attr(now_ms)}}}
        return {"Update": {
            "TableName": self.table, "Key": key,
            "UpdateExpression": "SET refs = list_append(refs, :refs)",
            "ConditionExpression": "rid = :rid",
            "ExpressionAttributeValues": {":refs": {"L": refs}, ":rid": s_attr(receive_id)}}}

    def attempt(self, queue_id: str, attempt_id: str, now_ms: int) -> list[MessageRef] | None:
        """The claims a live receive attempt made, or None."""
        with translate_errors():
            found = self._db.get_item(TableName=self.table, ConsistentRead=True,
                                      Key=self._attempt_key(queue_id, attempt_id))
        item = found.get("Item")
        if not item or int(item["exp_ms"]["N"]) <= now_ms:
            return None
        return [MessageRef(queue_id, int(r["L"][0]["N"]), str(r["L"][1]["S"]),
                           str(r["L"][2]["S"])) for r in item.get("refs", {}).get("L", [])]

    def read(self, refs: Sequence[MessageRef]) -> list[FifoEntry]:
        """The message items of these refs still there, in the order given (one batch read;
        StoreThrottledError when some stay unprocessed: they are not known to be gone)."""
        if not refs:
            return []
        keys = [self._key(items.partition_key(r.queue_id, r.shard), r.message_id) for r in refs]
        found = {(str(item["pk"]["S"]), str(item["sk"]["S"])): item
                 for item in get_all(self._db, self.table, keys)}
        ordered = [found.get((str(k["pk"]["S"]), str(k["sk"]["S"]))) for k in keys]
        return [self.entry(item) for item in ordered if item is not None]
