"""A standard queue's receive: one pass over the shards from a random offset, the claims
of each shard's visible candidates (read ahead by a frontier), expired messages dropped
and over-received ones moved to the dead-letter queue."""

from __future__ import annotations

import collections
import logging
import random
import threading
from collections.abc import Callable, Sequence

from chalicelib import observability
from chalicelib.backend.store import CandidatePage
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.lanes import LANE_BASE, lane_slot
from chalicelib.domain.messages import Candidate, CandidateAction, MessageRef, new_claim_token
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.service import fairness
from chalicelib.service.frontier import Frontier
from chalicelib.service.message_kinds import QueueByArn, Received, ReceiveStats
from chalicelib.service.receipts import ReceiptCodec

_CLAIM_ROUNDS = 3
# A shard with nothing visible is skipped by this process's receives until its next hidden
# message becomes visible, for at most this long, unless this process writes to it first.
# Receives read the index this far past `now` to learn that time in the same request.
# Like SQS short polling, a receive may then miss a message that another front end has
# just sent; a long poll finds it on its next pass.
EMPTY_HINT_MS = 1000
# Where the process follows every change to its shards (the local server reads the
# messages streams: `ShardHints.follow`), another writer's change voids a hint as this
# process's own writes do, so a hint may last until the shard's next hidden message shows,
# up to this long: a thousand idle long polls then cost no store request between changes.
FOLLOWED_HINT_MS = 600_000
# The messages this process claimed last (per process, all shards): the stream shows each
# one's insert after the fact, and an insert of a message claimed here already is no news.
# Some seconds of claims at a busy server's rate; the stream reader is rarely that far behind.
CLAIMS_KEPT = 8192
# At most this many messages sent here are kept per slot for receives to claim without a
# read (a receive takes ten at most): past it (a queue nobody reads), the slot is
# forgotten and read again. So a backlog building on 10,000 drained queues keeps at most
# ten candidates of each in memory.
SENT_KEPT = 10
logger = logging.getLogger("chalicelib.service.messages")


def _never() -> bool:
    return False


def _sent_order(candidate: Candidate) -> tuple[int, str]:
    """Send time, then message id (the order of one process's, or one request's, messages
    within a millisecond); an index entry without its send time (a table made by an
    earlier version) goes by when it turned visible."""
    return candidate.sent_ms or candidate.visible_at, candidate.message_id


