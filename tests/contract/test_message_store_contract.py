"""The message store (`MessageStore`) on moto, on DynamoDB Local, on the in-memory store
(`DMQ_STORE=memory`) and in memory (its twin, tests/unit/memory_store.py) alike: the same
cases over all four. Candidates come oldest first and page, a claim wins
once, deletes and visibility changes act only under the claim they name, writes that must
not overwrite do not, dead-letter moves lose their races cleanly, and peeks, reads, counts,
emptiness and purges agree.

Counts on DynamoDB are kept from the table's stream: a case counts the stream in
(`Twin.count_in`, nothing to do for the twin) before it reads them.

Left out, as the twin cannot be the same:
- `loads`: DynamoDB's are kept from the stream in wall-clock slots; the twin's are what a
  test sets (`tests/contract/test_stream_counts_contract.py` covers DynamoDB's).
- `move_many`: it runs the caller's own DynamoDB write (a redrive task's progress) in its
  transactions, which only DynamoDB can run.
- Whether a page of exactly `limit` candidates says `more`: a store may say so ("more may
  follow"); DynamoDB Local does, moto and the twin do not.
- A `put_new` that meets an item identical to its own: DynamoDB takes it for its own put
  sent twice (`written`); the twin calls it `existing`, as the protocol does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.backend.store import NewPuts, VisibilityChange
from chalicelib.domain.messages import (
    AttributeValue,
    Candidate,
    Counts,
    Message,
    MessageRef,
    VisibilityOutcome,
)
from tests.contract.conftest import DYNAMODB_LOCAL, MEMSTORE, MOTO, Store, stream_counter
from tests.contract.test_store_contract import _dynamo_store
from tests.unit.memory_store import MemoryStore

MEMORY = "memory"
# DynamoDB Local runs TTL: expiry must stay in the future (here, for eleven days)
EXPIRES = int(time.time() * 1000) + 10**9
MINUTE = 60_000
Q = "000000000000/contract"
DLQ = "000000000000/contract-dlq"


@dataclass
class Twin:
    """A message store under test, what brings its counts up to date, and the time the
    case starts at (counts are kept in minute buckets of the wall clock)."""

    messages: DynamoMessageStore | MemoryStore
    count_in: Callable[[], None]
    now: int = field(default_factory=lambda: int(time.time() * 1000))


@pytest.fixture(params=[MOTO, DYNAMODB_LOCAL, MEMSTORE, MEMORY])
def store(request: pytest.FixtureRequest) -> Store | None:
    """The conftest's `store`, with the memory twin as a fourth param: the contract store
    on moto, DynamoDB Local or the in-memory store (the conftest's fixture, requested by
    its name with this param), or None for the twin, whose cases build no tables."""
    if request.param == MEMORY:
        return None
    found: Store = request.getfixturevalue("store")  # the conftest's, with this param
    return found


@pytest.fixture
def twin(store: Store | None, tmp_path: Path) -> Twin:
    """DynamoDB's message store over the contract store, or the memory twin."""
    if store is None:
        return Twin(MemoryStore(), lambda: None)
    messages = _dynamo_store(store, tmp_path)
    return Twin(messages, stream_counter(store, messages.counters))


def _message(n: int, now: int, **changes: object) -> Message:
    """Message `m<n>`, sent at `now` and visible since just before, with `changes`."""
    return Message(f"m{n:02d}", f"body {n}", f"md5-{n}", sent_ms=now, visible_at=now - 1,
                   expires_ms=EXPIRES).with_changes(**changes)


def _candidate(message: Message, shard: int = 0) -> Candidate:
    """What the index shows of a message (without the message: the claim reads it)."""
    return Candidate(shard, message.message_id, message.visible_at, message.expires_ms,
                     message.receive_count)


def _ids(messages: list[Message]) -> list[str]:
    return [m.message_id for m in messages]


