"""FIFO messages on DynamoDB: group items, ordered message items, dedup and attempt records.

The layout is in `chalicelib.fifo.rules`. Every write that must agree with another is one
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

import json
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from chalicelib.backend import items
from chalicelib.backend.items import Item
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreThrottledError,
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.domain.messages import Counts, Message, MessageRef
from chalicelib.dynamo_batches import transact_write
from chalicelib.dynamo_errors import translate_errors
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.dynamo_base import SEND_ROUNDS, n_attr, s_attr
from chalicelib.fifo.dynamo_claims import FifoClaims


class DynamoFifoStore(FifoClaims):
    """The FIFO store (`chalicelib.fifo.store.FifoStore`) on DynamoDB: sends and
    claims from its parts, and here the deletes, visibility changes and counts."""

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
                "ExpressionAttributeValues": {":now": n_attr(now_ms)},
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
                "ExpressionAttributeValues": {":minus": n_attr(-len(sks)), ":sks": {"SS": sks}}}}
        names = {f":k{i}": s_attr(sk) for i, sk in enumerate(sks)}
        exact = " AND ".join([f"contains(ifl, {name})" for name in names] +
                             ["size(ifl) = :size"])
        values = {**names, ":size": n_attr(len(sks))}
        size, last = hold
        if last:
            return {"Delete": {"TableName": self.table, "Key": key,
                               "ConditionExpression": f"{exact} AND #last = :last",
                               "ExpressionAttributeNames": {"#last": "last"},
                               "ExpressionAttributeValues": {**values, ":last": s_attr(last)}}}
        return {"Update": {
            "TableName": self.table, "Key": key,
            "UpdateExpression": "SET visible_at = :now, rc = :zero REMOVE ifl, claim "
                                "ADD n :minus",
            "ConditionExpression": exact,
            "ExpressionAttributeValues": {**values, ":now": n_attr(now_ms), ":zero": n_attr(0),
                                          ":minus": n_attr(-size)}}}

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
                    ExpressionAttributeValues={":now": n_attr(now_ms), ":zero": n_attr(0)},
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
                    ExpressionAttributeValues={":zero": n_attr(0)})
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
                    ExpressionAttributeValues={":until": n_attr(until), ":now": n_attr(now_ms)},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ConditionFailedError as exc:
            return "not_in_flight" if exc.item else "not_found"
        # A group is served again as soon as one of its messages is visible again (SQS's
        # observed behaviour): a shorter time brings the group's `visible_at` forward. A
        # longer one leaves it: a receive that then finds its head still in flight waits
        # for it (and never serves what comes after it).
        ended = until <= now_ms
        update = "SET visible_at = :until" + (" ADD rc :minus DELETE ifl :sk" if ended else "")
        values: dict[str, Any] = {":until": n_attr(until)}
        if ended:
            values.update({":minus": n_attr(-1), ":sk": {"SS": [ref.message_id]}})
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
        """The shard's counts, as `count_many` reads them."""
        return self.count_many([(queue_id, shard)], now_ms)[(queue_id, shard)]

    def count_many(self, shards: Sequence[tuple[str, int]],
                   now_ms: int) -> dict[tuple[str, int], Counts]:
        """The counts of many shards, as the views of every queue read them: the count
        items together (one BatchGetItem per hundred), less what is in flight or delayed,
        from the minute buckets after `now`'s minute and, only where the buckets and second
        hints say a group may turn visible in the rest of this minute, the group items of
        it. A held group weighs its messages in flight (`rc`); a group waiting on its
        head's delay is one delayed message."""
        return self._base.count_many(shards, now_ms, weighted=True)

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
                    "ExpressionAttributeValues": {":pk": s_attr(pk), ":p": s_attr(prefix)},
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

    def remove_sent_before(self, queue_id: str, shard: int, before_ms: int | None,
                           start: str | None, max_items: int,
                           now_ms: int) -> tuple[Counts, str | None]:
        """One bounded step of a purge's removal: the shard's messages sent by `before_ms`
        go, in BatchWriteItems of 25; with None (a deleted queue) every message and then
        every group item goes. Dedup items stay, as they do in a purge. A group item whose
        messages are gone is dropped by the next receive that reads it. Return how many
        messages went (delayed while their delay runs at `now_ms`, else visible: what is
        in flight weighs on the group items) and where the next step starts (None:
        done)."""
        prefixes = [fifo.MESSAGE_PREFIX] + ([fifo.GROUP_PREFIX] if before_ms is None else [])
        at: dict[str, Any] = json.loads(start) if start else {"p": 0, "k": None}
        step, key = int(at["p"]), at["k"]
        pk = items.partition_key(queue_id, shard)
        read = 0
        removed = Counts()
        while read < max_items:
            if step >= len(prefixes):
                return removed, None
            request: dict[str, Any] = {
                "TableName": self.table, "ProjectionExpression": "pk, sk, sent_ms, va",
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":pk": s_attr(pk), ":p": s_attr(prefixes[step])},
                "Limit": min(1000, max_items)}
            if key:
                request["ExclusiveStartKey"] = key
            with translate_errors():
                page = self._db.query(**request)
            found = page.get("Items", [])
            read += len(found)
            keys = [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}} for i in found
                    if items.sent_by(i, before_ms)]
            left = self._base.batch_write(keys) if keys else []
            if left:
                raise StoreThrottledError(f"{len(left)} deletes left unprocessed")
            if step == 0:
                delayed = sum(1 for i in found
                              if items.sent_by(i, before_ms)
                              and int(i.get("va", {}).get("N", "0")) > now_ms)
                removed += Counts(visible=len(keys) - delayed, delayed=delayed)
            key = page.get("LastEvaluatedKey")
            if not key:
                step, key = step + 1, None
        if step >= len(prefixes):
            return removed, None
        return removed, json.dumps({"p": step, "k": key}, sort_keys=True)

    def peek(self, queue_id: str, shard: int, limit: int) -> list[Message]:
        """The first messages of the shard's groups, without claiming them."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, Limit=limit,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": s_attr(items.partition_key(queue_id, shard)),
                                           ":p": s_attr(fifo.MESSAGE_PREFIX)})
        return [self.entry(item).message for item in result.get("Items", [])]