class ShardHints:
    """What this process knows of its standard shards: which are empty until when, and
    how often it wrote to each (a write since a read voids that read's empty hint)."""

    def __init__(self) -> None:
        # (queue id, slot) -> (until, short until): the second bounds a hint to
        # EMPTY_HINT_MS from when it was made, for the times changes are not followed.
        self._empty_until: dict[tuple[str, int], tuple[int, int]] = {}
        # (queue id, slot) -> messages this process sent to a slot while it was hinted
        # empty: under that hint, the slot holds these visible, and nothing else.
        self._sent: dict[tuple[str, int], list[Candidate]] = {}
        self._writes: dict[tuple[str, int], int] = {}
        # (queue id, slot, message id) -> when this process claimed it, oldest first
        self._claimed: collections.OrderedDict[tuple[str, int, str], int] = \
            collections.OrderedDict()
        self._lock = threading.Lock()
        self._following: Callable[[], bool] = _never

    def follow(self, following: Callable[[], bool]) -> None:
        """`following()` says whether every change to the shards reaches `observed`
        (a stream reader that is up to date); while it does, hints last longer."""
        self._following = following

    def following(self) -> bool:
        """Whether every change to the shards reaches `observed` now."""
        return self._following()

    def horizon_ms(self) -> int:
        """How far past `now` a read looks for the next hidden message."""
        return FOLLOWED_HINT_MS if self._following() else EMPTY_HINT_MS

    def touch(self, queue_id: str, shard_id: int, sent: Sequence[Candidate] = ()) -> None:
        """This process wrote to the shard: it is no longer known to be empty. `sent`:
        the write was these messages, visible now, and nothing else: a shard hinted
        empty then holds exactly those and whatever it was known to hold (a receive
        claims them without reading the index, `take_sent`)."""
        with self._lock:
            key = (queue_id, shard_id)
            self._writes[key] = self._writes.get(key, 0) + 1
            known = self._sent.get(key, [])
            if sent and key in self._empty_until and len(known) + len(sent) <= SENT_KEPT:
                self._sent[key] = [*known, *sent]
            else:
                self._drop(key)

    def _drop(self, key: tuple[str, int]) -> None:
        """Forget what is known of the slot (the lock held)."""
        self._empty_until.pop(key, None)
        self._sent.pop(key, None)

    def drop(self, queue_id: str, slot: int) -> None:
        """Forget what is known of the slot: the next receive reads it."""
        with self._lock:
            self._drop((queue_id, slot))

    def take_sent(self, queue_id: str, slot: int, now: int, limit: int) -> list[Candidate]:
        """Up to `limit` of the messages known to be all the slot holds visible (sent
        here since it was hinted empty), oldest first, handed to one receive; [] when
        none is known."""
        key = (queue_id, slot)
        with self._lock:
            sent = self._sent.get(key)
            if not sent or self._hint_end(key) <= now:
                return []
            handed, rest = sent[:limit], sent[limit:]
            if rest:
                self._sent[key] = rest
            else:
                del self._sent[key]
            return handed

    def claimed_sent(self, queue_id: str, slot: int, visible_again: int) -> None:
        """A receive claimed what `take_sent` handed it, until `visible_again`: the
        hint may last no longer (a message not deleted shows again then, with no
        change to the store to say so)."""
        key = (queue_id, slot)
        with self._lock:
            hint = self._empty_until.get(key)
            if hint is not None:
                self._empty_until[key] = (min(hint[0], visible_again),
                                          min(hint[1], visible_again))

    def claimed(self, queue_id: str, slot: int, message_ids: list[str], now: int) -> None:
        """This process claimed these messages of the slot at `now`. No lock: each step
        is one operation of the ordered dict, atomic under the interpreter (two receives
        trimming at once may drop an entry more, which only costs a read)."""
        for message_id in message_ids:
            self._claimed[(queue_id, slot, message_id)] = now
        while len(self._claimed) > CLAIMS_KEPT:
            try:
                self._claimed.popitem(last=False)
            except KeyError:
                break

    def observed(self, queue_id: str, slot: int, visible_at: int | None, now: int,
                 inserted: str = "") -> bool:
        """A change to the shard that the stream showed (any writer's). It voids a read
        in progress like a write; a message visible now, or before the hint ends, ends or
        shortens it. True when receivers waiting on the queue should look again.

        `inserted`: the change is the insert of this message. One that this process has
        claimed since it turned visible is past news (its claim came after the insert,
        and the claim's own change follows): it changes nothing. A message inserted anew
        under the same id after the claim turns visible later than the claim, so it
        still counts."""
        key = (queue_id, slot)
        with self._lock:
            claimed_at = self._claimed.get((queue_id, slot, inserted)) if inserted else None
            if claimed_at is not None and visible_at is not None and visible_at <= claimed_at:
                return False
            if inserted and any(c.message_id == inserted for c in self._sent.get(key, ())):
                return False  # sent here, and known to the hint already
            self._writes[key] = self._writes.get(key, 0) + 1
            hint = self._empty_until.get(key)
            if hint is None or visible_at is None or visible_at >= hint[0]:
                return False
            if visible_at <= now:
                self._drop(key)
            else:
                self._empty_until[key] = (visible_at, min(hint[1], visible_at))
            return True

    def _hint_end(self, key: tuple[str, int]) -> int:
        hint = self._empty_until.get(key)
        if hint is None:
            return 0
        return hint[0] if self._following() else hint[1]

    def _until(self, key: tuple[str, int]) -> int:
        """Until when the slot holds nothing visible (0: it may now)."""
        return 0 if self._sent.get(key) else self._hint_end(key)

    def known_empty(self, queue_id: str, shard_id: int, now: int) -> bool:
        """True while the shard is known to hold nothing visible."""
        return self._until((queue_id, shard_id)) > now

    def quiet_until(self, queue_id: str, slots: list[int]) -> int:
        """Until when none of these slots is expected to hold a visible message (0: one
        may hold one now)."""
        return min((self._until((queue_id, slot)) for slot in slots), default=0)

    def writes(self, queue_id: str, shard_id: int) -> int:
        """How many writes this process made to the shard."""
        return self._writes.get((queue_id, shard_id), 0)

    def hint_empty(self, queue_id: str, shard: int, until: int, writes: int,
                   now: int) -> None:
        """Nothing is visible in the shard: skip it until its next message shows (or the
        horizon's end).

        `writes` is this process's write count of the shard when the receive read it; a
        write since then means the shard may no longer be empty, so no hint is left.
        """
        key = (queue_id, shard)
        with self._lock:
            if self._writes.get(key, 0) == writes:
                self._empty_until[key] = (until, min(until, now + EMPTY_HINT_MS))
                self._sent.pop(key, None)  # nothing written since: nothing was sent