def test_candidates_come_oldest_first_page_by_page_and_only_once_visible(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN five visible messages written out of order, one not visible yet, and
    # messages of another shard and of another queue
    at = {1: now - 30, 2: now - 50, 3: now - 10, 4: now - 40, 5: now - 20, 6: now + MINUTE}
    placed = [(0, _message(n, now, visible_at=v)) for n, v in at.items()]
    assert store.put_messages(Q, placed) == set()
    assert store.put_messages(Q, [(1, _message(7, now, visible_at=now - 60))]) == set()
    assert store.put_messages(DLQ, [(0, _message(8, now, visible_at=now - 60))]) == set()
    # WHEN the shard's candidates are read two by two, each page after the last one
    pages = []
    after = None
    for _ in range(5):
        page = store.find_candidates(Q, 0, now, 2, after)
        pages.append(page)
        if not page.candidates:
            break
        after = page.candidates[-1]
        if not page.more:
            break
    # THEN the visible ones come in visible_at order, two to a page, the last one short
    assert [[c.message_id for c in p.candidates] for p in pages] == [
        ["m02", "m04"], ["m01", "m05"], ["m03"]]
    assert [(p.more, p.items_read) for p in pages] == [(True, 2), (True, 2), (False, 1)]
    # AND each candidate shows its place, visibility, expiry and receive count
    assert pages[0].candidates == [Candidate(0, "m02", now - 50, EXPIRES, 0),
                                   Candidate(0, "m04", now - 40, EXPIRES, 0)]
    # AND from `low` on, only those visible since then; later, the delayed one too
    low = store.find_candidates(Q, 0, now, 10, None, low=now - 30)
    assert [c.message_id for c in low.candidates] == ["m01", "m05", "m03"]
    assert not low.more
    later = store.find_candidates(Q, 0, now + MINUTE, 10, None)
    assert [c.message_id for c in later.candidates] == ["m02", "m04", "m01", "m05", "m03",
                                                        "m06"]
    # AND nothing is visible before the oldest, nor in a shard holding nothing
    assert store.find_candidates(Q, 0, now - 51, 10, None).candidates == []
    assert store.find_candidates(Q, 2, now, 10, None).candidates == []


def test_messages_are_stored_whole_and_read_back_in_the_order_asked(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN a message with attributes of every kind, alone, then two more in one batch
    rich = _message(1, now, sender_id="AIDEXAMPLE", attributes_md5="attrs-md5",
                    system_attributes_md5="sys-md5", group_id="tenant-a",
                    attributes={"s": AttributeValue("String", "text"),
                                "n": AttributeValue("Number.int", "42"),
                                "b": AttributeValue("Binary", binary_value=b"\x00\xff")},
                    system_attributes={"AWSTraceHeader": AttributeValue("String", "Root=1")})
    assert store.put_messages(Q, [(0, rich)]) == set()
    assert store.put_messages(Q, [(0, _message(2, now)), (1, _message(3, now))]) == set()
    # WHEN they are read back by id, with one that was never there and one twice
    read = store.read_messages(Q, 0, ["m02", "m09", "m01", "m02"])
    # THEN each comes back as it was sent, in the order asked, the missing one left out
    assert read == [_message(2, now), rich, _message(2, now)]
    assert store.read_messages(Q, 1, ["m03"]) == [_message(3, now)]
    assert store.read_messages(Q, 1, ["m01"]) == []
    assert store.read_messages(Q, 0, []) == []


def test_a_claim_wins_once_and_a_stale_view_loses(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN a visible message, as the index shows it
    sent = _message(1, now)
    store.put_messages(Q, [(0, sent)])
    (seen,) = store.find_candidates(Q, 0, now, 10, None).candidates
    # WHEN one receiver claims it for 30 s
    won = store.claim(Q, 0, seen, now + 30_000, "first", now)
    # THEN it gets the message whole, under its claim, received once, first now
    assert won == sent.with_changes(visible_at=now + 30_000, claim_token="first",
                                    receive_count=1, first_receive_ms=now)
    assert store.read_messages(Q, 0, ["m01"]) == [won]
    # AND a second claim of the same view loses and changes nothing
    assert store.claim(Q, 0, seen, now + 60_000, "second", now + 1) is None
    assert store.claim(Q, 0, _candidate(sent), now + 60_000, "second", now + 1) is None
    assert store.read_messages(Q, 0, ["m01"]) == [won]
    assert store.find_candidates(Q, 0, now + 1, 10, None).candidates == []
    # WHEN its timeout has passed, the index shows it again, and a claim of that view
    # (here without the message, which the claim then reads) wins
    (again,) = store.find_candidates(Q, 0, now + 30_000, 10, None).candidates
    assert again == Candidate(0, "m01", now + 30_000, EXPIRES, 1) == _candidate(won)
    second = store.claim(Q, 0, _candidate(won), now + 90_000, "second", now + 30_000)
    # THEN it is received twice, still first received at its first claim
    assert second == won.with_changes(visible_at=now + 90_000, claim_token="second",
                                      receive_count=2)
    # AND a claim of a message that is not there loses
    assert store.claim(Q, 0, _candidate(_message(9, now)), now + 1, "t", now) is None


def test_claim_many_returns_each_claim_in_order_and_none_for_those_lost(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN four visible messages, one of which another receiver claims after the read
    store.put_messages(Q, [(0, _message(n, now, visible_at=now - 10 + n))
                           for n in range(1, 5)])
    page = store.find_candidates(Q, 0, now, 10, None).candidates
    assert store.claim(Q, 0, page[1], now + 5_000, "other", now) is not None
    # WHEN the receiver claims all four, each with its own token, in reverse order
    claims = [(c, f"t-{c.message_id}") for c in reversed(page)]
    got = store.claim_many(Q, 0, claims, now + 30_000, now)
    # THEN the result follows the claims: the lost one is None, the others claimed
    assert [None if m is None else (m.message_id, m.claim_token, m.receive_count,
                                    m.visible_at, m.first_receive_ms) for m in got] == [
        ("m04", "t-m04", 1, now + 30_000, now), ("m03", "t-m03", 1, now + 30_000, now),
        None, ("m01", "t-m01", 1, now + 30_000, now)]
    assert [m.body for m in got if m is not None] == ["body 4", "body 3", "body 1"]
    # AND the lost one stays the other receiver's
    (kept,) = store.read_messages(Q, 0, ["m02"])
    assert (kept.claim_token, kept.visible_at, kept.receive_count) == ("other", now + 5_000, 1)
    # AND a single claim of a stale view, and claims of views all stale, lose
    assert store.claim_many(Q, 0, [(page[0], "late")], now + 30_000, now) == [None]
    assert store.claim_many(Q, 0, [(page[0], "a"), (page[1], "b")], now + 30_000, now) == [
        None, None]


def test_only_the_current_claim_deletes_unless_any_claim_will_do(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN m1 claimed by "old" and then by "new", m2 claimed by "t2", m3 never received
    store.put_messages(Q, [(0, _message(n, now)) for n in (1, 2, 3)])
    assert store.claim(Q, 0, _candidate(_message(1, now)), now, "old", now)
    assert store.claim(Q, 0, _candidate(_message(1, now, visible_at=now, receive_count=1)),
                       now + 30_000, "new", now)
    assert store.claim(Q, 0, _candidate(_message(2, now)), now + 30_000, "t2", now)
    old, new = MessageRef(Q, 0, "m01", "old"), MessageRef(Q, 0, "m01", "new")
    # WHEN the stale handle, a handle of another message's claim, and an empty one delete
    store.delete_claimed([old, MessageRef(Q, 0, "m02", "new"), MessageRef(Q, 0, "m03", "")])
    # THEN nothing is deleted
    assert _ids(store.peek(Q, 0, 10)) == ["m01", "m02", "m03"]
    # WHEN the stale and the current handle of m1 delete together, with m2's twice
    m2 = MessageRef(Q, 0, "m02", "t2")
    store.delete_claimed([old, new, m2, m2])
    # THEN the current claims deleted theirs
    assert _ids(store.peek(Q, 0, 10)) == ["m03"]
    # AND any claim deletes a message whatever its state, and a gone one is no matter
    store.delete_claimed([MessageRef(Q, 0, "m03", "x"), old], any_claim=True)
    assert store.peek(Q, 0, 10) == []
    assert store.is_empty(Q, 0)


def test_visibility_changes_report_their_outcome_in_order(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN m1 and m2 in flight until +30 s under "t1" and "t2", m3 claimed but visible
    # again, and m4 delayed, never received
    store.put_messages(Q, [(0, _message(n, now)) for n in (1, 2, 3)])
    store.put_messages(Q, [(0, _message(4, now, visible_at=now + 5 * MINUTE))])
    for n in (1, 2):
        assert store.claim(Q, 0, _candidate(_message(n, now)), now + 30_000, f"t{n}", now)
    assert store.claim(Q, 0, _candidate(_message(3, now)), now + 10, "t3", now)
    ref = {n: MessageRef(Q, 0, f"m{n:02d}", f"t{n}") for n in (1, 2, 3, 4)}
    # WHEN one call changes them: m1 twice, m2 under a stale claim, m3 after its
    # timeout (under its latest claim), m4 under no claim, and a message that is not there
    at = now + 100
    outcomes = store.change_visibility([
        VisibilityChange(ref[1], at + 60_000),
        VisibilityChange(replace(ref[2], claim_token="stale"), at + 60_000),
        VisibilityChange(ref[3], at + 60_000),
        VisibilityChange(ref[1], at + 90_000),
        VisibilityChange(MessageRef(Q, 0, "m04", ""), at + 60_000),
        VisibilityChange(MessageRef(Q, 0, "m09", "t9"), at + 60_000),
    ], at)
    # THEN each change says what it did, m1's applied in order, and m3 hidden again (SQS
    # takes a message's latest handle after its timeout, until it is received again)
    assert outcomes == [VisibilityOutcome.CHANGED, VisibilityOutcome.NOT_FOUND,
                        VisibilityOutcome.CHANGED, VisibilityOutcome.CHANGED,
                        VisibilityOutcome.NOT_FOUND, VisibilityOutcome.NOT_FOUND]
    read = store.read_messages(Q, 0, ["m01", "m02", "m03", "m04"])
    assert [(m.visible_at, m.claim_token) for m in read] == [
        (at + 90_000, "t1"), (now + 30_000, "t2"), (at + 60_000, "t3"), (now + 5 * MINUTE, "")]
    # WHEN a claim ends its timeout now THEN the message is a candidate at once
    assert store.change_visibility([VisibilityChange(ref[2], at)], at) == [
        VisibilityOutcome.CHANGED]
    assert [c.message_id for c in store.find_candidates(Q, 0, at, 10, None).candidates] == [
        "m02"]
    # AND any claim changes a delayed message too, but not a visible one under a claim
    # other than its latest
    assert store.change_visibility(
        [VisibilityChange(ref[4], at + 1, any_claim=True),
         VisibilityChange(replace(ref[2], claim_token="stale"), at + 1, any_claim=True)],
        at) == [VisibilityOutcome.CHANGED, VisibilityOutcome.NOT_IN_FLIGHT]
    # AND the latest claim's handle, past its timeout, changes it with or without any_claim
    assert store.change_visibility([VisibilityChange(ref[2], at + 5, any_claim=True)],
                                   at + 1) == [VisibilityOutcome.CHANGED]


def test_a_dead_letter_move_takes_the_message_once_with_its_receive_count(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN a message received once and visible again, and one that another receiver
    # claims after this one saw it
    store.put_messages(Q, [(0, _message(1, now, sent_ms=now - 5_000)), (0, _message(2, now))])
    first = store.claim(Q, 0, _candidate(_message(1, now)), now, "a", now - 100)
    assert first is not None
    (seen,) = [c for c in store.find_candidates(Q, 0, now, 10, None).candidates
               if c.message_id == "m01"]
    raced = _candidate(_message(2, now))
    assert store.claim(Q, 0, raced, now + 30_000, "winner", now)
    # WHEN both are moved to the dead-letter queue on what was seen
    arn = "arn:aws:sqs:us-east-1:000000000000:contract"
    moved = store.move(Q, 0, seen, DLQ, 1, 60_000, now + 1, arn)
    lost = store.move(Q, 0, raced, DLQ, 1, 60_000, now + 1, arn)
    # THEN the first moved: gone here, there visible at once and unclaimed, its receive
    # count and first receive kept (as SQS counts a dead letter's receives), its
    # retention counted from its send, its source recorded
    assert (moved, lost) == (True, False)
    assert _ids(store.peek(Q, 0, 10)) == ["m02"]
    assert store.peek(DLQ, 1, 10) == [_message(1, now, sent_ms=now - 5_000).with_changes(
        visible_at=now + 1, expires_ms=now - 5_000 + 60_000, dead_letter_source_arn=arn,
        receive_count=1, first_receive_ms=now - 100)]
    # AND the lost race left the winner's claim as it was
    (kept,) = store.read_messages(Q, 0, ["m02"])
    assert (kept.claim_token, kept.visible_at) == ("winner", now + 30_000)
    # AND a second move of the message already moved does nothing
    assert store.move(Q, 0, seen, DLQ, 1, 60_000, now + 2, arn) is False
    assert len(store.peek(DLQ, 1, 10)) == 1


def test_writes_that_must_not_overwrite_leave_what_stands(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN a message stored and claimed since
    store.put_messages(Q, [(0, _message(1, now))])
    claimed = store.claim(Q, 0, _candidate(_message(1, now)), now + 30_000, "t", now)
    # WHEN a replica's copy of it, as it was sent, is put if absent with a new one
    store.put_if_absent(Q, [(0, _message(1, now)), (0, _message(2, now))])
    # THEN the claimed message stands, and the new one is written
    assert store.read_messages(Q, 0, ["m01", "m02"]) == [claimed, _message(2, now)]
    # WHEN new puts name a standing message, alone and among eleven new ones in two shards
    alone = store.put_new(Q, [(0, _message(2, now, sent_ms=now + 1))])
    many = store.put_new(Q, [(0, _message(1, now, sent_ms=now + 1))]
                         + [(n % 2, _message(n, now, sent_ms=now + 1)) for n in range(10, 21)])
    # THEN the standing ones are found, the rest written
    assert alone == NewPuts(existing=frozenset({"m02"}))
    assert many == NewPuts(frozenset(f"m{n}" for n in range(10, 21)), frozenset({"m01"}))
    # AND the standing ones are as they were
    assert store.read_messages(Q, 0, ["m01", "m02"]) == [claimed, _message(2, now)]
    assert len(store.peek(Q, 0, 20)) == 2 + 6 and len(store.peek(Q, 1, 20)) == 5


def test_peeks_show_the_oldest_sent_without_claiming_them(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN messages sent at different times (ids not in send order), one in flight,
    # one delayed
    sent = {3: now - 300, 1: now - 200, 4: now - 200, 2: now - 100}
    store.put_messages(Q, [(0, _message(n, now, sent_ms=ms)) for n, ms in sent.items()])
    store.put_messages(Q, [(0, _message(5, now, sent_ms=now - 400, visible_at=now + MINUTE))])
    in_flight = _candidate(_message(2, now, sent_ms=now - 100))
    assert store.claim(Q, 0, in_flight, now + 30_000, "t", now)
    # WHEN the shard is peeked at
    # THEN the oldest come first by send time (then id), in flight and delayed alike
    assert _ids(store.peek(Q, 0, 10)) == ["m05", "m03", "m01", "m04", "m02"]
    assert _ids(store.peek(Q, 0, 2)) == ["m05", "m03"]
    # AND nothing was claimed by looking
    assert [m.receive_count for m in store.peek(Q, 0, 10)] == [0, 0, 0, 0, 1]
    assert store.peek(Q, 1, 10) == []


def test_expired_messages_are_deleted_by_id(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN three messages, one of them in flight
    store.put_messages(Q, [(0, _message(n, now)) for n in (1, 2, 3)])
    assert store.claim(Q, 0, _candidate(_message(2, now)), now + 30_000, "t", now)
    # WHEN two are deleted as expired, one named twice, with one that is gone already
    store.delete_expired(Q, 0, ["m02", "m03", "m09", "m03"])
    # THEN those two are gone, whatever their state
    assert _ids(store.peek(Q, 0, 10)) == ["m01"]
    # AND a shard holding none of them is no matter
    store.delete_expired(Q, 1, ["m01"])
    assert _ids(store.peek(Q, 0, 10)) == ["m01"]


def test_counts_emptiness_and_purges_agree(twin: Twin) -> None:
    store, now = twin.messages, twin.now
    # GIVEN four visible messages and two delayed by five minutes in shard 0, one in shard 1
    later = now + 5 * MINUTE
    store.put_messages(Q, [(0, _message(n, now, visible_at=now - 10 + n)) for n in range(1, 5)]
                       + [(0, _message(n, now, visible_at=later)) for n in (5, 6)]
                       + [(1, _message(7, now))])
    # WHEN three are claimed for ten minutes, and the counts brought up to date
    page = store.find_candidates(Q, 0, now, 3, None)
    won = store.claim_many(Q, 0, [(c, f"t{c.message_id}") for c in page.candidates],
                           now + 10 * MINUTE, now)
    assert all(won) and len(won) == 3
    twin.count_in()
    # THEN each shard's counts are what it holds
    assert store.count(Q, 0, now) == Counts(visible=1, in_flight=3, delayed=2)
    assert store.count(Q, 1, now) == Counts(visible=1)
    assert store.count(Q, 2, now) == Counts()
    # AND the delayed turn visible after their delay, the claimed after their timeout
    assert store.count(Q, 0, later + 1) == Counts(visible=3, in_flight=3)
    assert store.count(Q, 0, now + 10 * MINUTE + 1) == Counts(visible=6)
    # WHEN the visible one and one in flight are deleted
    store.delete_claimed([MessageRef(Q, 0, "m04", "")], any_claim=True)
    store.delete_expired(Q, 0, ["m01"])
    twin.count_in()
    # THEN they are counted out; a shard holding only hidden messages is not empty
    assert store.count(Q, 0, now) == Counts(visible=0, in_flight=2, delayed=2)
    assert not store.is_empty(Q, 0) and store.is_empty(Q, 2)
    # WHEN shard 0 is purged
    assert store.purge(Q, 0) == 4
    twin.count_in()
    # THEN it is empty and counts nothing; shard 1 is untouched
    assert store.is_empty(Q, 0) and store.peek(Q, 0, 10) == []
    assert store.count(Q, 0, now) == Counts()
    assert not store.is_empty(Q, 1) and store.count(Q, 1, now) == Counts(visible=1)
    assert store.purge(Q, 0) == 0
