"""Throttling: token buckets per account and per queue, shared by every process through
leases on tokens kept in DynamoDB (`metadata.throttle_buckets`).

Each process keeps, per bucket, a lease of tokens it took from the shared bucket with
one conditional write; requests are served from the lease, so DynamoDB sees one write
per lease, not per request. A refused bucket is remembered until its next token is due,
so throttled requests cost no store call either. A lease left unspent when it expires
goes back to the shared bucket. When the store fails, requests are served (throttling
never becomes the outage) and the bucket is not asked again for a second.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from chalicelib import observability
from chalicelib.clock import Clock
from chalicelib.domain import throttling
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.throttling import EMPTY_LEASE, Lease, Limit
from chalicelib.metadata.throttle_buckets import BucketStore
from chalicelib.service.exceptions import RateThrottledError

logger = logging.getLogger("dmq.throttle")
# Past this many buckets in one process, idle ones are forgotten (their shared bucket
# stays in the store).
MAX_LOCAL_BUCKETS = 4096
# After a store fault, requests pass unthrottled this long before the store is asked again.
FAULT_PAUSE_US = 1_000_000


@dataclass
class _Local:
    """A process's view of one shared bucket."""

    lease: Lease = EMPTY_LEASE
    tat_us: int | None = None
    refused_until_us: int = 0
    open_until_us: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def idle(self, now_us: int) -> bool:
        return (not self.lease.live(now_us) and now_us >= self.refused_until_us
                and not self.lock.locked())


class Throttle:
    """Admits or refuses requests against the account's and the queue's buckets."""

    def __init__(self, store: BucketStore, clock: Clock, account: Limit, queue: Limit) -> None:
        self._store = store
        self._clock = clock
        self.account_limit = account
        self.queue_limit = queue
        self._buckets: dict[str, _Local] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True when either kind of bucket is on."""
        return self.account_limit.enabled or self.queue_limit.enabled

    def admit(self, account: str, queue_id: str | None) -> None:
        """Count one request of `account` (to the queue `queue_id`, if it names one);
        RateThrottledError when either bucket is empty."""
        self.admit_account(account)
        try:
            self.admit_queue(queue_id)
        except RateThrottledError:
            if self.account_limit.enabled:
                self._refund(f"account#{account}")
            raise

    def admit_account(self, account: str) -> None:
        """Count one request against the account's bucket; RateThrottledError when it is
        empty. This is all the front door needs: it runs before the body is parsed."""
        if not self.account_limit.enabled:
            return
        bucket, now_us = f"account#{account}", self._clock.now_ms() * 1000
        if not self._spend(bucket, self.account_limit, now_us):
            raise self._refused(bucket, now_us, f"account {account}", self.account_limit)

    def admit_queue(self, queue_id: str | None) -> None:
        """Count one request against the queue's bucket (none: nothing to count)."""
        if not (self.queue_limit.enabled and queue_id):
            return
        bucket, now_us = f"queue#{queue_id}", self._clock.now_ms() * 1000
        if not self._spend(bucket, self.queue_limit, now_us):
            raise self._refused(bucket, now_us, f"queue {queue_id.split('/', 1)[-1]}",
                                self.queue_limit)

    def _refused(self, bucket: str, now_us: int, what: str, limit: Limit) -> RateThrottledError:
        """The error of a refused request, with the time until the bucket's next token."""
        observability.add_count("ThrottledRequests")
        error = RateThrottledError(f"Request rate exceeded for {what} ({limit.rate:g} "
                                   "requests per second); retry with backoff.")
        local = self._buckets.get(bucket)
        if local is not None:
            error.retry_after_s = max(0.0, (local.refused_until_us - now_us) / 1_000_000)
        return error

    def _spend(self, bucket: str, limit: Limit, now_us: int) -> bool:
        """Spend one token of the local lease, taking a new lease when it is gone."""
        local = self._local(bucket, now_us)
        with local.lock:
            if local.lease.live(now_us):
                local.lease = local.lease.spend()
                return True
            self._give_back(bucket, limit, local, now_us)
            if now_us < local.open_until_us:
                return True
            if now_us < local.refused_until_us:
                return False
            observability.add_count("ThrottleLeases")
            try:
                grant = self._store.take(bucket, limit, now_us, limit.lease_size, local.tat_us)
            except StoreError:
                logger.warning("throttle bucket %s unavailable; requests pass for now", bucket,
                               exc_info=True)
                local.open_until_us = now_us + FAULT_PAUSE_US
                return True
            local.tat_us = grant.tat_us
            if grant.count < 1:
                local.refused_until_us = throttling.next_token_us(limit, grant.tat_us, now_us)
                return False
            local.lease = throttling.new_lease(grant.count, now_us).spend()
            return True

    def _give_back(self, bucket: str, limit: Limit, local: _Local, now_us: int) -> None:
        """Return an expired lease's unspent tokens to the shared bucket (best effort)."""
        unspent = local.lease.unspent(now_us)
        local.lease = EMPTY_LEASE
        if unspent:
            try:
                self._store.give_back(bucket, limit, now_us, unspent)
            except StoreError:
                logger.warning("could not give %d tokens back to %s", unspent, bucket,
                               exc_info=True)

    def _refund(self, bucket: str) -> None:
        """Put a token spent on a request that was refused anyway back into the lease."""
        local = self._buckets.get(bucket)
        if local is not None:
            with local.lock:
                local.lease = Lease(local.lease.tokens + 1, local.lease.expires_us)

    def _local(self, bucket: str, now_us: int) -> _Local:
        with self._lock:
            local = self._buckets.get(bucket)
            if local is None:
                if len(self._buckets) >= MAX_LOCAL_BUCKETS:
                    self._forget_idle(now_us)
                local = self._buckets[bucket] = _Local()
            return local

    def _forget_idle(self, now_us: int) -> None:
        """Drop the buckets with nothing live in them (called under the lock)."""
        for name in [n for n, b in self._buckets.items() if b.idle(now_us)]:
            del self._buckets[name]

    def local_buckets(self) -> int:
        """How many buckets this process keeps a view of."""
        with self._lock:
            return len(self._buckets)

    def leased(self, bucket: str) -> int:
        """The unspent tokens this process holds of a bucket (for tests and metrics)."""
        local = self._buckets.get(bucket)
        return local.lease.tokens if local is not None else 0
