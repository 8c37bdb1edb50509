"""Limits on failed sign-ins with a password (HTTP Basic: the web console, `GET /metrics`).

Failures are counted per access key id and per client address, separately. After
`DELAY_AFTER` failures of either, every further attempt must wait: 1 s, then twice as long
after each failure (at most `MAX_DELAY_S`); after `LOCK_AFTER` failures it waits
`LOCKOUT_S`. An attempt that comes too early is refused at once, without checking its
secret (so a guess made then tells nothing), and with the seconds to wait: nothing sleeps
in a request's thread. A success forgets the failures of its key and its address; an
hour without failures forgets them too. The table is bounded (`MAX_TRACKED` entries), so
failures sent under ever new names cannot fill the memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DELAY_AFTER = 5
LOCK_AFTER = 20
MAX_DELAY_S = 60.0
LOCKOUT_S = 15 * 60.0
FORGET_S = 3600.0
MAX_TRACKED = 10_000


@dataclass
class _Failures:
    count: int = 0
    last_s: float = 0.0
    blocked_until_s: float = 0.0


def wait_after(failures: int) -> float:
    """How long the next attempt waits after this many failures in a row."""
    if failures >= LOCK_AFTER:
        return LOCKOUT_S
    if failures >= DELAY_AFTER:
        return min(2.0 ** (failures - DELAY_AFTER), MAX_DELAY_S)
    return 0.0


class SignInLimits:
    """The failed sign-ins of one process (thread-safe)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._failures: dict[tuple[str, str], _Failures] = {}

    @staticmethod
    def _keys(key_id: str, client: str) -> list[tuple[str, str]]:
        return [("key", key_id), *([("client", client)] if client else [])]

    def retry_after(self, key_id: str, client: str) -> int:
        """0 when an attempt may be made now, else the whole seconds to wait."""
        now = self._now()
        with self._lock:
            until = max((self._failures[k].blocked_until_s for k in self._keys(key_id, client)
                         if k in self._failures), default=0.0)
        return max(0, math.ceil(until - now))

    def failed(self, key_id: str, client: str) -> None:
        """Count a failed attempt of the key from the address."""
        now = self._now()
        with self._lock:
            for key in self._keys(key_id, client):
                found = self._failures.get(key)
                if found is None or now - found.last_s >= FORGET_S:
                    found = self._failures[key] = _Failures()
                found.count += 1
                found.last_s = now
                found.blocked_until_s = now + wait_after(found.count)
            if len(self._failures) > MAX_TRACKED:
                self._prune(now)

    def succeeded(self, key_id: str, client: str) -> None:
        """Forget the failures of the key and of the address."""
        with self._lock:
            for key in self._keys(key_id, client):
                self._failures.pop(key, None)

    def _prune(self, now: float) -> None:
        """Forget what is old, then (still too many) the entries idle the longest."""
        for key in [k for k, f in self._failures.items() if now - f.last_s >= FORGET_S]:
            del self._failures[key]
        excess = len(self._failures) - MAX_TRACKED
        if excess > 0:
            oldest = sorted(self._failures, key=lambda k: self._failures[k].last_s)[:excess]
            for key in oldest:
                del self._failures[key]
