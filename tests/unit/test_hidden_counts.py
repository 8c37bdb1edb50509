"""GIVEN item images and bucket names WHEN placed among the hidden counts THEN each weighs
where a count of in-flight and delayed messages reads it, and nowhere else."""

from __future__ import annotations

from typing import Any

from chalicelib.backend.hidden_counts import (
    BUCKET_MS,
    HORIZON_MS,
    ShardCount,
    bucket_changes,
    hidden_of,
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
