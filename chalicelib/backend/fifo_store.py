"""FIFO messages on DynamoDB: group items, ordered message items, dedup and attempt records.

The layout is in `chalicelib.domain.fifo`. Every write that must agree with another is one
TransactWriteItems:

- a send puts each message with its dedup item (conditional on no live dedup item) and
  updates its group item (message count `n`, last sequence number `last`, conditional on
  `last` being older than the batch's first number, so that a group's messages are
  committed in sequence order even with concurrent senders);
- a receive claims the group item (conditional on the `visible_at` it read: one winner)
  together with the first messages of the group, and records the receive attempt;
- a delete removes the message (conditional on it being in flight) and takes it out of
  the group's in-flight set `ifl`; when the set is empty the group is released.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.items import VISIBLE_INDEX, Item
from chalicelib.domain import fifo
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import Counts, Message, MessageRef
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from chalicelib.backend.dynamo_store import DynamoMessageStore

SEND_ROUNDS = 8
# Sequence numbers a process reserves at a time, per shard.
BLOCK = 100


@dataclass(frozen=True)
class GroupState:
    """A group item as a receive sees it."""

    shard: int
    group: str
    visible_at: int


@dataclass(frozen=True)
class FifoEntry:
    """A stored FIFO message with its shard and sort key."""

    shard: int
    sort_key: str
    message: Message
    until: int  # end of its visibility timeout (0 if never received)
    ready_at: int  # when its send delay ends


@dataclass(frozen=True)
class SendLayout:
    """Where a send's side items go once a queue was resharded: each message's dedup
    partition (`dedup_shards`, by the message's index; none: its own shard's), and the
    counters of shards made by the resharding (`seeds`: shard id -> when it opened)."""

    dedup_shards: Sequence[int] = ()
    seeds: Mapping[int, int] = field(default_factory=dict)

    def dedup_shard(self, index: int, shard: int) -> int:
        """The shard partition of message `index`'s dedup item."""
        return self.dedup_shards[index] if self.dedup_shards else shard


@dataclass(frozen=True)
class SendOutcome:
    """What a send stored: the message as stored, or the original of a duplicate."""

    message: Message
    duplicate: bool


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


