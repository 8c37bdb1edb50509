"""The DynamoDB FIFO store's sends: sequence numbers reserved in blocks, and each message
put with its dedup item and its group's update in one TransactWriteItems."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from chalicelib.backend import items
from chalicelib.backend.items import Item
from chalicelib.domain.exceptions import (
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.domain.messages import Message
from chalicelib.dynamo_batches import transact_write
from chalicelib.dynamo_errors import translate_errors
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.dynamo_base import BLOCK, SEND_ROUNDS, FifoBase, n_attr, s_attr
from chalicelib.fifo.store import SendLayout, SendOutcome


class FifoSends(FifoBase):
    """Sequence numbers and sends."""

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
                                  "ExpressionAttributeValues": {":k": n_attr(size)}}
        if seed_ms:
            update = {"UpdateExpression": "SET n = if_not_exists(n, :seed) + :k",
                      "ExpressionAttributeValues": {":k": n_attr(size),
                                                    ":seed": n_attr(seed_ms * 1000)}}
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
        generation: int = 0, layout: SendLayout | None = None, purged_ms: int = 0,
    ) -> list[SendOutcome]:
        """Store messages (each with its shard, group and dedup id) in order.

        A message whose dedup id is live (sent within 5 minutes, even if deleted since)
        is not stored: the outcome is the original's id and sequence number. Duplicates
        inside the batch resolve to the first of them. `layout` names the partitions of
        the messages' dedup items and the shards' counters, once a queue was resharded.
        A dedup item written by the queue's last purge (`purged_ms`) is not live: its
        expiry is at most the purge's time plus the window, so the same condition that
        lets an expired item be overwritten lets it be, and a purge writes nothing.
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
                                       generation, layout, purged_ms)
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
        layout: SendLayout, purged_ms: int = 0,
    ) -> list[int]:
        per_shard = Counter(placed[i][0] for i in pending)
        next_number = {s: self.reserve(queue_id, s, n, layout.seeds.get(s, 0))
                       for s, n in per_shard.items()}
        numbered: list[tuple[int, int, Message]] = []
        for index in pending:
            shard, message = placed[index]
            sequence = fifo.sequence_number(next_number[shard])
            next_number[shard] += 1
            numbered.append((index, shard, message.with_changes(sequence_number=sequence)))
        ops: list[dict[str, Any]] = []
        owners: list[int | None] = []
        for index, shard, message in numbered:
            ops.append(self._dedup_put(queue_id, scope, layout.dedup_shard(index, shard),
                                       message, now_ms, generation, purged_ms))
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
        generation: int, purged_ms: int = 0,
    ) -> dict[str, Any]:
        expires = now_ms + fifo.DEDUP_WINDOW_MS
        stale = fifo.dedup_stale_before(now_ms, purged_ms)
        item = {
            **self._key(self.dedup_pk(queue_id, shard, scope),
                        fifo.dedup_key(scope, message.group_id or "", message.dedup_id or "",
                                  generation)),
            "mid": s_attr(message.message_id), "seq": s_attr(message.sequence_number or ""),
            "exp_ms": n_attr(expires), "expires_at": n_attr(expires // 1000 + 1),
        }
        return {"Put": {
            "TableName": self.table, "Item": item,
            "ConditionExpression": "attribute_not_exists(sk) OR exp_ms <= :stale",
            "ExpressionAttributeValues": {":stale": n_attr(stale)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }}

    def _message_item(self, queue_id: str, shard: int, message: Message) -> Item:
        """A FIFO message item: no `visible_at` (only its group item is in the index)."""
        stored = self._base.offload(queue_id, message)
        item = items.to_item(queue_id, shard, stored)
        del item["visible_at"]
        item.pop("grp", None)  # a FIFO message's group is `group`, the audit's order key
        group = message.group_id or ""
        item["sk"] = s_attr(fifo.message_key(group, message.sequence_number or ""))
        item.update({
            "mid": s_attr(message.message_id), "group": s_attr(group),
            "gseq": s_attr(message.sequence_number or ""), "ddid": s_attr(message.dedup_id or ""),
            "va": n_attr(message.visible_at), "until": n_attr(0),
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
            "ExpressionAttributeValues": {":va": n_attr(ready), ":never": n_attr(fifo.NEVER_MS),
                                          ":last": s_attr(last), ":first": s_attr(first),
                                          ":zero": n_attr(0),
                                          ":k": n_attr(len(messages))},
        }}

    # -- receive ------------------------------------------------------------------------
