"""GIVEN item images and bucket names WHEN placed among the hidden counts THEN each weighs
where a count of in-flight and delayed messages reads it, and nowhere else."""

from __future__ import annotations

from typing import Any

from chalicelib.backend.hidden_counts import (
    BUCKET_MS,
    HORIZON_MS,
    LAST_SECOND,
    ShardCount,
    bucket_changes,
    hidden_of,
    hidden_seconds,
    kept,
    stale,
)
from chalicelib.domain.lanes import LANE_BASE, to_noisy_lane
from chalicelib.regions.replica import TOMB

NOW = 1_700_000_000_000
MINUTE = NOW // BUCKET_MS


def _image(sk: str, visible_at: int, rc: int = 0) -> dict[str, Any]:
    return {"pk": {"S": "q#0"}, "sk": {"S": sk}, "visible_at": {"N": str(visible_at)},
            "rc": {"N": str(rc)}}


def test_messages_weigh_one_in_flight_or_delayed_by_their_receive_count() -> None:
    assert hidden_of(_image("m", NOW)) == (f"d{MINUTE}", 1)
    assert hidden_of(_image("m", NOW, rc=4)) == (f"f{MINUTE}", 1)
    assert hidden_of(_image("g#grp", NOW, rc=4)) == (f"f{MINUTE}", 4)
    assert hidden_of(_image("g#grp", NOW)) == (f"d{MINUTE}", 1)


def test_bookkeeping_tombstones_and_the_noisy_lane_weigh_nothing() -> None:
    for sk in ("f#grp 1", "d#1#grp x", "s#"):
        assert hidden_of(_image(sk, NOW)) is None
    assert hidden_of({**_image("m", NOW), TOMB: {"N": "1"}}) is None
    assert hidden_of(_image("m", to_noisy_lane(NOW))) is None
    assert hidden_of(None) is None


def test_a_record_moves_its_item_between_buckets_or_changes_nothing() -> None:
    sent, claimed = _image("m", NOW), _image("m", NOW + 5 * BUCKET_MS, rc=1)
    assert bucket_changes(sent, claimed) == {f"d{MINUTE}": -1, f"f{MINUTE + 5}": 1}
    assert bucket_changes(claimed, claimed) == {}
    assert bucket_changes(claimed, None) == {f"f{MINUTE + 5}": -1}


def test_changes_before_the_previous_minute_are_dropped_and_their_buckets_stale() -> None:
    names = [f"f{MINUTE - 2}", f"f{MINUTE - 1}", f"d{MINUTE}", "seq", "n", "hsince"]
    assert kept(dict.fromkeys(names[:3], 1), NOW) == {f"f{MINUTE - 1}": 1, f"d{MINUTE}": 1}
    assert stale(names, NOW) == [f"f{MINUTE - 2}"]


def test_counts_read_the_buckets_after_this_minute_once_they_are_whole() -> None:
    item = {"hsince": {"N": str(NOW)}, f"f{MINUTE}": {"N": "7"}, f"f{MINUTE + 1}": {"N": "2"},
            f"d{MINUTE + 3}": {"N": "1"}, f"d{MINUTE + 4}": {"N": "-1"}}
    end = (MINUTE + 1) * BUCKET_MS
    assert ShardCount.of({**item, "hnew": {"BOOL": True}}, 9, False).hidden(NOW) == (2, 0, end)
    assert ShardCount.of({**item, "hnew": {"BOOL": True}}, 9, True).hidden(NOW) \
        == (0, 0, LANE_BASE)
    assert ShardCount.of(item, 9, False).hidden(NOW) == (0, 0, LANE_BASE)
    later = NOW + HORIZON_MS
    assert ShardCount.of(item, 9, False).hidden(later)[2] < LANE_BASE
    assert ShardCount.of(None, 0, False).hidden(NOW) == (0, 0, end)
    assert ShardCount.of(None, 0, True).hidden(NOW) == (0, 0, LANE_BASE)


def test_only_an_image_still_hidden_when_counted_leaves_a_second_hint() -> None:
    second = (NOW % BUCKET_MS) // 1000
    # a message sent now is visible at once: no hint; nor for what weighs in no bucket
    assert hidden_seconds(_image("m", NOW), NOW) == {}
    assert hidden_seconds(_image("m", NOW - 5_000, rc=1), NOW) == {}
    assert hidden_seconds(_image("s#", NOW + 5_000), NOW) == {}
    assert hidden_seconds(None, NOW) == {}
    # hidden until the next second or the next minute: that second
    assert hidden_seconds(_image("m", NOW + 1, rc=1), NOW) == {f"s{MINUTE}": {second}}
    assert hidden_seconds(_image("m", (MINUTE + 1) * BUCKET_MS + 7_500), NOW) \
        == {f"s{MINUTE + 1}": {7}}
    # hidden for longer: the minute's last second
    assert hidden_seconds(_image("m", NOW + 10 * BUCKET_MS, rc=1), NOW) \
        == {f"s{MINUTE + 10}": {LAST_SECOND}}


def _counted(hints: set[int], hinted: int = NOW, minute: int = MINUTE) -> ShardCount:
    item = {"hsince": {"N": str(NOW)}, "hnew": {"BOOL": True}, f"d{minute}": {"N": "5"},
            "ssince": {"N": str(hinted)}}
    if hints:
        item[f"s{minute}"] = {"NS": [str(n) for n in hints]}
    return ShardCount.of(item, 5, False)


def test_second_hints_spare_the_index_only_where_no_second_is_still_to_come() -> None:
    at = MINUTE * BUCKET_MS + 20_000  # second 20 of the minute
    # a bucket of this minute holds messages, and no hint is at or after second 20
    assert not _counted({3, 19}).hides_later_this_minute(at)
    assert not _counted(set()).hides_later_this_minute(at)
    # a hint at or after it: the index is read
    assert _counted({3, 20}).hides_later_this_minute(at)
    assert _counted({59}).hides_later_this_minute(at + 39_000)
    # no bucket of this minute: nothing hides, hints or not
    empty = ShardCount.of({"hsince": {"N": str(NOW)}, "hnew": {"BOOL": True},
                           "ssince": {"N": str(NOW)}, f"s{MINUTE}": {"NS": ["50"]}}, 5, False)
    assert not empty.hides_later_this_minute(at)


def test_second_hints_an_earlier_version_did_not_keep_are_not_trusted() -> None:
    at = MINUTE * BUCKET_MS + 20_000
    # the buckets began before the hints did: not whole until the horizon has passed
    assert _counted({3}, hinted=NOW + 1).hides_later_this_minute(at)
    past = MINUTE + (HORIZON_MS // BUCKET_MS) + 2
    assert not _counted({3}, hinted=NOW + 1, minute=past).hides_later_this_minute(
        past * BUCKET_MS + 20_000)
    # no hints kept at all: the bucket alone decides
    bare = ShardCount.of({"hsince": {"N": str(NOW)}, "hnew": {"BOOL": True},
                          f"d{MINUTE}": {"N": "5"}}, 5, False)
    assert bare.hides_later_this_minute(at)
    # buckets not whole: always the index
    assert ShardCount.of(None, 5, True).hides_later_this_minute(at)


def test_second_hints_go_stale_with_their_minute() -> None:
    names = [f"s{MINUTE - 2}", f"s{MINUTE - 1}", f"s{MINUTE}", "ssince", "seq"]
    assert stale(names, NOW) == [f"s{MINUTE - 2}"]