class FifoStore:
    """FIFO primitives over one messages table; the ordering rules live in the service."""

    def __init__(self, base: DynamoMessageStore) -> None:
        self._base = base
        self._db: DynamoDBClient = base.client
        self.table = base.table
        self._blocks: dict[tuple[str, int, int], tuple[int, int]] = {}
        self._lock = threading.Lock()

    # -- keys ---------------------------------------------------------------------------
    def _key(self, pk: str, sk: str) -> Item:
        return {"pk": _s(pk), "sk": _s(sk)}

    @staticmethod
    def dedup_pk(queue_id: str, shard: int, scope: str) -> str:
        """Dedup items of scope `queue` share one partition; `messageGroup` ones live in
        their group's shard."""
        if scope == "messageGroup":
            return items.partition_key(queue_id, shard)
        return f"{queue_id}#dedup"

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """True when the shard holds no message (no group item is left in the index)."""
        return self._base.is_empty(queue_id, shard)

    # -- send ---------------------------------------------------------------------------
    def reserve(self, queue_id: str, shard: int, count: int, seed_ms: int = 0) -> int:
        """`count` sequence numbers of a shard; returns the first.

        This process takes them from a block it reserved with one atomic update of the
        shard's counter (BLOCK numbers, or more for a larger request), so most batches
        reserve nothing. Numbers from two processes' blocks can interleave in time; the
        group item's `last` condition on each send catches that, and `forget_blocks`
        makes the retry reserve afresh (numbers above every earlier one).

        A shard made by a resharding (`seed_ms`: when it opened) counts in a counter of
        its own that starts at that time in microseconds, above every number its parents
        gave (they took fewer than a million messages a second), so that a group's
        numbers keep increasing across the resharding.
        """
        key = (queue_id, shard, seed_ms)
        with self._lock:
            start, end = self._blocks.get(key, (0, -1))
            if end - start + 1 >= count:
                self._blocks[key] = (start + count, end)
                return start
        size = max(count, BLOCK)
        counter = fifo.SEQUENCE_KEY + (str(seed_ms) if seed_ms else "")
        update: dict[str, Any] = {"UpdateExpression": "ADD n :k",
                                  "ExpressionAttributeValues": {":k": _n(size)}}
        if seed_ms:
            update = {"UpdateExpression": "SET n = if_not_exists(n, :seed) + :k",
                      "ExpressionAttributeValues": {":k": _n(size), ":seed": _n(seed_ms * 1000)}}
        with translate_errors():
            result = self._db.update_item(
                TableName=self.table, Key=self._key(items.partition_key(queue_id, shard), counter),
                ReturnValues="UPDATED_NEW", **update)
        last = int(result["Attributes"]["n"]["N"])
        first = last - size + 1
        with self._lock:
            self._blocks[key] = (first + count, last)
        return first

    def forget_blocks(self, queue_id: str, shards: Sequence[int]) -> None:
        """Drop this process's reserved numbers of these shards (another process sent
        higher numbers to a group meanwhile)."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == queue_id and k[1] in shards]:
                del self._blocks[key]

    def send(
        self, queue_id: str, scope: str, placed: Sequence[tuple[int, Message]], now_ms: int,
        generation: int = 0, layout: SendLayout | None = None,
    ) -> list[SendOutcome]:
        """Store messages (each with its shard, group and dedup id) in order.

        A message whose dedup id is live (sent within 5 minutes, even if deleted since)
        is not stored: the outcome is the original's id and sequence number. Duplicates
        inside the batch resolve to the first of them. `layout` names the partitions of
        the messages' dedup items and the shards' counters, once a queue was resharded.
        """
        layout = layout or SendLayout()
        dkeys = [(self.dedup_pk(queue_id, layout.dedup_shard(i, shard), scope),
                  fifo.dedup_key(scope, message.group_id or "", message.dedup_id or "",
                                 generation))
                 for i, (shard, message) in enumerate(placed)]
        outcomes: dict[int, SendOutcome] = {}
        first_of: dict[tuple[str, str], int] = {}
        pending: list[int] = []
        for index, dkey in enumerate(dkeys):
            if dkey in first_of:
                continue
            first_of[dkey] = index
            pending.append(index)
        for _ in range(SEND_ROUNDS):
            if not pending:
                break
            pending = self._send_round(queue_id, scope, placed, pending, outcomes, now_ms,
                                       generation, layout)
        if pending:
            raise StoreUnavailableError("FIFO sends kept conflicting")
        for index, (_, message) in enumerate(placed):
            if index in outcomes:
                continue
            original = outcomes[first_of[dkeys[index]]].message
            outcomes[index] = SendOutcome(message.with_changes(
                message_id=original.message_id, sequence_number=original.sequence_number),
                True)
        return [outcomes[i] for i in range(len(placed))]

    def _send_round(
        self, queue_id: str, scope: str, placed: Sequence[tuple[int, Message]],
        pending: list[int], outcomes: dict[int, SendOutcome], now_ms: int, generation: int,
        layout: SendLayout,
    ) -> list[int]:
        per_shard = Counter(placed[i][0] for i in pending)
        next_number = {s: self.reserve(queue_id, s, n, layout.seeds.get(s, 0))
                       for s, n in per_shard.items()}
        numbered: list[tuple[int, int, Message]] = []
        for index in pending:
            shard, message = placed[index]
            sequence = fifo.sequence_number(next_number[shard], shard)
            next_number[shard] += 1
            numbered.append((index, shard, message.with_changes(sequence_number=sequence)))
        ops: list[dict[str, Any]] = []
        owners: list[int | None] = []
        for index, shard, message in numbered:
            ops.append(self._dedup_put(queue_id, scope, layout.dedup_shard(index, shard),
                                       message, now_ms, generation))
            owners.append(index)
            ops.append({"Put": {"TableName": self.table,
                                "Item": self._message_item(queue_id, shard, message)}})
            owners.append(None)
        groups: dict[tuple[int, str], list[Message]] = {}
        for _, shard, message in numbered:
            groups.setdefault((shard, message.group_id or ""), []).append(message)
        for (shard, group), messages in groups.items():
            ops.append(self._group_append(queue_id, shard, group, messages))
            owners.append(None)
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError as exc:
            retry = list(pending)
            behind = any(owner is None and reason.get("Code") == "ConditionalCheckFailed"
                         for owner, reason in zip(owners, exc.reasons, strict=False))
            if behind:  # a group's `last` is past our numbers: reserve afresh
                self.forget_blocks(queue_id, list(per_shard))
            for owner, reason in zip(owners, exc.reasons, strict=False):
                if owner is None or reason.get("Code") != "ConditionalCheckFailed":
                    continue
                found = reason.get("Item") or {}
                if "mid" in found:
                    original = placed[owner][1].with_changes(
                        message_id=found["mid"]["S"], sequence_number=found["seq"]["S"])
                    outcomes[owner] = SendOutcome(original, True)
                    retry.remove(owner)
            return retry
        for index, _, message in numbered:
            outcomes[index] = SendOutcome(message, False)
        return []

    def _dedup_put(
        self, queue_id: str, scope: str, shard: int, message: Message, now_ms: int,
        generation: int,
    ) -> dict[str, Any]:
        expires = now_ms + fifo.DEDUP_WINDOW_MS
        item = {
            **self._key(self.dedup_pk(queue_id, shard, scope),
                        fifo.dedup_key(scope, message.group_id or "", message.dedup_id or "",
                                  generation)),
            "mid": _s(message.message_id), "seq": _s(message.sequence_number or ""),
            "exp_ms": _n(expires), "expires_at": _n(expires // 1000 + 1),
        }
        return {"Put": {
            "TableName": self.table, "Item": item,
            "ConditionExpression": "attribute_not_exists(sk) OR exp_ms <= :now",
            "ExpressionAttributeValues": {":now": _n(now_ms)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }}

    def _message_item(self, queue_id: str, shard: int, message: Message) -> Item:
        """A FIFO message item: no `visible_at` (only its group item is in the index)."""
        stored = self._base.offload(queue_id, message)
        item = items.to_item(queue_id, shard, stored)
        del item["visible_at"]
        item.pop("grp", None)  # a FIFO message's group is `group`, the audit's order key
        group = message.group_id or ""
        item["sk"] = _s(fifo.message_key(group, message.sequence_number or ""))
        item.update({
            "mid": _s(message.message_id), "group": _s(group),
            "gseq": _s(message.sequence_number or ""), "ddid": _s(message.dedup_id or ""),
            "va": _n(message.visible_at), "until": _n(0),
        })
        return item

    def _group_append(
        self, queue_id: str, shard: int, group: str, messages: list[Message]
    ) -> dict[str, Any]:
        first = min(m.sequence_number or "" for m in messages)
        last = max(m.sequence_number or "" for m in messages)
        ready = min(m.visible_at for m in messages)
        return {"Update": {
            "TableName": self.table,
            "Key": self._key(items.partition_key(queue_id, shard), fifo.group_key(group)),
            "UpdateExpression": "SET visible_at = if_not_exists(visible_at, :va), "
                                "expires_ms = :never, rc = if_not_exists(rc, :zero), "
                                "#last = :last ADD n :k",
            "ConditionExpression": "attribute_not_exists(#last) OR #last < :first",
            "ExpressionAttributeNames": {"#last": "last"},
            "ExpressionAttributeValues": {":va": _n(ready), ":never": _n(fifo.NEVER_MS),
                                          ":last": _s(last), ":first": _s(first),
                                          ":zero": _n(0),
                                          ":k": _n(len(messages))},
        }}

    # -- receive ------------------------------------------------------------------------
    def ready_groups(self, queue_id: str, shard: int, now_ms: int, limit: int) -> list[GroupState]:
        """Groups whose `visible_at` has come, oldest first (the visibility index)."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, IndexName=VISIBLE_INDEX,
                KeyConditionExpression="pk = :pk AND visible_at <= :now",
                ExpressionAttributeValues={":pk": _s(items.partition_key(queue_id, shard)),
                                           ":now": _n(now_ms)},
                ProjectionExpression="sk, visible_at", Limit=limit,
            )
        return [self._group_state(shard, item) for item in result.get("Items", [])]

    @staticmethod
    def _group_state(shard: int, item: Item) -> GroupState:
        return GroupState(shard, fifo.group_of_key(str(item["sk"]["S"])),
                          int(item["visible_at"]["N"]))

    def head(self, queue_id: str, shard: int, group: str, limit: int) -> list[FifoEntry]:
        """The first `limit` messages of a group, in sequence order (consistent read)."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, ConsistentRead=True, Limit=limit,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": _s(items.partition_key(queue_id, shard)),
                                           ":prefix": _s(fifo.message_prefix(group))},
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
                ":until": _n(until), ":tok": _s(token), ":seen": _n(group.visible_at),
                ":ifl": {"SS": [e.sort_key for e in entries]}, ":held": _n(len(entries)),
            },
        }}]
        for entry in entries:
            ops.append({"Update": {
                "TableName": self.table, "Key": self._key(pk, entry.sort_key),
                "UpdateExpression": "SET claim = :tok, #until = :until, rc = rc + :one, "
                                    "rcv = :now, frc = if_not_exists(frc, :now)",
                "ConditionExpression": "attribute_exists(sk) AND #until <= :now",
                "ExpressionAttributeNames": {"#until": "until"},
                "ExpressionAttributeValues": {":tok": _s(token), ":until": _n(until),
                                              ":one": _n(1), ":now": _n(now_ms)},
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
                    ExpressionAttributeValues={":vis": _n(visible_at),
                                               ":seen": _n(group.visible_at)})
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
                    ExpressionAttributeValues={":seen": _n(group.visible_at),
                                               ":last": item["last"]})
        except ConditionFailedError:
            return

    def remove_head(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry]) -> bool:
        """Delete messages at the head of an unheld group (expired ones), one transaction."""
        pk = items.partition_key(queue_id, group.shard)
        ops: list[dict[str, Any]] = [{"Update": {
            "TableName": self.table, "Key": self._key(pk, fifo.group_key(group.group)),
            "UpdateExpression": "ADD n :minus", "ConditionExpression": "visible_at = :seen",
            "ExpressionAttributeValues": {":seen": _n(group.visible_at),
                                          ":minus": _n(-len(entries))}}}]
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
        sequence = fifo.sequence_number(number, target_shard)
        copy = moved.with_changes(sequence_number=sequence)
        ops: list[dict[str, Any]] = [
            {"Update": {
                "TableName": self.table, "Key": self._key(pk, fifo.group_key(group.group)),
                "UpdateExpression": "ADD n :minus",
                "ConditionExpression": "visible_at = :seen",
                "ExpressionAttributeValues": {":seen": _n(group.visible_at), ":minus": _n(-1)}}},
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
        refs = [{"L": [_n(shard), _s(e.sort_key), _s(token)]} for e, token in entries]
        if first:
            expires = now_ms + fifo.ATTEMPT_WINDOW_MS
            return {"Put": {
                "TableName": self.table,
                "Item": {**key, "refs": {"L": refs}, "rid": _s(receive_id),
                         "exp_ms": _n(expires), "expires_at": _n(expires // 1000 + 1)},
                "ConditionExpression": "attribute_not_exists(sk) OR exp_ms <= :now",
                "ExpressionAttributeValues": {":now": _n(now_ms)}}}
        return {"Update": {
            "TableName": self.table, "Key": key,
            "UpdateExpression": "SET refs = list_append(refs, :refs)",
            "ConditionExpression": "rid = :rid",
            "ExpressionAttributeValues": {":refs": {"L": refs}, ":rid": _s(receive_id)}}}

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

    # -- delete and visibility ------------------------------------------------------------
    def _group_count_op(self, pk: str, group: str, delta: int) -> dict[str, Any]:
        return {"Update": {"TableName": self.table, "Key": self._key(pk, fifo.group_key(group)),
                           "UpdateExpression": "ADD n :d",
                           "ConditionExpression": "attribute_exists(sk)",
                           "ExpressionAttributeValues": {":d": _n(delta)}}}

    def delete(self, refs: Sequence[MessageRef], now_ms: int) -> dict[int, str]:
        """Delete in-flight messages (any of their receipt handles will do, as in SQS).

        All of them in one transaction: each message's delete (conditional on it being in
        flight), one update per group (its count, and the messages leave its in-flight
        set) and one counter update per shard. When some conditions fail, those messages
        drop out and the rest go again. Returns {index: "expired"} for messages visible
        again; a message already gone is left out (SQS answers success). Then each group
        whose in-flight set is empty is released, one request per group.
        """
        unique: dict[tuple[int, str], int] = {}
        for index, ref in enumerate(refs):
            unique.setdefault((ref.shard, ref.message_id), index)
        pending = list(unique.values())
        reasons: dict[int, str] = {}
        plain: set[tuple[str, str]] = set()  # groups whose release did not fit in the delete
        for _ in range(SEND_ROUNDS):
            if not pending:
                break
            pending = self._delete_round(refs, pending, reasons, plain, now_ms)
        if pending:
            raise StoreUnavailableError("FIFO deletes kept conflicting")
        deleted = [refs[i] for i in unique.values() if i not in reasons]
        for shard, group in dict.fromkeys(
                (r.shard, fifo.group_of_key(r.message_id)) for r in deleted):
            if (items.partition_key(deleted[0].queue_id, shard), group) in plain:
                self.release(deleted[0].queue_id, shard, group, now_ms)
        failed: dict[int, str] = {}
        for index, ref in enumerate(refs):
            reason = reasons.get(unique[(ref.shard, ref.message_id)])
            if reason == "expired":
                failed[index] = reason
        return failed

    def _delete_round(self, refs: Sequence[MessageRef], pending: list[int],
                      reasons: dict[int, str], plain: set[tuple[str, str]],
                      now_ms: int) -> list[int]:
        """One transaction of deletes; returns the indexes to try again.

        When the deletes of a group are exactly its hold (the claim token says how many
        messages the claim took), the group's update in the same transaction releases it,
        or deletes it when the claim took the whole group and nothing was sent since.
        Otherwise (`plain`) the group's update only counts, and `release` follows.
        """
        ops: list[dict[str, Any]] = []
        owners: list[int | tuple[str, str] | None] = []
        groups: dict[tuple[str, str], list[MessageRef]] = {}
        for index in pending:
            ref = refs[index]
            pk = items.partition_key(ref.queue_id, ref.shard)
            ops.append({"Delete": {
                "TableName": self.table, "Key": self._key(pk, ref.message_id),
                "ConditionExpression": "#until > :now",
                "ExpressionAttributeNames": {"#until": "until"},
                "ExpressionAttributeValues": {":now": _n(now_ms)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}})
            owners.append(index)
            groups.setdefault((pk, fifo.group_of_key(ref.message_id)), []).append(ref)
        for (pk, group), mine in groups.items():
            ops.append(self._group_delete_op(pk, group, mine, (pk, group) in plain, now_ms))
            owners.append((pk, group))
        try:
            transact_write(self._db, ops)
        except TransactionCancelledError as exc:
            retry = []
            for owner, reason in zip(owners, exc.reasons, strict=False):
                failed = reason.get("Code") == "ConditionalCheckFailed"
                if isinstance(owner, tuple):
                    if failed:
                        plain.add(owner)  # not the whole hold after all
                elif owner is not None:
                    if failed:
                        reasons[owner] = "expired" if reason.get("Item") else "gone"
                    else:
                        retry.append(owner)
            return retry
        for key, mine in groups.items():
            if not self._hold_of(mine):
                plain.add(key)
        return []

    @staticmethod
    def _hold_of(refs: Sequence[MessageRef]) -> tuple[int, str] | None:
        """(size, last sequence number if the claim took the whole group, else "") of the
        claim behind these refs, when they are exactly that claim's messages."""
        tokens = {r.claim_token for r in refs}
        if len(tokens) != 1:
            return None
        size, last = fifo.parse_claim_token(tokens.pop())
        if size != len({r.message_id for r in refs}):
            return None
        return size, last

    def _group_delete_op(self, pk: str, group: str, refs: Sequence[MessageRef], plain: bool,
                         now_ms: int) -> dict[str, Any]:
        key = self._key(pk, fifo.group_key(group))
        sks = sorted({r.message_id for r in refs})
        hold = None if plain else self._hold_of(refs)
        if hold is None:
            return {"Update": {
                "TableName": self.table, "Key": key,
                "UpdateExpression": "ADD n :minus, rc :minus DELETE ifl :sks",
                "ExpressionAttributeValues": {":minus": _n(-len(sks)), ":sks": {"SS": sks}}}}
        names = {f":k{i}": _s(sk) for i, sk in enumerate(sks)}
        exact = " AND ".join([f"contains(ifl, {name})" for name in names] +
                             ["size(ifl) = :size"])
        values = {**names, ":size": _n(len(sks))}
        size, last = hold
        if last:
            return {"Delete": {"TableName": self.table, "Key": key,
                               "ConditionExpression": f"{exact} AND #last = :last",
                               "ExpressionAttributeNames": {"#last": "last"},
                               "ExpressionAttributeValues": {**values, ":last": _s(last)}}}
        return {"Update": {
            "TableName": self.table, "Key": key,
            "UpdateExpression": "SET visible_at = :now, rc = :zero REMOVE ifl, claim "
                                "ADD n :minus",
            "ConditionExpression": exact,
            "ExpressionAttributeValues": {**values, ":now": _n(now_ms), ":zero": _n(0),
                                          ":minus": _n(-size)}}}

    def release(self, queue_id: str, shard: int, group: str, now_ms: int) -> None:
        """A group with nothing in flight is served again at once; an empty one goes.
        A send racing the removal of an empty group makes the next round serve it."""
        for _ in range(3):
            if self._release_once(queue_id, shard, group, now_ms):
                return

    def _release_once(self, queue_id: str, shard: int, group: str, now_ms: int) -> bool:
        key = self._key(items.partition_key(queue_id, shard), fifo.group_key(group))
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self.table, Key=key,
                    UpdateExpression="SET visible_at = :now, rc = :zero REMOVE claim",
                    ConditionExpression="attribute_exists(sk) AND attribute_not_exists(ifl) "
                                        "AND n > :zero AND visible_at > :now",
                    ExpressionAttributeValues={":now": _n(now_ms), ":zero": _n(0)},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD")
            return True
        except ConditionFailedError as exc:
            old = exc.item or {}
        if not old or "ifl" in old or int(old.get("n", {}).get("N", "0")) > 0:
            return True  # gone, still held, or already served
        try:
            with translate_errors():
                self._db.delete_item(
                    TableName=self.table, Key=key,
                    ConditionExpression="attribute_not_exists(ifl) AND n <= :zero",
                    ExpressionAttributeValues={":zero": _n(0)})
        except ConditionFailedError:
            return False
        return True

    def change_visibility(self, ref: MessageRef, until: int, now_ms: int) -> str:
        """Move an in-flight message's visibility (any of its handles). "changed", or
        "not_in_flight" (visible again), or "not_found"."""
        pk = items.partition_key(ref.queue_id, ref.shard)
        group = fifo.group_of_key(ref.message_id)
        try:
            with translate_errors():
                self._db.update_item(
                    TableName=self.table, Key=self._key(pk, ref.message_id),
                    UpdateExpression="SET #until = :until",
                    ConditionExpression="#until > :now",
                    ExpressionAttributeNames={"#until": "until"},
                    ExpressionAttributeValues={":until": _n(until), ":now": _n(now_ms)},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ConditionFailedError as exc:
            return "not_in_flight" if exc.item else "not_found"
        # A group is served again as soon as one of its messages is visible again (SQS's
        # observed behaviour): a shorter time brings the group's `visible_at` forward. A
        # longer one leaves it: a receive that then finds its head still in flight waits
        # for it (and never serves what comes after it).
        ended = until <= now_ms
        update = "SET visible_at = :until" + (" ADD rc :minus DELETE ifl :sk" if ended else "")
        values: dict[str, Any] = {":until": _n(until)}
        if ended:
            values.update({":minus": _n(-1), ":sk": {"SS": [ref.message_id]}})
        # A failed condition means the group is already served at or before `until`: there
        # is nothing to bring forward, and the message's own change above has landed.
        with suppress(ConditionFailedError), translate_errors():
            self._db.update_item(
                TableName=self.table, Key=self._key(pk, fifo.group_key(group)),
                UpdateExpression=update,
                ConditionExpression="attribute_exists(sk) AND visible_at > :until",
                ExpressionAttributeValues=values)
        return "changed"

    # -- counts, purge, peek ---------------------------------------------------------------
    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        """The shard's counter less what is in flight or delayed: the minute buckets after
        `now`'s minute, and the hidden group items of the rest of it (`hidden_counts`)."""
        counted = self._base.counters.read(self.table, queue_id, shard)
        in_flight, delayed, until = counted.hidden(now_ms)
        more_in_flight, more_delayed = self._hidden_groups(queue_id, shard, now_ms, until)
        in_flight, delayed = in_flight + more_in_flight, delayed + more_delayed
        return Counts(max(0, counted.total - in_flight - delayed), in_flight, delayed)

    def _hidden_groups(self, queue_id: str, shard: int, now_ms: int,
                  until: int = LANE_BASE) -> tuple[int, int]:
        """(in flight, delayed) of a shard's groups hidden after `now` and before `until`,
        read from the group items (bounded by them): a held group's `rc` is how many of its
        messages are in flight; a group waiting on its head's delay counts as one delayed
        message."""
        in_flight = delayed = 0
        start: Item | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self.table, "IndexName": VISIBLE_INDEX,
                "KeyConditionExpression": "pk = :pk AND visible_at BETWEEN :now AND :until",
                "ExpressionAttributeValues": {":pk": _s(items.partition_key(queue_id, shard)),
                                              ":now": _n(now_ms + 1), ":until": _n(until - 1)},
                "ProjectionExpression": "rc",
            }
            if start:
                request["ExclusiveStartKey"] = start
            with translate_errors():
                page = self._db.query(**request)
            for item in page.get("Items", []):
                held = int(item.get("rc", {}).get("N", "0"))
                if held > 0:
                    in_flight += held
                else:
                    delayed += 1
            start = page.get("LastEvaluatedKey")
            if not start:
                return in_flight, delayed

    def purge(self, queue_id: str, shard: int) -> int:
        """Delete every FIFO message and group item of a shard (dedup items stay)."""
        pk = items.partition_key(queue_id, shard)
        deleted = 0
        for prefix in (fifo.MESSAGE_PREFIX, fifo.GROUP_PREFIX):
            start: Item | None = None
            while True:
                request: dict[str, Any] = {
                    "TableName": self.table, "ProjectionExpression": "pk, sk",
                    "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                    "ExpressionAttributeValues": {":pk": _s(pk), ":p": _s(prefix)},
                }
                if start:
                    request["ExclusiveStartKey"] = start
                with translate_errors():
                    page = self._db.query(**request)
                keys = [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}}
                        for i in page.get("Items", [])]
                left = self._base.batch_write(keys) if keys else []
                if prefix == fifo.MESSAGE_PREFIX:
                    deleted += len(keys) - len(left)
                start = page.get("LastEvaluatedKey")
                if not start:
                    break
        return deleted

    def peek(self, queue_id: str, shard: int, limit: int) -> list[Message]:
        """The first messages of the shard's groups, without claiming them."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, Limit=limit,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": _s(items.partition_key(queue_id, shard)),
                                           ":p": _s(fifo.MESSAGE_PREFIX)})
        return [self.entry(item).message for item in result.get("Items", [])]
