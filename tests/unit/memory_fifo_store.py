"""The FIFO store (`chalicelib.fifo.store.FifoStore`) in memory: the twin the
FIFO contract tests run beside DynamoDB, with the same rules. Each call is atomic (one
lock), as each of DynamoDB's transactions is. Several front ends share one
`MemoryFifoTable`, as they share a messages table."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from chalicelib.domain.messages import Counts, Message, MessageRef
from chalicelib.fifo import rules as fifo
from chalicelib.fifo.store import (
    ClaimPlan,
    FifoEntry,
    GroupState,
    SendLayout,
    SendOutcome,
)


@dataclass
class _Group:
    """A group item: when it is next served, its message count, its last number, and the
    messages of its current hold (None: not held)."""

    visible_at: int
    n: int = 0
    last: str = ""
    held: set[str] | None = None
    rc: int = 0
    claim: str = ""


@dataclass
class _Stored:
    """A message item: the message, the end of its current receive, its claim."""

    message: Message
    until: int = 0
    claim: str = ""


@dataclass
class MemoryFifoTable:
    """What the front ends share."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    groups: dict[tuple[str, int, str], _Group] = field(default_factory=dict)
    messages: dict[tuple[str, int, str], _Stored] = field(default_factory=dict)
    dedup: dict[tuple[str, str], tuple[str, str, int]] = field(default_factory=dict)
    counters: dict[tuple[str, int, int], int] = field(default_factory=dict)
    attempts: dict[tuple[str, str], tuple[list[MessageRef], str, int]] = field(
        default_factory=dict)


def _dedup_pk(queue_id: str, shard: int, scope: str) -> str:
    return f"{queue_id}#{shard}" if scope == "messageGroup" else f"{queue_id}#dedup"


