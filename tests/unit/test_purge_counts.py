"""GIVEN a pending purge that kept the queue's counts at its cutoff
WHEN a count is read while its removal runs
THEN each count shows what is left of it beyond the cutoff, never below zero."""

from __future__ import annotations

from dataclasses import replace

from chalicelib.domain.messages import Counts
from chalicelib.domain.purges import PendingPurge, PurgeKind, ShardProgress

AT_CUTOFF = Counts(visible=120, in_flight=10, delayed=10)


def _purge(taken: Counts | None = None) -> PendingPurge:
    return PendingPurge(queue_id="q", cutoff_ms=1_000, kind=PurgeKind.PURGE, fifo=False,
                        shards=(ShardProgress(0, "default"),), present=AT_CUTOFF,
                        taken=taken or Counts())


def test_before_any_removal_only_what_came_after_the_cutoff_is_counted() -> None:
    stored = AT_CUTOFF + Counts(visible=1, delayed=1)
    assert _purge().counts_after(stored) == Counts(visible=1, delayed=1)


def test_what_the_removal_took_is_no_longer_taken_off() -> None:
    # 100 visible and 5 in flight removed, and the stream counted those removals
    taken = Counts(visible=100, in_flight=5)
    stored = Counts(visible=20 + 2, in_flight=5, delayed=10)
    assert _purge(taken).counts_after(stored) == Counts(visible=2)


def test_removals_the_stream_has_not_counted_yet_show_high_never_low() -> None:
    taken = Counts(visible=100)
    assert _purge(taken).counts_after(AT_CUTOFF) == Counts(visible=100)


def test_no_count_goes_below_zero() -> None:
    # messages of the cutoff deleted by their receivers, not by the removal
    stored = Counts(visible=120, in_flight=2, delayed=10)
    assert _purge().counts_after(stored) == Counts()


def test_the_removed_total_is_the_sum_of_what_was_taken() -> None:
    assert _purge(Counts(visible=3, in_flight=2, delayed=1)).removed == 6
    step = _purge().with_step(0, None, Counts(visible=4, delayed=1))
    assert step.taken == Counts(visible=4, delayed=1) and step.finished


def test_a_message_that_moved_between_counts_is_not_taken_off_twice() -> None:
    # the 10 in flight at the cutoff turned visible and were taken as visible
    purge = PendingPurge(queue_id="q", cutoff_ms=1_000, kind=PurgeKind.PURGE, fifo=False,
                         shards=(ShardProgress(0, "default"),),
                         present=Counts(visible=2_990, in_flight=10),
                         taken=Counts(visible=3_000))
    # one message received after the purge is in flight
    assert purge.counts_after(Counts(in_flight=1)) == Counts(in_flight=1)
    # half of them moved and were taken; the other half are still in flight
    half = replace(purge, taken=Counts(visible=2_995))
    assert half.counts_after(Counts(in_flight=5 + 1)) == Counts(in_flight=1)


def test_a_delayed_message_of_the_cutoff_that_turned_visible_is_still_taken_off() -> None:
    # nothing removed yet; one of the 10 delayed at the cutoff is visible now
    stored = Counts(visible=121, in_flight=10, delayed=9)
    assert _purge().counts_after(stored) == Counts()
