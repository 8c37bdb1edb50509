"""How many messages each queue shard holds, kept from the messages table's stream.

No request writes a count. The stream handler (`apply_records`) turns each batch of
stream records into one change per queue shard and writes it with one UpdateItem on the
shard's count item in the control table, `count#<messages table>#<queue id>#<shard>#0`:

- `n`: the shard's messages, changed only by `ADD`;
- `seq`: the zero-padded sequence number of the last stream record counted in.

The update is conditional on `seq` being older than the first record it counts, so a
batch seen again (a retried handler, a pump that restarts after kill -9 from an older
checkpoint) is never counted twice: the failed condition returns the stored `seq`, and
only the records after it are counted. This rests on what DynamoDB Streams promise for
one partition key: its records reach one handler at a time, in sequence order.

A record counts +1 when an item becomes a live message and -1 when one stops being
(deleted, purged, expired by TTL, moved, or replaced by a replication tombstone).

The same write keeps the shard's in-flight and delayed messages, as minute buckets
(`chalicelib.backend.hidden_counts`): a claim or a visibility change moves its message
between buckets, so a batch with claims costs its one write too.

The same write stamps the item with `at` (when it last counted a record); a shard whose
item is not marked `listed` yet is added to the region's *active shards*, a small set in
the control table (`chalicelib.dynamo_sets`, `active#<messages table>`), then marked, with
two more writes (a batch counted again after a failure between them lists it then).
Background passes (the retention sweep, the autoscaler) visit the shards of that set, not
every queue; the sweep takes a shard out of it (and `listed` off its item) once it
holds nothing and has counted nothing for `QUIET_MS` (`release_quiet`). A table whose set
was never kept (counted by earlier versions) has it filled once, from a Scan of the count
items (`_seed`).

Slots 1 to 3 of each shard are read too: earlier versions spread request-path counts
over four slots, and messages counted there are counted out here when they go.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chalicelib import dynamo_sets
from chalicelib.backend import hidden_counts, items
from chalicelib.backend.count_cache import CountItemCache
from chalicelib.backend.hidden_counts import ShardCount
from chalicelib.clock import Clock, SystemClock
from chalicelib.clusters import shard_load
from chalicelib.clusters.shard_load import ShardLoad
from chalicelib.domain.exceptions import ConditionFailedError
from chalicelib.dynamo_batches import get_all
from chalicelib.dynamo_errors import translate_errors
from chalicelib.fifo import rules as fifo
from chalicelib.regions.replica import is_tombstone, padded

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger("dmq.counters")
SLOTS = 4  # read: slot 0 is kept from the stream, 1 to 3 hold older counts
_ROUNDS = 3
_NOT_MESSAGES = (fifo.GROUP_PREFIX, fifo.DEDUP_PREFIX, fifo.SEQUENCE_KEY)
_CONDITION = "attribute_not_exists(seq) OR seq < :first"
# Bucket terms (ADD or REMOVE) in one UpdateExpression: well under its 4 KB limit.
MAX_TERMS = 120
_KNOWN_SHARDS = 4096  # shards whose buckets a handler remembers (to remove stale ones)
ACTIVE = "active#"  # the set of active shards of a messages table: active#<table>
# A shard that holds nothing leaves the active set once it has counted nothing for this
# long: longer than the autoscaler's widest load window and a check interval.
QUIET_MS = 5 * 60_000
_LEGACY_SHARDS = 100_000  # shards whose older slots a process remembers
_RELEASE = "n <= :zero AND (attribute_not_exists(#at) OR #at < :quiet)"


@dataclass(frozen=True)
class Change:
    """One stream record's effect on its shard's count and buckets."""

    table: str
    pk: str
    seq: str  # padded: string order is stream order
    delta: int
    buckets: Mapping[str, int] = field(default_factory=dict)
    hints: Mapping[str, frozenset[int]] = field(default_factory=dict)  # second hints


def is_live_message(image: Mapping[str, Any] | None) -> bool:
    """Whether an item image is a message that counts (not FIFO bookkeeping, not a
    replication tombstone)."""
    if not image or is_tombstone(image) or "sk" not in image:
        return False
    return not str(image["sk"].get("S", "")).startswith(_NOT_MESSAGES)


def table_of(record: Mapping[str, Any]) -> str:
    """The table a stream record (Lambda event form) came from, by its source ARN."""
    arn = str(record.get("eventSourceARN", ""))
    return arn.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in arn else ""


def changes_of(records: Sequence[Mapping[str, Any]], now_ms: int) -> list[Change]:
    """The count changes of a batch, in order; records that change no count, and no
    bucket a count still reads at `now_ms`, are left out."""
    found: list[Change] = []
    for record in records:
        data = record.get("dynamodb", {})
        old, new = data.get("OldImage"), data.get("NewImage")
        delta = int(is_live_message(new)) - int(is_live_message(old))
        buckets = hidden_counts.kept(hidden_counts.bucket_changes(old, new), now_ms)
        hints = hidden_counts.hidden_seconds(new, now_ms)
        pk = data.get("Keys", {}).get("pk", {}).get("S")
        if (delta or buckets or hints) and pk:
            found.append(Change(table_of(record), str(pk), padded(str(data["SequenceNumber"])),
                                delta, buckets, hints))
    return found


def _chunks(changes: list[Change]) -> list[list[Change]]:
    """Runs of changes, in order, each touching at most MAX_TERMS // 2 buckets and second
    hints (the rest of an update's terms are its two load slots and stale attributes it
    removes)."""
    runs: list[list[Change]] = [[]]
    names: set[str] = set()
    for change in changes:
        touched = change.buckets.keys() | change.hints.keys()
        if runs[-1] and len(names | touched) > MAX_TERMS // 2:
            runs.append([])
            names = set()
        runs[-1].append(change)
        names |= touched
    return runs


def _sum_of(found: Iterable[Mapping[str, Any] | None]) -> int | None:
    """What older slots hold in all (None: none of them exists with a count)."""
    counts = [int(i["n"]["N"]) for i in found if i is not None and "n" in i]
    return sum(counts) if counts else None


class ShardCounters:
    """Reads the message counts of queue shards; the stream handler keeps them."""

    def __init__(self, client: DynamoDBClient, table: str, slots: int = SLOTS,
                 clock: Clock | None = None, cache: CountItemCache | None = None) -> None:
        self._db = client
        self.table = table
        self._slots = slots
        self._clock: Clock = clock or SystemClock()
        # Count items read since their last change, where this process sees every change.
        self._cache = cache
        self._known: dict[tuple[str, str], set[str]] = {}  # buckets each shard's item holds
        # What the older slots of a shard hold (None: none of them exists), read once.
        self._legacy: dict[tuple[str, str, int], int | None] = {}

    def key(self, messages_table: str, pk: str, slot: int = 0) -> dict[str, Any]:
        """The control-table key of one slot of a shard (`pk` is `<queue id>#<shard>`)."""
        return {"key": {"S": f"count#{messages_table}#{pk}#{slot}"}}

    def read(self, messages_table: str, queue_id: str, shard: int) -> ShardCount:
        """A shard's count item and what its older slots hold: its four slots in one
        BatchGetItem the first time in this process, then its kept slot alone (nothing,
        while the cache holds it; what the older slots hold never changes)."""
        pk = items.partition_key(queue_id, shard)
        kept = self.key(messages_table, pk)["key"]["S"]
        shard_key = (messages_table, queue_id, shard)
        older = [] if shard_key in self._legacy else [
            self.key(messages_table, pk, slot)["key"]["S"] for slot in range(1, self._slots)]
        found = self._kept_slots([kept], older)
        if older:
            self._remember_legacy({shard_key: _sum_of(found.get(k) for k in older)})
        legacy = self._legacy.get(shard_key)
        item = found.get(kept)
        counted = int(item["n"]["N"]) if item is not None and "n" in item else 0
        return ShardCount.of(item, max(0, counted + (legacy or 0)), legacy is not None)

    def loads(self, messages_table: str, shards: Sequence[tuple[str, int]], now_ms: int,
              window_ms: int) -> dict[tuple[str, int], ShardLoad]:
        """The load of each (queue id, shard) over the last `window_ms`: one BatchGetItem
        per hundred shards, of any queues, projected on that window's slots."""
        slots = [shard_load.slot_name(kind, now_ms - shard_load.SETTLE_MS
                                      - back * shard_load.SLOT_MS)
                 for kind in (shard_load.IN, shard_load.OUT)
                 for back in range(1, max(1, window_ms // shard_load.SLOT_MS) + 1)]
        keys = {self.key(messages_table, items.partition_key(q, s))["key"]["S"]: (q, s)
                for q, s in shards}
        found = get_all(self._db, self.table, [{"key": {"S": k}} for k in keys],
                        consistent=False, projection=", ".join(["#k", *slots]),
                        names={"#k": "key"})
        by_shard = {keys[str(i["key"]["S"])]: i for i in found}
        return {pair: shard_load.load_of(by_shard.get(pair), now_ms, window_ms)
                for pair in shards}

    def read_many(self, messages_table: str, shards: Sequence[tuple[str, int]],
                  ) -> dict[tuple[str, int], ShardCount]:
        """The count items of many (queue id, shard): one BatchGetItem per hundred shards
        of their kept slot; the older slots (1 to 3) only of shards whose item does not
        prove them absent (`hnew`), once per process (no version writes them any more, so
        what they hold never changes)."""
        keys = {self.key(messages_table, items.partition_key(q, s))["key"]["S"]: (q, s)
                for q, s in shards}
        by_shard = {keys[k]: item for k, item in self._kept_slots(list(keys)).items()}
        unknown = [(messages_table, q, s) for q, s in shards
                   if "hnew" not in by_shard.get((q, s), {})
                   and (messages_table, q, s) not in self._legacy]
        if unknown:
            self._read_legacy(unknown)
        counts = {}
        for q, s in shards:
            item = by_shard.get((q, s))
            legacy = None if item is not None and "hnew" in item else self._legacy.get(
                (messages_table, q, s))
            counted = int(item["n"]["N"]) if item is not None and "n" in item else 0
            counts[(q, s)] = ShardCount.of(item, max(0, counted + (legacy or 0)),
                                           legacy is not None)
        return counts

    def _kept_slots(self, keys: list[str], older: Sequence[str] = ()
                    ) -> dict[str, dict[str, Any]]:
        """The count items of these keys that exist: from the cache those read since
        their last change (`count_cache`), the rest, and the `older` slots' keys, in one
        BatchGetItem per hundred (consistent where they are kept: an eventually consistent
        read could keep an item older than the change it followed)."""
        began = self._cache.begin() if self._cache is not None else None
        found: dict[str, dict[str, Any]] = {}
        missing = []
        for key in keys:
            kept = self._cache.get(key) if self._cache is not None and began is not None \
                else None
            if kept is None:
                missing.append(key)
            elif kept:
                found[key] = kept[0]
        if missing or older:
            read = get_all(self._db, self.table,
                           [{"key": {"S": k}} for k in [*missing, *older]],
                           consistent=began is not None)
            found.update({str(i["key"]["S"]): i for i in read})
            if self._cache is not None and began is not None:
                for key in missing:
                    self._cache.put(began, key, [found[key]] if key in found else [])
        return found

    def _changed(self, table: str, pk: str) -> None:
        """A write to the shard's count item ended (or failed and may have written)."""
        if self._cache is not None:
            self._cache.changed(self.key(table, pk)["key"]["S"])

    def _read_legacy(self, shards: Sequence[tuple[str, str, int]]) -> None:
        """What slots 1 to 3 of these shards hold (None: no such item)."""
        keys = {self.key(t, items.partition_key(q, s), slot)["key"]["S"]: (t, q, s)
                for t, q, s in shards for slot in range(1, self._slots)}
        found = get_all(self._db, self.table, [{"key": {"S": k}} for k in keys],
                        consistent=False)
        by_shard: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {s: [] for s in shards}
        for item in found:
            by_shard[keys[str(item["key"]["S"])]].append(item)
        self._remember_legacy({shard: _sum_of(held) for shard, held in by_shard.items()})

    def _remember_legacy(self, sums: Mapping[tuple[str, str, int], int | None]) -> None:
        if len(self._legacy) > _LEGACY_SHARDS:
            self._legacy.clear()
        self._legacy.update(sums)

    def active(self, messages_table: str) -> list[tuple[str, int]]:
        """The (queue id, shard) of the table's active shards: those that hold messages
        or counted a record in the last QUIET_MS (one BatchGetItem)."""
        found = []
        members, whole = dynamo_sets.members_and_mark(self._db, self.table,
                                                      ACTIVE + messages_table)
        if not whole:
            members |= self._seed(messages_table)
        for pk in members:
            queue_id, _, shard = pk.rpartition("#")
            if queue_id and shard.isdigit():
                found.append((queue_id, int(shard)))
        return sorted(found)

    def _seed(self, messages_table: str) -> set[str]:
        """Fill the active set of a table that had none (a deployment counted by earlier
        versions): one Scan of the control table for the shards whose count items (any
        slot) hold a count, then the set's mark; what it added."""
        prefix = f"count#{messages_table}#"
        found: set[str] = set()
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self.table, "ProjectionExpression": "#k",
                "FilterExpression": "begins_with(#k, :prefix) AND n <> :zero",
                "ExpressionAttributeNames": {"#k": "key"},
                "ExpressionAttributeValues": {":prefix": {"S": prefix}, ":zero": {"N": "0"}}}
            if start:
                request["ExclusiveStartKey"] = start
            with translate_errors():
                page = self._db.scan(**request)
            for item in page.get("Items", []):
                pk = str(item["key"]["S"])[len(prefix):].rpartition("#")[0]
                if pk:
                    found.add(pk)
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        if found:
            dynamo_sets.add(self._db, self.table, ACTIVE + messages_table, found)
        dynamo_sets.mark(self._db, self.table, ACTIVE + messages_table)
        return found

    def release_quiet(self, messages_table: str, shards: Sequence[tuple[str, int]],
                      now_ms: int) -> int:
        """Take out of the active set the shards among `shards` that hold nothing and have
        counted nothing for QUIET_MS; how many. Each is removed from the set first, then
        its item's `listed` is removed on the condition that it is still empty and quiet: when
        that fails (a record was counted meanwhile, which saw `listed` and added nothing), the
        shard is added back."""
        keys = {self.key(messages_table, items.partition_key(q, s))["key"]["S"]: (q, s)
                for q, s in shards}
        found = get_all(self._db, self.table, [{"key": {"S": k}} for k in keys],
                        consistent=False, projection="#k, n, #at, hnew",
                        names={"#k": "key", "#at": "at"})
        by_pair = {keys[str(i["key"]["S"])]: i for i in found}
        quiet = [pair for pair, i in by_pair.items()
                 if int(i.get("n", {}).get("N", "0")) <= 0
                 and int(i.get("at", {}).get("N", "0")) < now_ms - QUIET_MS]
        # A shard that older versions counted too may hold messages its slot 0 misses.
        legacy = [pair for pair in quiet if "hnew" not in by_pair[pair]]
        held = {pair for pair, count in self.read_many(messages_table, legacy).items()
                if count.total > 0} if legacy else set()
        released = 0
        for queue_id, shard in quiet:
            if (queue_id, shard) in held:
                continue
            pk = items.partition_key(queue_id, shard)
            dynamo_sets.remove(self._db, self.table, ACTIVE + messages_table, [pk])
            try:
                with translate_errors():
                    self._db.update_item(
                        TableName=self.table, Key=self.key(messages_table, pk),
                        UpdateExpression="REMOVE listed", ConditionExpression=_RELEASE,
                        ExpressionAttributeNames={"#at": "at"},
                        ExpressionAttributeValues={":zero": {"N": "0"},
                                                   ":quiet": {"N": str(now_ms - QUIET_MS)}})
                released += 1
            except ConditionFailedError:
                dynamo_sets.add(self._db, self.table, ACTIVE + messages_table, [pk])
            finally:
                self._changed(messages_table, pk)
        return released

    def total(self, messages_table: str, queue_id: str, shard: int) -> int:
        """The messages a shard holds by its count (never below 0)."""
        return self.read(messages_table, queue_id, shard).total

    def apply_records(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Count a batch of messages-table stream records in: one conditional UpdateItem
        per shard whose count or buckets changed. Returns the writes made. A store fault
        raises, so the batch is handed over again (and counted once)."""
        now_ms = self._clock.now_ms()
        per_shard: dict[tuple[str, str], list[Change]] = {}
        for change in changes_of(records, now_ms):
            per_shard.setdefault((change.table, change.pk), []).append(change)
        writes = 0
        for (table, pk), changes in per_shard.items():
            for run in _chunks(changes):
                writes += self._apply(table, pk, run, now_ms)
        return writes

    def _apply(self, table: str, pk: str, changes: list[Change], now_ms: int) -> int:
        """Add the changes after the stored `seq`; the writes it took."""
        try:
            return self._apply_rounds(table, pk, changes, now_ms)
        finally:
            self._changed(table, pk)

    def _apply_rounds(self, table: str, pk: str, changes: list[Change], now_ms: int) -> int:
        for attempt in range(_ROUNDS):
            update, written, stale = self._update(table, pk, changes, now_ms)
            try:
                with translate_errors():
                    result = self._db.update_item(
                        TableName=self.table, Key=self.key(table, pk), **update,
                        ConditionExpression=_CONDITION, ReturnValues="ALL_OLD",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
            except ConditionFailedError as exc:
                if exc.item and "listed" not in exc.item:  # counted, not yet listed
                    self._list(table, pk)
                stored = str((exc.item or {}).get("seq", {}).get("S", ""))
                changes = [c for c in changes if c.seq > stored]
                if not changes:
                    return attempt + 1  # all of it was counted before
                continue
            old = result.get("Attributes")
            self._remember(table, pk, old, written, stale)
            if not old:  # the shard's first count: listed and known new in one write
                self._list(table, pk, new=True)
                return attempt + 2
            if "listed" not in old:
                self._list(table, pk)
            return attempt + 1
        raise ConditionFailedError(f"the count of {pk} in {table} kept moving")

    def _update(self, table: str, pk: str, changes: list[Change], now_ms: int,
                ) -> tuple[dict[str, Any], list[str], list[str]]:
        """The UpdateExpression and its values for `changes`, the buckets, second hints
        and load slots it adds to, and the stale ones it removes."""
        buckets: dict[str, int] = {}
        for change in changes:
            for name, n in change.buckets.items():
                buckets[name] = buckets.get(name, 0) + n
        adds = {name: n for name, n in buckets.items() if n}
        adds.update(shard_load.slot_terms(sum(c.delta > 0 for c in changes),
                                          sum(c.delta < 0 for c in changes), now_ms))
        hints: dict[str, set[int]] = {}
        for change in changes:
            for name, seconds in change.hints.items():
                hints.setdefault(name, set()).update(seconds)
        room = MAX_TERMS - len(adds) - len(hints)
        known = self._known.get((table, pk), set())
        stale = [n for n in hidden_counts.stale(known, now_ms)
                 + shard_load.stale_slots(known, now_ms) if n not in adds and n not in hints
                 ][:room]
        values: dict[str, Any] = {":d": {"N": str(sum(c.delta for c in changes))},
                                  ":first": {"S": changes[0].seq},
                                  ":last": {"S": changes[-1].seq}, ":now": {"N": str(now_ms)}}
        terms = ["n :d"]
        for name, n in sorted(adds.items()):
            token = f":{'p' if n > 0 else 'm'}{abs(n)}"
            values[token] = {"N": str(n)}
            terms.append(f"{name} {token}")
        for index, (name, held) in enumerate(sorted(hints.items())):
            values[f":h{index}"] = {"NS": [str(n) for n in sorted(held)]}
            terms.append(f"{name} :h{index}")
        expression = ("SET seq = :last, hsince = if_not_exists(hsince, :now), "
                      "ssince = if_not_exists(ssince, :now), #at = :now "
                      f"ADD {', '.join(terms)}")
        if stale:
            expression += f" REMOVE {', '.join(stale)}"
        return ({"UpdateExpression": expression, "ExpressionAttributeValues": values,
                 "ExpressionAttributeNames": {"#at": "at"}},
                [*adds, *hints], stale)

    def _list(self, table: str, pk: str, new: bool = False) -> None:
        """Put the shard in the active set, then mark its item `listed` (a failure
        between the two leaves it unmarked: the next count lists it again); `new`: its
        first count, so no message of it is hidden from its buckets (`hnew`) either."""
        dynamo_sets.add(self._db, self.table, ACTIVE + table, [pk])
        with translate_errors():
            self._db.update_item(TableName=self.table, Key=self.key(table, pk),
                                 UpdateExpression="SET listed = :yes" + (
                                     ", hnew = :yes" if new else ""),
                                 ExpressionAttributeValues={":yes": {"BOOL": True}})

    def _remember(self, table: str, pk: str, old: Mapping[str, Any] | None,
                  written: list[str], removed: list[str]) -> None:
        """Which buckets and load slots the shard's item holds now, so a later write
        removes stale ones."""
        if len(self._known) >= _KNOWN_SHARDS and (table, pk) not in self._known:
            self._known.clear()
        names = {n for n in (old or {}) if hidden_counts.attribute_minute(n) is not None
                 or shard_load.slot_of(n) is not None}
        self._known[(table, pk)] = (names | set(written)) - set(removed)