class MemoryFifoStore:
    """FIFO primitives over a `MemoryFifoTable`."""

    def __init__(self, table: MemoryFifoTable | None = None) -> None:
        self.table = table or MemoryFifoTable()

    def is_empty(self, queue_id: str, shard: int) -> bool:
        with self.table.lock:
            return not any(k[:2] == (queue_id, shard) for k in self.table.groups)

    # -- send -----------------------------------------------------------------------------
    def send(self, queue_id: str, scope: str, placed: Sequence[tuple[int, Message]],
             now_ms: int, generation: int = 0, layout: SendLayout | None = None,
             purged_ms: int = 0) -> list[SendOutcome]:
        layout = layout or SendLayout()
        t = self.table
        outcomes: list[SendOutcome] = []
        first: dict[tuple[str, str], SendOutcome] = {}
        stored: dict[tuple[int, str], list[Message]] = {}
        with t.lock:
            for index, (shard, message) in enumerate(placed):
                group = message.group_id or ""
                dkey = (_dedup_pk(queue_id, layout.dedup_shard(index, shard), scope),
                        fifo.dedup_key(scope, group, message.dedup_id or "", generation))
                live = t.dedup.get(dkey)
                stale = fifo.dedup_stale_before(now_ms, purged_ms)
                if dkey in first or (live is not None and live[2] > stale):
                    mid, seq = ((first[dkey].message.message_id,
                                 first[dkey].message.sequence_number or "")
                                if dkey in first else live[:2])  # type: ignore[index]
                    outcomes.append(SendOutcome(message.with_changes(
                        message_id=mid, sequence_number=seq), True))
                    continue
                seed = layout.seeds.get(shard, 0)
                key = (queue_id, shard, seed)
                t.counters[key] = t.counters.get(key, seed * 1000) + 1
                numbered = message.with_changes(
                    sequence_number=fifo.sequence_number(t.counters[key]))
                t.messages[(queue_id, shard, fifo.message_key(group, numbered.sequence_number
                                                               or ""))] = _Stored(numbered)
                t.dedup[dkey] = (numbered.message_id, numbered.sequence_number or "",
                                 now_ms + fifo.DEDUP_WINDOW_MS)
                stored.setdefault((shard, group), []).append(numbered)
                first[dkey] = SendOutcome(numbered, False)
                outcomes.append(first[dkey])
            for (shard, group), messages in stored.items():
                item = t.groups.setdefault((queue_id, shard, group),
                                           _Group(min(m.visible_at for m in messages)))
                item.n += len(messages)
                item.last = max(m.sequence_number or "" for m in messages)
        return outcomes

    # -- receive --------------------------------------------------------------------------
    def ready_groups(self, queue_id: str, shard: int, now_ms: int,
                     limit: int) -> list[GroupState]:
        with self.table.lock:
            ready = sorted((g.visible_at, name, g.claim)
                           for (q, s, name), g in self.table.groups.items()
                           if (q, s) == (queue_id, shard) and g.visible_at <= now_ms)
        return [GroupState(shard, name, visible_at, fifo.claim_place(claim))
                for visible_at, name, claim in ready[:limit]]

    def first_visible_at(self, queue_id: str, shard: int, until_ms: int) -> int | None:
        with self.table.lock:
            return min((g.visible_at for (q, s, _), g in self.table.groups.items()
                        if (q, s) == (queue_id, shard) and g.visible_at < until_ms),
                       default=None)

    def head(self, queue_id: str, shard: int, group: str, limit: int) -> list[FifoEntry]:
        prefix = fifo.message_prefix(group)
        with self.table.lock:
            keys = sorted(k for k in self.table.messages
                          if k[:2] == (queue_id, shard) and k[2].startswith(prefix))
            return [self._entry(k) for k in keys[:limit]]

    def _entry(self, key: tuple[str, int, str]) -> FifoEntry:
        stored = self.table.messages[key]
        message = stored.message.with_changes(claim_token=stored.claim or None)
        return FifoEntry(key[1], key[2], message, stored.until, message.visible_at)

    def claim(self, queue_id: str, plans: Sequence[ClaimPlan], until: int, now_ms: int,
              attempt: tuple[str, str, bool] | None = None) -> list[int]:
        t = self.table
        with t.lock:
            if attempt is not None and not self._attempt_free(queue_id, attempt, now_ms):
                return []
            won = [i for i, (group, entries, _) in enumerate(plans)
                   if self._claimable(queue_id, group, entries, now_ms)]
            for index in won:
                group, entries, token = plans[index]
                item = t.groups[(queue_id, group.shard, group.group)]
                item.visible_at, item.held, item.rc = until, {e.sort_key for e in entries}, len(
                    entries)
                item.claim = token
                for entry in entries:
                    stored = t.messages[(queue_id, entry.shard, entry.sort_key)]
                    stored.until, stored.claim = until, token
                    stored.message = stored.message.with_changes(
                        receive_count=stored.message.receive_count + 1,
                        first_receive_ms=stored.message.first_receive_ms or now_ms)
            if attempt is not None and won:
                self._record_attempt(queue_id, attempt, plans, won, now_ms)
        return won

    def _claimable(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry],
                   now_ms: int) -> bool:
        item = self.table.groups.get((queue_id, group.shard, group.group))
        if item is None or item.visible_at != group.visible_at:
            return False
        return all((stored := self.table.messages.get((queue_id, e.shard, e.sort_key)))
                   is not None and stored.until <= now_ms for e in entries)

    def _attempt_free(self, queue_id: str, attempt: tuple[str, str, bool], now_ms: int) -> bool:
        attempt_id, receive_id, first = attempt
        found = self.table.attempts.get((queue_id, attempt_id))
        if first:
            return found is None or found[2] <= now_ms
        return found is not None and found[1] == receive_id

    def _record_attempt(self, queue_id: str, attempt: tuple[str, str, bool],
                        plans: Sequence[ClaimPlan], won: list[int], now_ms: int) -> None:
        attempt_id, receive_id, first = attempt
        refs = [MessageRef(queue_id, e.shard, e.sort_key, plans[i][2])
                for i in won for e in plans[i][1]]
        key = (queue_id, attempt_id)
        if first:
            self.table.attempts[key] = (refs, receive_id, now_ms + fifo.ATTEMPT_WINDOW_MS)
        else:
            kept, rid, expires = self.table.attempts[key]
            self.table.attempts[key] = (kept + refs, rid, expires)

    def set_group_visible_at(self, queue_id: str, group: GroupState, visible_at: int) -> None:
        with self.table.lock:
            item = self.table.groups.get((queue_id, group.shard, group.group))
            if item is not None and item.visible_at == group.visible_at:
                item.visible_at = visible_at

    def drop_group(self, queue_id: str, group: GroupState) -> None:
        with self.table.lock:
            key = (queue_id, group.shard, group.group)
            item = self.table.groups.get(key)
            if item is not None and item.visible_at == group.visible_at:
                del self.table.groups[key]

    def remove_head(self, queue_id: str, group: GroupState, entries: Sequence[FifoEntry]) -> bool:
        with self.table.lock:
            item = self.table.groups.get((queue_id, group.shard, group.group))
            if item is None or item.visible_at != group.visible_at:
                return False
            item.n -= len(entries)
            for entry in entries:
                self.table.messages.pop((queue_id, entry.shard, entry.sort_key), None)
        return True

    def move(self, queue_id: str, group: GroupState, entry: FifoEntry, target_queue_id: str,
             target_shard: int, moved: Message, target_seed_ms: int = 0) -> bool:
        t = self.table
        with t.lock:
            item = t.groups.get((queue_id, group.shard, group.group))
            if (item is None or item.visible_at != group.visible_at
                    or (queue_id, entry.shard, entry.sort_key) not in t.messages):
                return False
            item.n -= 1
            del t.messages[(queue_id, entry.shard, entry.sort_key)]
            key = (target_queue_id, target_shard, target_seed_ms)
            t.counters[key] = t.counters.get(key, target_seed_ms * 1000) + 1
            copy = moved.with_changes(
                sequence_number=fifo.sequence_number(t.counters[key]))
            name = copy.group_id or ""
            t.messages[(target_queue_id, target_shard,
                        fifo.message_key(name, copy.sequence_number or ""))] = _Stored(copy)
            target = t.groups.setdefault((target_queue_id, target_shard, name),
                                         _Group(copy.visible_at))
            target.n += 1
            target.last = copy.sequence_number or ""
        return True

    def attempt(self, queue_id: str, attempt_id: str, now_ms: int) -> list[MessageRef] | None:
        with self.table.lock:
            found = self.table.attempts.get((queue_id, attempt_id))
        return None if found is None or found[2] <= now_ms else list(found[0])

    def read(self, refs: Sequence[MessageRef]) -> list[FifoEntry]:
        with self.table.lock:
            return [self._entry((r.queue_id, r.shard, r.message_id)) for r in refs
                    if (r.queue_id, r.shard, r.message_id) in self.table.messages]

    # -- delete and visibility ------------------------------------------------------------
    def delete(self, refs: Sequence[MessageRef], now_ms: int) -> dict[int, str]:
        t = self.table
        failed: dict[int, str] = {}
        touched: dict[tuple[str, int, str], list[MessageRef]] = {}
        with t.lock:
            for index, ref in enumerate(refs):
                key = (ref.queue_id, ref.shard, ref.message_id)
                stored = t.messages.get(key)
                if stored is None:
                    continue
                if stored.until <= now_ms:
                    failed[index] = "expired"
                    continue
                del t.messages[key]
                group_key = (ref.queue_id, ref.shard, fifo.group_of_key(ref.message_id))
                touched.setdefault(group_key, []).append(ref)
            for group_key, mine in touched.items():
                self._after_delete(group_key, {r.message_id for r in mine}, now_ms)
        return failed

    def _after_delete(self, key: tuple[str, int, str], gone: set[str], now_ms: int) -> None:
        """The group once `gone` left it: released when nothing of its hold is left,
        removed when it holds no message either."""
        item = self.table.groups.get(key)
        if item is None:
            return
        item.n -= len(gone)
        if item.held is not None:
            item.held -= gone
            item.rc = len(item.held)
            if item.held:
                return
            item.held = None
        if item.n <= 0:
            del self.table.groups[key]
        else:
            item.visible_at, item.rc, item.claim = now_ms, 0, ""

    def change_visibility(self, ref: MessageRef, until: int, now_ms: int) -> str:
        t = self.table
        with t.lock:
            stored = t.messages.get((ref.queue_id, ref.shard, ref.message_id))
            if stored is None:
                return "not_found"
            if stored.until <= now_ms:
                return "not_in_flight"
            stored.until = until
            item = t.groups.get((ref.queue_id, ref.shard, fifo.group_of_key(ref.message_id)))
            if item is not None and item.visible_at > until:
                item.visible_at = until
                if until <= now_ms and item.held is not None:
                    item.held.discard(ref.message_id)
                    item.rc -= 1
        return "changed"

    # -- counts, purge, peek ----------------------------------------------------------------
    def count(self, queue_id: str, shard: int, now_ms: int) -> Counts:
        with self.table.lock:
            mine = [(k, s) for k, s in self.table.messages.items() if k[:2] == (queue_id, shard)]
            groups = [g for k, g in self.table.groups.items() if k[:2] == (queue_id, shard)]
        in_flight = sum(1 for _, s in mine if s.until > now_ms)
        delayed = sum(1 for g in groups if g.visible_at > now_ms and not g.held)
        return Counts(max(0, len(mine) - in_flight - delayed), in_flight, delayed)

    def count_many(self, shards: Sequence[tuple[str, int]],
                   now_ms: int) -> dict[tuple[str, int], Counts]:
        return {(queue_id, shard): self.count(queue_id, shard, now_ms)
                for queue_id, shard in shards}

    def purge(self, queue_id: str, shard: int) -> int:
        with self.table.lock:
            gone = [k for k in self.table.messages if k[:2] == (queue_id, shard)]
            for key in gone:
                del self.table.messages[key]
            for key in [k for k in self.table.groups if k[:2] == (queue_id, shard)]:
                del self.table.groups[key]
        return len(gone)

    def peek(self, queue_id: str, shard: int, limit: int) -> list[Message]:
        with self.table.lock:
            keys = sorted(k for k in self.table.messages if k[:2] == (queue_id, shard))
            return [replace(self.table.messages[k].message) for k in keys[:limit]]
