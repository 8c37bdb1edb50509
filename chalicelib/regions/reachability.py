"""Which regions are reachable. On AWS a region fails by itself; locally an admin marks one
down to simulate that, and every path into the region (requests, forwarding, replication,
heartbeats, the stream pump) sees it through this one registry."""

from __future__ import annotations

import threading

from chalicelib.domain.exceptions import StoreUnavailableError


class RegionDownError(StoreUnavailableError):
    """The region cannot be reached."""


class RegionHealth:
    """The set of regions marked down."""

    def __init__(self) -> None:
        self._down: set[str] = set()
        self._returns: dict[str, int] = {}
        self._lock = threading.Lock()

    def up(self, region: str) -> bool:
        """True unless the region is marked down."""
        with self._lock:
            return region not in self._down

    def check(self, region: str) -> None:
        """Raise RegionDownError when the region is marked down."""
        if not self.up(region):
            raise RegionDownError(f"Region {region} is unavailable.")

    def mark(self, region: str, up: bool) -> None:
        """Mark a region up or down."""
        with self._lock:
            if up:
                if region in self._down:
                    self._returns[region] = self._returns.get(region, 0) + 1
                self._down.discard(region)
            else:
                self._down.add(region)

    def returns(self, region: str) -> int:
        """How many times the region came back up: a region that was away, however
        briefly, missed what others wrote into it meanwhile (their heartbeats)."""
        with self._lock:
            return self._returns.get(region, 0)

    def down_regions(self) -> list[str]:
        """The regions marked down."""
        with self._lock:
            return sorted(self._down)
