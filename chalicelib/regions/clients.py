"""Regions opened for clients: where any region is served (the local server), a request
signed for a region outside the deployment opens that region as a namespace of its own.

Opening a region runs the opener the local server installed (it provisions the region's
tables and starts its back-end work) once, under a lock, so concurrent first requests
wait for one opening instead of racing it; a failed opening is tried again by the next
request. At most `MAX_CLIENT_REGIONS` are opened, so a client cannot make the server
create tables without end. The deployment's own regions (DMQ_REGIONS) are never opened
here: they replicate, fail over and are provisioned at start; a client region replicates
nowhere.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from chalicelib.service.exceptions import ServiceUnavailableError, SignatureDoesNotMatchError

logger = logging.getLogger("dmq.regions")
MAX_CLIENT_REGIONS = 32

Opener = Callable[[str], None]


class ClientRegions:
    """The client regions opened so far, and how to open another."""

    def __init__(self, opener: Opener | None = None, limit: int = MAX_CLIENT_REGIONS) -> None:
        self._opener = opener
        self._limit = limit
        self._lock = threading.Lock()
        self._opened: tuple[str, ...] = ()

    @property
    def can_open(self) -> bool:
        """True when an opener is installed."""
        return self._opener is not None

    @property
    def opened(self) -> tuple[str, ...]:
        """The client regions opened, in the order they were."""
        return self._opened

    def close(self) -> None:
        """Open no more regions (the server stops); waits for an opening under way."""
        with self._lock:
            self._opener = None

    def open(self, region: str) -> None:
        """Open a region once (the caller checked its name); SignatureDoesNotMatch when
        no opener is installed or the limit is reached, ServiceUnavailable when the
        opening failed (the next request tries again)."""
        if region in self._opened:  # the common case: no lock
            return
        with self._lock:
            if region in self._opened:
                return
            opener = self._opener
            if opener is None:
                raise SignatureDoesNotMatchError(
                    f"Credential should be scoped to a valid region, not '{region}'. ")
            if len(self._opened) >= self._limit:
                raise SignatureDoesNotMatchError(
                    f"Credential should be scoped to a valid region, not '{region}'. This "
                    f"DMQ serves at most {self._limit} regions besides its own.")
            try:
                opener(region)
            except Exception as exc:
                logger.warning("opening region %s failed: %s", region, exc, exc_info=True)
                raise ServiceUnavailableError(
                    f"The region {region} could not be prepared; try again.") from exc
            self._opened = (*self._opened, region)
            logger.info("serving region %s, opened for a client", region)
