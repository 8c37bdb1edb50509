"""The message store on DynamoDB: batched writes, index queries and conditional claims."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chalicelib.backend import items
from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.dynamo_claims import CLAIM_UPDATE, BatchClaims, claim_values, claimed
from chalicelib.backend.dynamo_conditional import ConditionalWrites
from chalicelib.backend.dynamo_moves import BatchMoves, Move, MoveOutcome, ProgressOp
from chalicelib.backend.dynamo_sends import DynamoSends
from chalicelib.backend.hidden_counts import ShardCount
from chalicelib.backend.items import VISIBLE_INDEX, Item
from chalicelib.backend.store import CandidatePage, NewPuts, VisibilityChange
from chalicelib.clusters.shard_load import ShardLoad
from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreError,
    StoreThrottledError,
)
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.domain.messages import Candidate, Counts, Message, MessageRef, VisibilityOutcome
from chalicelib.dynamo_batches import transact_write, write_some
from chalicelib.dynamo_errors import lost_race, translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from chalicelib.backend.counters import ShardCounters

# Items a peek reads of each shard, to return the oldest of them by send time.
PEEK_SAMPLE = 100


class DynamoMessageStore:
    """MessageStore over one messages table (a cluster) and its S3 body bucket.

    Each call is the one store request (or batch) it needs: counts are kept from the
    table's stream (`chalicelib.backend.counters`), which is what `count` reads.
    """

    def __init__(
        self, client: DynamoDBClient, table: str, bodies: BodyStore, inline_limit: int,
        counters: ShardCounters,
    ) -> None:
        self._db = client
        self.table = table
        self._bodies = bodies
        self._inline_limit = inline_limit
        self._claims = BatchClaims(client, table, self._complete)
        self._moves = BatchMoves(client, table)
        self._writes = ConditionalWrites(client, table)
        self._counters = counters

    # -- what the FIFO store (`chalicelib.fifo.dynamo`) builds on -------------------
    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client of this table."""
        return self._db

    @property
    def counters(self) -> ShardCounters:
        """The shard counts of this table (kept from its stream)."""
        return self._counters

    def offload(self, queue_id: str, message: Message) -> Message:
        """The message with a body past the inline limit moved to S3."""
        return self._offload(queue_id, message)

    def load(self, item: Item) -> Message:
        """The Message of an item, with what lives in S3 read back."""
        return self._load(item)

    def batch_write(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """BatchWriteItem in chunks with retries; returns what stayed unprocessed."""
        return self._batch_write(requests)

    # -- writes ---------------------------------------------------------------------------
    def put_messages(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> set[str]:
        """One PutItem, or BatchWriteItem (any shards in one call) with retries; large
        bodies go to S3 first."""
        requests = [
            {"PutRequest": {"Item": items.to_item(queue_id, shard, self._offload(queue_id, m))}}
            for shard, m in placed
        ]
        if len(requests) == 1:
            with translate_errors():
                self._db.put_item(TableName=self.table, Item=requests[0]["PutRequest"]["Item"])
            unstored: set[str] = set()
        else:
            unprocessed = self._batch_write(requests)
            unstored = {str(r["PutRequest"]["Item"]["sk"]["S"]) for r in unprocessed}
        return unstored

    def put_if_absent(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> None:
        """One conditional PutItem per message: a copy the stream already applied (and
        maybe moved on) is never overwritten with the message as it was sent."""
        for shard, message in placed:
            item = items.to_item(queue_id, shard, self._offload(queue_id, message))
            try:
                with translate_errors():
                    self._db.put_item(TableName=self.table, Item=item,
                                      ConditionExpression="attribute_not_exists(sk)")
            except ConditionFailedError:
                continue  # the stream already wrote this copy: it stands

    def put_new(self, queue_id: str, placed: Sequence[tuple[int, Message]]) -> NewPuts:
        """Conditional puts of messages whose keys may be taken already (request
        deduplication): one request per ten messages, see `dynamo_sends`."""
        return DynamoSends(self._db, self.table, self._offload, self._bodies).put(
            queue_id, placed)

    def _offload(self, queue_id: str, message: Message) -> Message:
        """A body past the inline limit goes to S3; so do attributes too large for the item."""
        if items.encoded_size(message) <= self._inline_limit:
            return message
        body_key = BodyStore.key_for(queue_id, message.message_id)
        attributes = items.encode_attributes(message.attributes)
        with translate_errors():
            self._bodies.put(body_key, message.body)
            if len(attributes.encode("utf-8")) > self._inline_limit:
                attributes_key = BodyStore.attributes_key_for(queue_id, message.message_id)
                self._bodies.put(attributes_key, attributes)
                message = message.with_changes(attributes_key=attributes_key)
        return message.with_changes(body_key=body_key)

    def _batch_write(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write in chunks of 25; return what stayed unprocessed after bounded retries
        (the callers report or count a partial write)."""
        return write_some(self._db, self.table, requests)

    # -- receive --------------------------------------------------------------------------
    def find_candidates(
        self, queue_id: str, shard: int, now_ms: int, limit: int, after: Candidate | None,
        low: int = 0,
    ) -> CandidatePage:
        """Query the visibility index: `pk = :shard AND visible_at <= :now`, oldest first
        (from `low` on, when given: the noisy lane of a fair queue)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": VISIBLE_INDEX,
            "KeyConditionExpression": "pk = :pk AND visible_at <= :now",
            "ExpressionAttributeValues": {
                ":pk": {"S": items.partition_key(queue_id, shard)},
                ":now": {"N": str(now_ms)},
            },
            "Limit": limit,
        }
        if low:
            kwargs["KeyConditionExpression"] = "pk = :pk AND visible_at BETWEEN :low AND :now"
            kwargs["ExpressionAttributeValues"][":low"] = {"N": str(low)}
        if after is not None:
            kwargs["ExclusiveStartKey"] = {
                **items.key(queue_id, shard, after.message_id),
                "visible_at": {"N": str(after.visible_at)},
            }
        with translate_errors():
            result = self._db.query(**kwargs)
        found = [items.to_candidate(i) for i in result.get("Items", [])]
        return CandidatePage(found, "LastEvaluatedKey" in result, len(found))

    def claim(
        self, queue_id: str, shard: int, candidate: Candidate, visible_at: int, token: str,
        now_ms: int,
    ) -> Message | None:
        """Conditional UpdateItem on `visible_at = :seen`: one winner per visibility window.
        The message is the one the index query read, claimed (or, when the index entry
        did not hold it whole, the item the update returns)."""
        whole = candidate.message
        try:
            with translate_errors():
                result = self._db.update_item(
                    TableName=self.table,
                    Key=items.key(queue_id, shard, candidate.message_id),
                    UpdateExpression=CLAIM_UPDATE,
                    ConditionExpression="visible_at = :seen",
                    ExpressionAttributeValues=claim_values(
                        candidate.visible_at, visible_at, token, now_ms
                    ),
                    ReturnValues="NONE" if whole is not None else "ALL_NEW",
                )
        except ConditionFailedError:
            return None
        if whole is not None:
            return self._complete(claimed(whole, visible_at, token, now_ms))
        return self._load(result["Attributes"])

    def claim_many(
        self, queue_id: str, shard: int, claims: Sequence[tuple[Candidate, str]],
        visible_at: int, now_ms: int,
    ) -> list[Message | None]:
        """One claim is one UpdateItem; several are one transaction and one batch read."""
        if len(claims) == 1:
            ((candidate, token),) = claims
            return [self.claim(queue_id, shard, candidate, visible_at, token, now_ms)]
        return self._claims.claim(queue_id, shard, claims, visible_at, now_ms)

    def _load(self, item: Item) -> Message:
        return self._complete(items.from_item(item))

    def _complete(self, message: Message) -> Message:
        """The message with the body and attributes that live in S3 read back in."""
        if not (message.body_key or message.attributes_key):
            return message
        changes: dict[str, object] = {}
        with translate_errors():
            if message.body_key:
                changes["body"] = self._bodies.get(message.body_key)
            if message.attributes_key:
                changes["attributes"] = items.decode_attributes(
                    self._bodies.get(message.attributes_key))
        return message.with_changes(**changes)

    def move(
        self, queue_id: str, shard: int, candidate: Candidate, target_queue_id: str,
        target_shard: int, target_retention_ms: int, now_ms: int, source_arn: str | None = None,
    ) -> bool:
        """TransactWriteItems: delete at the source (if unchanged) and put at the target."""
        source_key = items.key(queue_id, shard, candidate.message_id)
        with translate_errors():
            found = self._db.get_item(TableName=self.table, Key=source_key, ConsistentRead=True)
        if "Item" not in found:
            return False
        source = items.from_item(found["Item"])
        moved = self._copy_objects(
            source.moved_to_dead_letters(now_ms, target_retention_ms, source_arn),
            target_queue_id)
        target_item = items.to_item(target_queue_id, target_shard, moved)
        if moved.body_key:
            target_item["body_size"] = found["Item"].get("body_size", {"N": "0"})
        ops = [
            {"Delete": {"TableName": self.table, "Key": source_key,
                        "ConditionExpression": "visible_at = :seen",
                        "ExpressionAttributeValues": {":seen": {"N": str(candidate.visible_at)}}}},
            {"Put": {"TableName": self.table, "Item": target_item}},
        ]
        try:
            transact_write(self._db, ops)
        except StoreError as exc:
            if lost_race(exc):  # another receiver changed or took it first: skip it
                return False
            raise
        return True

    def read_messages(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> list[Message]:
        """One consistent BatchGetItem (bounded retries); bodies in S3 are loaded too."""
        return [self._load(i) for i in self._moves.read(queue_id, shard, message_ids)]

    def move_many(
        self, queue_id: str, shard: int, moves: Sequence[Move], progress: ProgressOp
    ) -> MoveOutcome:
        """Redrive moves (see `dynamo_moves`); a large body is written for its new copy
        first (an object of a move that then fails is left behind, unreferenced)."""
        offloaded = [replace(m, message=self._offload(m.target_queue_id, m.message))
                     for m in moves]
        return self._moves.move(queue_id, shard, offloaded, progress)

    def _copy_objects(self, message: Message, target_queue_id: str) -> Message:
        """Copy a moving message's S3 objects, so that each item owns its own."""
        changes: dict[str, str] = {}
        with translate_errors():
            if message.body_key:
                changes["body_key"] = BodyStore.key_for(target_queue_id, message.message_id)
                self._bodies.copy(message.body_key, changes["body_key"])
            if message.attributes_key:
                changes["attributes_key"] = BodyStore.attributes_key_for(
                    target_queue_id, message.message_id
                )
                self._bodies.copy(message.attributes_key, changes["attributes_key"])
        return message.with_changes(**changes)

    # -- delete and visibility (`dynamo_conditional`) ----------------------------------------
    def delete_expired(self, queue_id: str, shard: int, message_ids: Sequence[str]) -> None:
        """Conditional deletes of expired messages (best effort: the sweeper retries)."""
        self._writes.delete_expired(queue_id, shard, message_ids)

    def delete_claimed(self, refs: Sequence[MessageRef], any_claim: bool = False) -> None:
        """Conditional deletes on the claim token (or on any claim)."""
        self._writes.delete_claimed(refs, any_claim)

    def change_visibility(
        self, changes: Sequence[VisibilityChange], now_ms: int
    ) -> list[VisibilityOutcome]:
        """Conditional updates (claim held, still in flight), in order per message."""
        return self._writes.change_visibility(changes, now_ms)

    # -- counts and purge -------------------------------------------------------------------
    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        """The shard's counter, less its hidden messages: the minute buckets after `now`'s
        minute, and the index for the rest of that minute when its buckets and second
        hints say a message may turn visible in it after `now` (`hidden_counts`;
        otherwise the count item alone answers).

        The cost is one minute of the shard's messages at most, never its backlog:
        visible is what the counter holds beyond the hidden ones.
        """
        counted = self._counters.read(self.table, queue_id, shard)
        return self._less_hidden(queue_id, shard, counted, now_ms)

    def _less_hidden(self, queue_id: str, shard: int, counted: ShardCount, now_ms: int,
                     weighted: bool = False) -> Counts:
        """A shard's counts from its count item: the index over the rest of this minute is
        read only when the shard holds messages of which its buckets and second hints say
        some may turn visible in this minute after `now` (or whose buckets are not whole
        yet)."""
        in_flight, delayed, until = counted.hidden(now_ms)
        if counted.total > 0 and counted.hides_later_this_minute(now_ms):
            more_in_flight, more_delayed = self.hidden_between(queue_id, shard, now_ms,
                                                               until, weighted)
            in_flight, delayed = in_flight + more_in_flight, delayed + more_delayed
        return Counts(max(0, counted.total - in_flight - delayed), in_flight, delayed)

    def count_many(self, shards: Sequence[tuple[str, int]], now_ms: int,
                   weighted: bool = False) -> dict[tuple[str, int], Counts]:
        """The counts of many shards of any queues, as `count` reads each: their count
        items in one BatchGetItem per hundred, and the index over the rest of this minute
        only where `count` would read it. `weighted`: the index entries
        are FIFO group items, which weigh what they hold in flight."""
        return {(queue_id, shard): self._less_hidden(queue_id, shard, counted, now_ms, weighted)
                for (queue_id, shard), counted
                in self._counters.read_many(self.table, shards).items()}

    def hidden_between(self, queue_id: str, shard: int, now_ms: int, until: int,
                       weighted: bool = False) -> tuple[int, int]:
        """(in flight, delayed) of the shard's index entries hidden after `now` and
        before `until` (the main lane only)."""
        in_flight = delayed = 0
        pk = {":pk": {"S": items.partition_key(queue_id, shard)}, ":now": {"N": str(now_ms + 1)},
              ":until": {"N": str(min(until, LANE_BASE) - 1)}}
        for page in self._pages(KeyConditionExpression="pk = :pk AND visible_at BETWEEN :now "
                                "AND :until",
                                ExpressionAttributeValues=pk, ProjectionExpression="rc"):
            for item in page.get("Items", []):
                held = int(item["rc"]["N"])
                if held > 0:
                    in_flight += held if weighted else 1
                else:
                    delayed += 1
        return in_flight, delayed

    def active_shards(self) -> list[tuple[str, int]]:
        """The (queue id, shard) this table's counts call active: holding messages, or
        written lately (`ShardCounters.active`)."""
        return self._counters.active(self.table)

    def release_quiet(self, shards: Sequence[tuple[str, int]], now_ms: int) -> int:
        """Take the empty, quiet ones among `shards` out of the active set."""
        return self._counters.release_quiet(self.table, shards, now_ms)

    def loads(self, shards: Sequence[tuple[str, int]], now_ms: int,
              window_ms: int) -> dict[tuple[str, int], ShardLoad]:
        """The load of each (queue id, shard), as the stream handler keeps it on their
        count items."""
        return self._counters.loads(self.table, shards, now_ms, window_ms)

    def _pages(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {"TableName": self.table, "IndexName": VISIBLE_INDEX,
                                       **kwargs}
            if start:
                request["ExclusiveStartKey"] = start
            with translate_errors():
                page = self._db.query(**request)
            yield dict(page)
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def peek(self, queue_id: str, shard: int, limit: int, purged_ms: int = 0) -> list[Message]:
        """The oldest by `sent_ms` among the first PEEK_SAMPLE items of the shard, in one
        Query: message ids do not sort in send order (a deduplicated send's id is a hash),
        so a shard holding more is sampled. Bodies in S3 are loaded for those returned.

        After a purge (`purged_ms`) the sample is read from the visibility index past the
        purge instead: a message that was visible by then was sent before it, so a purged
        backlog that its removal has not reached yet cannot fill the sample. Index entries
        that do not hold the whole message (wide ones) are read back in one
        BatchGetItem."""
        values: dict[str, Any] = {":pk": {"S": items.partition_key(queue_id, shard)}}
        request: dict[str, Any] = {"TableName": self.table, "KeyConditionExpression": "pk = :pk",
                                   "ExpressionAttributeValues": values,
                                   "Limit": max(limit, PEEK_SAMPLE)}
        if purged_ms:
            values[":purged"] = {"N": str(purged_ms)}
            request.update(IndexName=VISIBLE_INDEX,
                           KeyConditionExpression="pk = :pk AND visible_at > :purged")
        with translate_errors():
            result = self._db.query(**request)
        oldest = sorted(result.get("Items", []), key=_send_order)[:limit]
        if purged_ms:
            oldest = self._whole_items(queue_id, shard, oldest)
        return [self._load(item) for item in oldest]

    def _whole_items(self, queue_id: str, shard: int, found: list[Item]) -> list[Item]:
        """Index entries as whole items: those that do not hold the whole message are read
        back in one BatchGetItem (one deleted since the index was read is left out)."""
        wanted = [str(item["sk"]["S"]) for item in found if not items.is_whole(item)]
        if not wanted:
            return found
        read = {str(item["sk"]["S"]): item
                for item in self._moves.read(queue_id, shard, wanted)}
        whole: list[Item] = []
        for item in found:
            if items.is_whole(item):
                whole.append(item)
            elif (again := read.get(str(item["sk"]["S"]))) is not None:
                whole.append(again)
        return whole

    def is_empty(self, queue_id: str, shard: int) -> bool:
        """One index Query of at most one key: every live message has a `visible_at`."""
        with translate_errors():
            result = self._db.query(
                TableName=self.table, IndexName=VISIBLE_INDEX, KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": items.partition_key(queue_id, shard)}},
                Select="COUNT", Limit=1,
            )
        return int(result.get("Count", 0)) == 0

    def purge(self, queue_id: str, shard: int) -> int:
        """Delete every message of a shard, 25 keys to a BatchWriteItem, page by page."""
        deleted = 0
        values = {":pk": {"S": items.partition_key(queue_id, shard)}}
        for page in self._pages(KeyConditionExpression="pk = :pk",
                                ExpressionAttributeValues=values,
                                ProjectionExpression="pk, sk"):
            keys = [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}}
                    for i in page.get("Items", [])]
            left = self._batch_write(keys)
            if left:
                raise StoreThrottledError(f"{len(left)} deletes left unprocessed")
            deleted += len(keys)
        return deleted

    def remove_sent_before(self, queue_id: str, shard: int, before_ms: int | None,
                           start: str | None, max_items: int,
                           now_ms: int) -> tuple[Counts, str | None]:
        """One bounded step of a purge's removal: read the shard's messages from `start`
        (a key this returned, None: the beginning) page by page, up to about `max_items`,
        and delete, 25 keys to a BatchWriteItem, those sent before `before_ms` (None:
        all). Return how many were deleted, by the count each weighed in at `now_ms`, and
        where the next step starts (None: done). Deleting what is gone already is
        harmless, so a step may be run again."""
        values: dict[str, Any] = {":pk": {"S": items.partition_key(queue_id, shard)}}
        read = 0
        removed = Counts()
        key = json.loads(start) if start else None
        while read < max_items:
            request: dict[str, Any] = {
                "TableName": self.table, "IndexName": VISIBLE_INDEX,
                "KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": values,
                "ProjectionExpression": f"pk, sk, sent_ms, {items.WEIGHT_PROJECTION}",
                "Limit": min(1000, max_items)}
            if key:
                request["ExclusiveStartKey"] = key
            with translate_errors():
                page = self._db.query(**request)
            found = page.get("Items", [])
            read += len(found)
            gone = [i for i in found if items.sent_by(i, before_ms)]
            keys = [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}} for i in gone]
            left = self._batch_write(keys) if keys else []
            if left:
                raise StoreThrottledError(f"{len(left)} deletes left unprocessed")
            for item in gone:
                removed += items.weight_at(item, now_ms)
            key = page.get("LastEvaluatedKey")
            if not key:
                return removed, None
        return removed, json.dumps(key, sort_keys=True)


def _send_order(item: Item) -> tuple[int, str]:
    return int(item.get("sent_ms", {}).get("N", "0")), str(item["sk"]["S"])
