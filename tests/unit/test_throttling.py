"""The token bucket arithmetic of throttling (chalicelib/domain/throttling.py): refill,
burst, leases and their expiry, tokens given back."""

from __future__ import annotations

import pytest

from chalicelib.domain import throttling
from chalicelib.domain.throttling import LEASE_TTL_US, Lease, Limit, limit_of

S = 1_000_000  # microseconds
NOW = 1_700_000_000 * S


def test_a_rate_of_zero_turns_the_bucket_off() -> None:
    assert not limit_of(0).enabled
    assert not limit_of(-5, 10).enabled
    assert limit_of(0.5).enabled


def test_the_default_burst_is_one_seconds_worth_and_at_least_one_token() -> None:
    assert limit_of(50).burst == 50
    assert limit_of(2.5).burst == 3
    assert limit_of(0.2).burst == 1
    assert limit_of(50, 7).burst == 7


def test_one_token_comes_back_every_interval() -> None:
    assert limit_of(50).interval_us == 20_000
    assert limit_of(0.5).interval_us == 2 * S
    assert limit_of(50, 10).window_us == 10 * 20_000


def test_a_lease_is_a_tenth_of_a_seconds_worth_within_one_and_the_burst() -> None:
    assert limit_of(200).lease_size == 20
    assert limit_of(5).lease_size == 1
    assert limit_of(1000, 30).lease_size == 30


def test_a_bucket_never_written_is_full() -> None:
    limit = limit_of(10, 4)
    assert throttling.available(limit, None, NOW) == 4
    assert throttling.is_full(None, NOW)


def test_taking_draws_the_bucket_down_and_time_refills_it() -> None:
    limit = limit_of(10, 4)  # a token every 100 ms, room for 4
    tat = throttling.after_take(limit, None, NOW, 4)
    assert throttling.available(limit, tat, NOW) == 0
    assert not throttling.is_full(tat, NOW)
    assert throttling.available(limit, tat, NOW + 99_999) == 0
    assert throttling.available(limit, tat, NOW + 100_000) == 1
    assert throttling.available(limit, tat, NOW + 250_000) == 2
    assert throttling.available(limit, tat, NOW + 400_000) == 4
    assert throttling.is_full(tat, NOW + 400_000)


def test_refill_never_goes_past_the_burst() -> None:
    limit = limit_of(10, 4)
    tat = throttling.after_take(limit, None, NOW, 1)
    assert throttling.available(limit, tat, NOW + 3600 * S) == 4
    # a full bucket is taken from as of now, not as of its old tat
    assert throttling.after_take(limit, tat, NOW + 3600 * S, 2) == NOW + 3600 * S + 200_000


def test_an_increment_is_allowed_exactly_while_the_bucket_holds_the_tokens() -> None:
    limit = limit_of(10, 4)
    tat = throttling.after_take(limit, None, NOW, 3)  # one token left
    assert tat <= throttling.highest_tat_for(limit, NOW, 1)
    assert tat > throttling.highest_tat_for(limit, NOW, 2)


def test_a_refused_bucket_knows_when_its_next_token_is_due() -> None:
    limit = limit_of(10, 4)
    tat = throttling.after_take(limit, None, NOW, 4)
    due = throttling.next_token_us(limit, tat, NOW)
    assert due == NOW + 100_000
    assert throttling.available(limit, tat, due) == 1
    assert throttling.available(limit, tat, due - 1) == 0
    assert throttling.next_token_us(limit, None, NOW) == NOW


def test_tokens_given_back_never_overfill_the_bucket() -> None:
    limit = limit_of(10, 4)
    tat = throttling.after_take(limit, None, NOW, 4)
    # two tokens given back: allowed, and the bucket holds two again
    assert tat >= throttling.lowest_tat_for_return(limit, NOW, 2)
    assert throttling.available(limit, tat - 2 * limit.interval_us, NOW) == 2
    # after 300 ms three tokens came back by refill: giving two more would overfill
    later = NOW + 300_000
    assert tat < throttling.lowest_tat_for_return(limit, later, 2)
    assert tat >= throttling.lowest_tat_for_return(limit, later, 1)


def test_a_lease_is_spent_one_request_at_a_time_until_it_expires() -> None:
    lease = throttling.new_lease(3, NOW)
    assert lease == Lease(3, NOW + LEASE_TTL_US)
    assert lease.live(NOW)
    lease = lease.spend().spend()
    assert lease.tokens == 1 and lease.live(NOW + LEASE_TTL_US - 1)
    assert not lease.live(NOW + LEASE_TTL_US)
    assert not lease.spend().live(NOW)
    with pytest.raises(ValueError):
        lease.spend().spend()


def test_an_expired_lease_gives_its_unspent_tokens_back() -> None:
    lease = throttling.new_lease(5, NOW).spend()
    assert lease.unspent(NOW + LEASE_TTL_US - 1) == 0
    assert lease.unspent(NOW + LEASE_TTL_US) == 4
    assert throttling.EMPTY_LEASE.unspent(NOW) == 0


def _simulate(limit: Limit, processes: int, seconds: float, step_us: int) -> int:
    """Processes that each want a token every `step_us`, leasing from one shared bucket
    by the arithmetic alone; the requests served."""
    tat: int | None = None
    leases = [throttling.EMPTY_LEASE] * processes
    served = 0
    for tick in range(int(seconds * S / step_us)):
        now = NOW + tick * step_us
        for p in range(processes):
            if leases[p].live(now):
                leases[p] = leases[p].spend()
                served += 1
                continue
            unspent = leases[p].unspent(now)
            if unspent and tat is not None and tat >= throttling.lowest_tat_for_return(
                    limit, now, unspent):
                tat -= unspent * limit.interval_us
            count = min(limit.lease_size, throttling.available(limit, tat, now))
            leases[p] = throttling.EMPTY_LEASE
            if count:
                tat = throttling.after_take(limit, tat, now, count)
                leases[p] = throttling.new_lease(count, now).spend()
                served += 1
    return served


def test_processes_sharing_a_bucket_are_served_the_rate_plus_the_burst() -> None:
    limit = limit_of(100, 20)
    served = _simulate(limit, processes=4, seconds=10, step_us=2_000)
    # 10 s at 100/s plus the 20 the bucket started with, less what sat in leases at the end
    assert 1000 <= served <= 1000 + 20
    assert served >= 1020 - 4 * limit.lease_size


def test_a_demand_below_the_rate_is_served_in_full() -> None:
    limit = limit_of(100, 20)
    served = _simulate(limit, processes=2, seconds=5, step_us=50_000)  # 40/s wanted
    assert served == 2 * 100