class StandardReceiver:
    """Receives of standard queues."""

    def __init__(self, stores: ClusterStores, receipts: ReceiptCodec, clock: Clock,
                 wakeups: Wakeups, queue_by_arn: QueueByArn, fair: fairness.Fairness,
                 hints: ShardHints) -> None:
        self._stores = stores
        self._receipts = receipts
        self._clock = clock
        self._wakeups = wakeups
        self._queue_by_arn = queue_by_arn
        self.fairness = fair
        self._hints = hints
        self.stats = ReceiveStats()
        self._contention: dict[str, float] = {}
        self._frontiers: dict[tuple[str, int], Frontier] = {}
        self._lock = threading.Lock()

    def forget(self, queue_id: str) -> None:
        """The queue was purged: what the frontiers kept of it is gone."""
        with self._lock:
            frontiers = [f for (q, _), f in self._frontiers.items() if q == queue_id]
        for frontier in frontiers:
            frontier.forget()

    def quiet_until(self, queue: QueueRecord, now: int) -> int | None:
        """Until when no shard a receive would read is expected to show a message (0:
        one may hold one now): what a long poll may sleep through, unless woken. None
        while changes are not followed: the hints then last a second at most."""
        if not self._hints.following():
            return None
        slots = [shard.id for shard in queue.shards]
        if self.fairness.reads_lanes(queue.queue_id, now):
            slots += [lane_slot(shard.id) for shard in queue.shards]
        return self._hints.quiet_until(queue.queue_id, slots)

    def receive_once(self, queue: QueueRecord, wanted: int, timeout: int) -> list[Received]:
        """One pass over the shards from a random offset.

        A store error after some messages were claimed ends the pass and returns them:
        raising would leave them hidden until their visibility timeout, their receive
        count raised, without any consumer having had them.
        """
        got: list[Received] = []
        ring = queue.shards
        offset = random.randrange(len(ring))
        now = self._clock.now_ms()
        try:
            # The main lane of every shard, then (fair queues) what the noisy lanes hold.
            for lane in (False, True):
                if lane and (len(got) >= wanted
                             or not self.fairness.reads_lanes(queue.queue_id, now)):
                    break
                for step in range(len(ring)):
                    shard = ring[(offset + step) % len(ring)]
                    if self._hints.known_empty(queue.queue_id, lane_slot(shard.id) if lane
                                         else shard.id, now):
                        continue
                    self._claim_from_shard(queue, shard, wanted, timeout, got, lane)
                    if len(got) >= wanted:
                        break
        except StoreError:
            if not got:
                raise
            logger.warning("receive on %s cut short by a store error; returning %d claimed",
                           queue.queue_id, len(got))
        with self._lock:
            self.stats.receives += 1
            self.stats.returned += len(got)
        self.fairness.saw_received(queue.queue_id, [r.message.group_id for r in got], now)
        return got

    def _claim_from_shard(
        self, queue: QueueRecord, placed: Shard, wanted: int, timeout: int, got: list[Received],
        lane: bool = False,
    ) -> None:
        """Claim from one shard into `got` until it holds `wanted` or the shard runs dry.

        While receives come steadily a read asks for at least READ_AHEAD candidates; what
        this receive does not take the frontier keeps for the next receive of the shard
        here, which then makes no read. A lost claim drops what is kept (see `Frontier`).

        With `lane`, from the shard's noisy lane (fair queues): the same reads, shifted by
        LANE_BASE, with their own frontier and empty hint.
        """
        shard = placed.id
        base = LANE_BASE if lane else 0
        slot = lane_slot(shard) if lane else shard
        store = self._stores.of(placed.cluster)
        if not lane:
            handed = self._hints.take_sent(queue.queue_id, slot, self._clock.now_ms(),
                                           wanted - len(got))
            if handed and self._claim_sent(queue, placed, handed, wanted, timeout, got):
                return
        frontier = self._frontier(queue.queue_id, slot)
        writes = self._hints.writes(queue.queue_id, slot)
        after: Candidate | None = None
        upcoming: list[int] = []
        horizon = self._hints.horizon_ms()
        for round_ in range(_CLAIM_ROUNDS):
            now = self._clock.now_ms()
            contention = self._contention.get(queue.queue_id, 0.0)
            limit = (wanted - len(got)) + min(wanted - len(got), round(contention))

            size = frontier.read_size(limit)

            def fetch(start: Candidate | None, now: int = now, size: int = size) -> CandidatePage:
                # The read reaches the hints' horizon past now, so that a shard with nothing
                # visible also tells, in the same request, when its next message shows.
                # Nothing visible by the last purge was sent after it: the read starts
                # past it, so a purged backlog costs a receive nothing.
                low = base + queue.purged_ms + 1 if queue.purged_ms else base
                if start is not None and start.visible_at < low:
                    start = None
                page = store.find_candidates(queue.queue_id, shard, base + now + horizon,
                                             size, start, low)
                visible = [c for c in page.candidates if c.visible_at <= base + now]
                later = [c.visible_at - base for c in page.candidates if c.visible_at > base + now]
                upcoming.extend(later[:1])
                return CandidatePage(visible, page.more and not later, page.items_read)

            with frontier.reserve(fetch, after, limit, base + now) as page:
                # Oldest sent first among what the read found: a message visible again
                # after its timeout goes before those sent after it (SQS's order, as far
                # as one bounded read of the shard's index reaches).
                ordered = sorted(page.candidates, key=_sent_order)
                if contention >= 0.5:
                    random.shuffle(ordered)
                before = len(got)
                lost = self._take(queue, placed, ordered, wanted - len(got), timeout, now, got)
                self._hints.claimed(queue.queue_id, slot,
                                    [r.message.message_id for r in got[before:]], now)
                if lost:
                    frontier.forget()
                self._record(queue.queue_id, page.items_read, lost)
            # Visible messages another receiver here is claiming are no empty shard: its
            # claim may fail without writing (a throttle, a lost condition), and then no
            # change would ever void the hint while they wait, visible, to be received.
            if round_ == 0 and not page.candidates and not page.more and not page.others:
                until = min(upcoming) if upcoming else now + horizon
                self._hints.hint_empty(queue.queue_id, slot, until, writes, now)
            elif (round_ == 0 and page.candidates and page.from_head and not page.more
                  and not page.others and not lost
                  and len(got) - before == len(page.candidates)):
                # The read saw every visible message of the shard and this receive took
                # them all: it holds none visible until the next the read saw coming, or
                # these claims' timeout, so the consumer's next poll need not read it
                # (any write since the read voids the hint, as for an empty read).
                until = min([*upcoming, now + timeout * 1000, now + horizon])
                self._hints.hint_empty(queue.queue_id, slot, until, writes, now)
            if len(got) >= wanted:
                break
            # Short after kept candidates: the next round reads (after=None). Short after
            # a read: it goes on past where that read ended, while the index has more.
            if not page.kept and (not page.more or page.last is None):
                break
            after = page.last

    def _claim_sent(self, queue: QueueRecord, placed: Shard, handed: list[Candidate],
                    wanted: int, timeout: int, got: list[Received]) -> bool:
        """Claim messages sent here to a shard hinted empty (all it holds visible), with
        no read of the index: each claim is conditional on the `visible_at` they were
        written with, as a read's are. False when a claim was lost: the shard's hint is
        dropped and the caller reads it as usual (a failure drops it too, and raises)."""
        now = self._clock.now_ms()
        before = len(got)
        try:
            lost = self._take(queue, placed, sorted(handed, key=_sent_order),
                              wanted - len(got), timeout, now, got)
        except BaseException:
            self._hints.drop(queue.queue_id, placed.id)
            raise
        self._hints.claimed(queue.queue_id, placed.id,
                            [r.message.message_id for r in got[before:]], now)
        self._record(queue.queue_id, 0, lost)
        if lost:
            self._hints.drop(queue.queue_id, placed.id)
            return False
        self._hints.claimed_sent(queue.queue_id, placed.id, now + timeout * 1000)
        return True

    def _frontier(self, queue_id: str, shard: int) -> Frontier:
        with self._lock:
            return self._frontiers.setdefault((queue_id, shard), Frontier())

    def _take(
        self, queue: QueueRecord, placed: Shard, candidates: list[Candidate], wanted: int,
        timeout: int, now: int, got: list[Received],
    ) -> int:
        """Claim candidates into `got`; return how many claims were lost to other receivers.

        The plain claims go to the store together (one request for all of them); when
        some are lost, the next candidates go in a further call. A message claimed
        earlier in this receive can show up again further along the index (its new
        `visible_at` is still `<= now` with a zero visibility timeout); it is skipped,
        so that one response never holds a message twice. A message older than the
        queue's retention (lowered since it was sent) is dropped, as in SQS, and so is
        one sent before the queue's last purge (the background would remove it).
        """
        redrive = queue.redrive_policy
        max_receives = redrive.max_receive_count if redrive else None
        retention_ms = queue.attribute_int("MessageRetentionPeriod") * 1000
        claimed = {r.message.message_id for r in got}
        pending = [c for c in candidates if c.message_id not in claimed]
        expired: list[str] = []
        lost = 0
        taken = 0
        while taken < wanted and pending:
            batch = self._next_claims(queue, placed, pending, wanted - taken, now, max_receives,
                                      expired)
            for received in self._claim_many(queue, placed, batch, now + timeout * 1000, now):
                if received is None:
                    lost += 1
                elif (received.message.sent_ms + retention_ms <= now
                      or received.message.sent_ms <= queue.purged_ms):
                    expired.append(received.message.message_id)
                else:
                    got.append(received)
                    taken += 1
        if expired:
            self._stores.of(placed.cluster).delete_expired(queue.queue_id, placed.id, expired)
        return lost

    def _next_claims(
        self, queue: QueueRecord, placed: Shard, pending: list[Candidate], count: int, now: int,
        max_receives: int | None, expired: list[str],
    ) -> list[Candidate]:
        """Take up to `count` plain claims off the front of `pending`.

        Expired candidates met on the way go to `expired`; over-received ones move to the
        dead-letter queue (or are claimed as usual when the queue has none to move to).
        """
        batch: list[Candidate] = []
        while pending and len(batch) < count:
            candidate = pending.pop(0)
            action = candidate.action(now, max_receives)
            if action is CandidateAction.EXPIRE or candidate.purged_by(queue.purged_ms):
                expired.append(candidate.message_id)
            elif action is CandidateAction.DEAD_LETTER and self._dead_letter(
                queue, placed, candidate, now
            ):
                continue
            else:
                batch.append(candidate)
        return batch

    def _claim_many(
        self, queue: QueueRecord, placed: Shard, candidates: list[Candidate], visible_at: int,
        now: int,
    ) -> list[Received | None]:
        """Claim candidates together, each with a fresh token; None where another won."""
        if not candidates:
            return []
        tokens = [new_claim_token() for _ in candidates]
        messages = self._stores.of(placed.cluster).claim_many(
            queue.queue_id, placed.id, list(zip(candidates, tokens, strict=True)), visible_at, now
        )
        return [
            None if message is None else Received(message, self._receipts.encode(
                MessageRef(queue.queue_id, placed.id, message.message_id, token)
            ))
            for message, token in zip(messages, tokens, strict=True)
        ]

    def _dead_letter(
        self, queue: QueueRecord, placed: Shard, candidate: Candidate, now: int
    ) -> bool:
        """Move an over-received message to the DLQ; False if there is no DLQ to move to.

        Within one cluster the move is one transaction. Across clusters (two tables) the
        message is claimed, written to the DLQ, then deleted under the claim: a failure in
        between leaves it in the source queue, to be moved again, never lost.
        """
        redrive = queue.redrive_policy
        target = self._queue_by_arn(redrive.dead_letter_target_arn) if redrive else None
        if target is None:
            return False
        retention_ms = target.attribute_int("MessageRetentionPeriod") * 1000
        same = [s for s in target.active_shards if s.cluster == placed.cluster]
        if same:
            target_shard = random.choice(same)
            self._stores.of(placed.cluster).move(
                queue.queue_id, placed.id, candidate, target.queue_id, target_shard.id,
                retention_ms, now, source_arn=queue.arn,
            )
        else:
            target_shard = random.choice(target.active_shards)
            self._move_across(queue, placed, candidate, target, target_shard, retention_ms, now)
        self._hints.touch(target.queue_id, target_shard.id)
        self._wakeups.notify(target.queue_id)
        observability.record_dead_letter_move(queue.account, queue.name)
        return True

    def _move_across(
        self, queue: QueueRecord, placed: Shard, candidate: Candidate, target: QueueRecord,
        target_shard: Shard, retention_ms: int, now: int,
    ) -> None:
        token = new_claim_token()
        source = self._stores.of(placed.cluster)
        message = source.claim(queue.queue_id, placed.id, candidate, now + 30_000, token, now)
        if message is None:
            return
        # the claim that holds it while it moves is no receive: the count is the source's
        moved = message.with_changes(receive_count=candidate.receive_count).moved_to_dead_letters(
            now, retention_ms, queue.arn)
        if self._stores.of(target_shard.cluster).put_messages(
            target.queue_id, [(target_shard.id, moved)]
        ):
            return
        source.delete_claimed([MessageRef(queue.queue_id, placed.id, message.message_id, token)])

    def _record(self, queue_id: str, items_read: int, lost: int) -> None:
        with self._lock:
            self.stats.items_read += items_read
            self.stats.lost_claims += lost
            previous = self._contention.get(queue_id, 0.0)
            self._contention[queue_id] = 0.8 * previous + 0.2 * lost
