"""GIVEN the tenants of a queue WHEN they send THEN the fair-queue judgement and lanes hold."""

from __future__ import annotations

import pytest

from chalicelib.domain.lanes import (
    LANE_BASE,
    in_noisy_lane,
    lane_slot,
    real_visible_at,
    to_noisy_lane,
)
from chalicelib.domain.messages import Message
from chalicelib.service import fairness
from chalicelib.service.exceptions import InvalidParameterValueError
from chalicelib.service.fairness import Fairness
from chalicelib.settings import Settings

NOW = 1_700_000_000_000
Q = "000000000000/tenants"


def _send(fair: Fairness, group: str | None, count: int, now: int = NOW) -> list[bool]:
    return fair.place(Q, [group] * count, now)


def test_a_lone_tenant_is_never_noisy() -> None:
    fair = Fairness()
    assert not any(_send(fair, "only", 1_000))
    assert fair.noisy_groups(Q, NOW) == []


def test_tenants_sending_evenly_are_not_noisy() -> None:
    fair = Fairness()
    for _ in range(50):
        for tenant in range(10):
            assert _send(fair, f"t{tenant}", 1) == [False]


def test_a_flooding_tenant_is_noisy_once_it_has_sent_enough() -> None:
    # GIVEN three tenants with 5 messages each
    fair = Fairness()
    for tenant in ("a", "b", "c"):
        _send(fair, tenant, 5)
    # WHEN a fourth sends 40, one at a time THEN its first 9 pass, and from the 10th
    # (NOISY_MIN) on it is noisy
    verdicts = [_send(fair, "flood", 1)[0] for _ in range(40)]
    assert verdicts.index(True) == int(fairness.NOISY_MIN) - 1
    assert all(verdicts[9:])
    assert fair.noisy_groups(Q, NOW) == ["flood"]
    # AND the quiet tenants stay in the main lane
    assert _send(fair, "a", 1) == [False]


def test_a_batch_is_judged_as_a_whole_after_it_is_counted() -> None:
    fair = Fairness()
    _send(fair, "a", 5)
    # 10 of 15 is not above 1.5 times an even share of two tenants (75%); 20 of 25 is
    assert _send(fair, "flood", 10) == [False] * 10
    assert _send(fair, "flood", 10) == [True] * 10


def test_messages_without_a_group_id_are_never_noisy_but_count_as_a_tenant() -> None:
    fair = Fairness()
    assert not any(_send(fair, None, 500))
    # a grouped flood beside ungrouped traffic is judged against it
    assert _send(fair, "flood", 2_000)[-1] is True


def test_the_judgement_is_sticky_then_lapses_when_the_flood_stops() -> None:
    fair = Fairness()
    _send(fair, "a", 10)
    assert _send(fair, "flood", 100)[-1] is True
    # long after the flood, the tenant's share has decayed and its stickiness passed
    later = NOW + fairness.STICKY_MS + 20 * fairness.HALF_LIFE_MS
    _send(fair, "a", 40, later)
    assert _send(fair, "flood", 1, later) == [False]
    assert fair.noisy_groups(Q, later) == []


def test_disabled_fairness_sends_nothing_to_the_noisy_lane() -> None:
    fair = Fairness(enabled=False)
    _send(fair, "a", 5)
    assert not any(_send(fair, "flood", 500))


def test_steer_moves_only_noisy_messages_to_the_noisy_lane() -> None:
    fair = Fairness()
    _send(fair, "a", 5)
    _send(fair, "flood", 100)
    quiet = Message("q", "b", "m", NOW, NOW + 2000, NOW + 10**6, group_id="a")
    noisy = Message("n", "b", "m", NOW, NOW + 2000, NOW + 10**6, group_id="flood")
    placed = fair.steer(Q, [(0, quiet), (3, noisy)], NOW)
    assert placed[0] == (0, quiet)
    assert placed[1][0] == 3 and placed[1][1].visible_at == LANE_BASE + NOW + 2000
    assert fairness.slot_of(3, placed[1][1]) == lane_slot(3) == -4
    assert fairness.slot_of(0, quiet) == 0


def test_a_fifo_queue_is_never_steered() -> None:
    fair = Fairness()
    fifo = "000000000000/orders.fifo"
    fair.place(fifo, ["a"] * 5, NOW)
    flood = [(0, Message(str(n), "b", "m", NOW, NOW, NOW + 10**6, group_id="flood"))
             for n in range(100)]
    assert fair.steer(fifo, flood, NOW) == flood


def test_silent_tenants_are_forgotten_and_the_tracked_set_is_bounded() -> None:
    fair = Fairness()
    for n in range(fairness.MAX_TENANTS + 50):
        _send(fair, f"t{n}", 1)
    assert len(fair._queues[Q].sends) <= fairness.MAX_TENANTS
    _send(fair, "late", 1, NOW + fairness.TENANT_MEMORY_MS)
    assert set(fair._queues[Q].sends) == {"late"}


def test_lanes_are_read_where_tenants_were_seen_and_probed_elsewhere() -> None:
    fair = Fairness()
    # a queue without tenants: no lane read at first (as before fair queues), then one
    # probe every LANE_PROBE_MS
    assert fair.reads_lanes("other", NOW) is False
    assert fair.reads_lanes("other", NOW + 1) is False
    assert fair.reads_lanes("other", NOW + fairness.LANE_PROBE_MS) is True
    assert fair.reads_lanes("other", NOW + fairness.LANE_PROBE_MS + 1) is False
    assert fair.reads_lanes("other", NOW + 2 * fairness.LANE_PROBE_MS) is True
    # a queue whose received messages carry group ids: every short receive reads them
    fair.saw_received(Q, ["t1", None], NOW)
    assert all(fair.reads_lanes(Q, NOW + n) for n in range(3))
    # ungrouped receives alone do not count
    fair.saw_received("plain", [None], NOW)
    assert fair.reads_lanes("plain", NOW + 1) is False


@pytest.mark.parametrize("group", ["a", "x" * 128, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", None])
def test_valid_group_ids(group: str | None) -> None:
    fairness.check_group_id(group)


@pytest.mark.parametrize("group", ["", "x" * 129, "a b", "\u00e9", "a\nb", "\x7f"])
def test_invalid_group_ids(group: str) -> None:
    with pytest.raises(InvalidParameterValueError, match="for parameter MessageGroupId"):
        fairness.check_group_id(group)


def test_lane_positions_round_trip() -> None:
    assert in_noisy_lane(to_noisy_lane(NOW)) and not in_noisy_lane(NOW + 43_200_000)
    assert real_visible_at(to_noisy_lane(NOW)) == NOW == real_visible_at(NOW)
    assert {lane_slot(s) for s in range(100)}.isdisjoint(range(100))


@pytest.mark.parametrize(("value", "expected"), [
    (None, True), ("on", True), ("off", False), ("OFF", False), ("false", False), ("0", False),
])
def test_the_fair_queues_setting(value: str | None, expected: bool) -> None:
    env = {} if value is None else {"DMQ_FAIR_QUEUES": value}
    assert Settings.from_env(env).fair_queues is expected
