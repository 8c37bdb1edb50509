"""Token buckets as arithmetic: the limits, the bucket's state and the local leases.

A bucket is kept as one number, its *theoretical arrival time* `tat` (the generic cell
rate algorithm, which is a token bucket written differently): with one token every
`interval` and room for `burst` tokens, the bucket holds

    tokens(now) = (now + burst * interval - max(tat, now)) / interval

so a full bucket is any `tat <= now`, and taking `n` tokens moves `tat` to
`max(tat, now) + n * interval`. Refill is the passing of time: nothing writes it.

That shape is what makes the shared bucket cheap in DynamoDB: while the bucket is
being drawn down (`tat > now`), taking `n` tokens is `SET tat = tat + :n` under the
condition `tat <= :limit`, which any number of writers can apply at once without
reading it first; only a bucket that had refilled completely (`tat <= now`) is set
to `now + n * interval` instead.

A process does not write per request: it takes a *lease* of several tokens at once
and serves requests from it. A lease expires (its unused tokens are given back to
the shared bucket) so that tokens never wait in one process while another is refused.

Times are integer microseconds since the epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

US_PER_S = 1_000_000
# A lease holds about this long's worth of the rate (at least one token)...
LEASE_SHARE_S = 0.1
# ...and is given back when it has not been spent this long after it was taken.
LEASE_TTL_US = 1_000_000


@dataclass(frozen=True)
class Limit:
    """A rate in tokens per second and a bucket size (burst) in tokens; a rate of 0 or
    less turns the bucket off."""

    rate: float
    burst: int

    @property
    def enabled(self) -> bool:
        """True when requests are counted against this bucket at all."""
        return self.rate > 0

    @property
    def interval_us(self) -> int:
        """The time one token takes to come back."""
        return max(1, round(US_PER_S / self.rate)) if self.enabled else 0

    @property
    def window_us(self) -> int:
        """The time a drawn-down bucket takes to fill again."""
        return self.burst * self.interval_us

    @property
    def lease_size(self) -> int:
        """How many tokens a process asks for at once: a tenth of a second's worth of
        the rate, at least 1, at most the burst."""
        return max(1, min(self.burst, math.ceil(self.rate * LEASE_SHARE_S)))


def limit_of(rate: float, burst: int = 0) -> Limit:
    """A limit from settings: a burst of 0 means one second's worth of the rate (at
    least one token)."""
    if rate <= 0:
        return Limit(0.0, 0)
    return Limit(float(rate), burst if burst > 0 else max(1, math.ceil(rate)))


def available(limit: Limit, tat_us: int | None, now_us: int) -> int:
    """The whole tokens a bucket holds at `now` (a bucket never written is full)."""
    start = now_us if tat_us is None else max(tat_us, now_us)
    return max(0, min(limit.burst, (now_us + limit.window_us - start) // limit.interval_us))


def after_take(limit: Limit, tat_us: int | None, now_us: int, count: int) -> int:
    """The bucket's `tat` once `count` tokens are taken at `now`."""
    start = now_us if tat_us is None else max(tat_us, now_us)
    return start + count * limit.interval_us


def is_full(tat_us: int | None, now_us: int) -> bool:
    """True when the bucket has refilled completely (a take sets `tat` outright)."""
    return tat_us is None or tat_us <= now_us


def highest_tat_for(limit: Limit, now_us: int, count: int) -> int:
    """The highest `tat` from which `count` tokens can still be taken at `now`: the
    condition of an increment (`SET tat = tat + count * interval`)."""
    return now_us + limit.window_us - count * limit.interval_us


def next_token_us(limit: Limit, tat_us: int | None, now_us: int) -> int:
    """When the bucket will next hold a whole token (`now` if it holds one already)."""
    if tat_us is None:
        return now_us
    return max(now_us, tat_us - limit.window_us + limit.interval_us)


def lowest_tat_for_return(limit: Limit, now_us: int, count: int) -> int:
    """The lowest `tat` that `count` tokens can be given back to at `now` without the
    bucket going over its size (given back, `tat` stays at or above `now`)."""
    return now_us + count * limit.interval_us


@dataclass(frozen=True)
class Lease:
    """Tokens a process took from a shared bucket and has not spent yet."""

    tokens: int
    expires_us: int

    def live(self, now_us: int) -> bool:
        """True while the lease may still be spent."""
        return self.tokens > 0 and now_us < self.expires_us

    def spend(self) -> Lease:
        """The lease after one request is served from it."""
        if self.tokens <= 0:
            raise ValueError("an empty lease cannot be spent")
        return Lease(self.tokens - 1, self.expires_us)

    def unspent(self, now_us: int) -> int:
        """The tokens to give back once the lease has expired (0 while it is live)."""
        return 0 if now_us < self.expires_us else max(0, self.tokens)


def new_lease(granted: int, now_us: int) -> Lease:
    """A lease of the tokens a take was granted, from `now`."""
    return Lease(granted, now_us + LEASE_TTL_US)


EMPTY_LEASE = Lease(0, 0)
