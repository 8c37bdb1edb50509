"""Provisions a region's tables again when the store lost them.

A store can come back empty while DMQ runs: an external DynamoDB Local restarted over a
wiped data folder, or tables deleted by hand. Every request would then fail with
ResourceNotFoundException until DMQ restarted, since tables are created at start. The
watch lists each region's tables (one ListTables call) as soon as a client it watches
is told a table is not found, and on a slow timer otherwise (clients it does not watch,
such as PynamoDB's, are covered by the timer), so an idle server does not list tables
every few seconds; when one is missing it runs the region's provisioning again and tells
the runtime to forget what it knew about the store (cached queue records, the epoch).
The stream pump finds the new streams by itself. On AWS the tables belong to the stack,
so only the local runner watches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger("dmq.local")


@dataclass(frozen=True)
class RegionTables:
    """What one region needs: its tables, and how to create the missing ones."""

    region: str
    dynamodb: DynamoDBClient
    tables: tuple[str, ...]
    provision: Callable[[], None]


class TableWatch:
    """Checks every `interval_s`, and soon after a watched client met a missing table,
    that each region's tables exist; provisions them again (at most once per check and
    region) and calls `on_provisioned(region)` when not."""

    INTERVAL_S = 30.0
    MIN_GAP_S = 1.0  # at most one check a second, however many requests fail

    def __init__(self, regions: list[RegionTables], on_provisioned: Callable[[str], None],
                 interval_s: float = INTERVAL_S) -> None:
        self._regions = regions
        self._on_provisioned = on_provisioned
        self._interval = interval_s
        self._stop = threading.Event()
        self._soon = threading.Event()
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self.provisioned = 0

    def check_soon(self) -> None:
        """Check at once (within MIN_GAP_S of the last check)."""
        self._soon.set()

    def watch(self, client: Any) -> None:
        """Check soon whenever this botocore client is told a resource is not found."""
        if any(c is client for c in self._clients):
            return
        self._clients.append(client)
        client.meta.events.register("after-call", self._answered)

    def _answered(self, parsed: Any = None, **_: Any) -> None:
        error = parsed.get("Error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and error.get("Code") == "ResourceNotFoundException":
            self.check_soon()

    def start(self) -> None:
        """Watch in a background thread."""
        self._thread = threading.Thread(target=self._run, name="dmq-table-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (a check waiting on a frozen store is left to end by itself)."""
        self._stop.set()
        self._soon.set()
        for client in self._clients:
            client.meta.events.unregister("after-call", self._answered)
        self._clients.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def check_once(self) -> list[str]:
        """Check every region now; return the regions provisioned again."""
        done = []
        for region in self._regions:
            try:
                missing = sorted(set(region.tables) - _listed(region.dynamodb))
                if not missing:
                    continue
                logger.warning("the store of %s lost tables %s: provisioning them again",
                               region.region, ", ".join(missing))
                region.provision()
            except (BotoCoreError, ClientError) as exc:  # unreachable now: next check
                logger.warning("checking the tables of %s failed: %s", region.region, exc)
                continue
            self._on_provisioned(region.region)
            self.provisioned += 1
            done.append(region.region)
        return done

    def _run(self) -> None:
        while not self._stop.is_set():
            self._soon.wait(self._interval)
            if self._stop.is_set():
                return
            self._soon.clear()
            self.check_once()
            self._stop.wait(self.MIN_GAP_S)


def _listed(dynamodb: DynamoDBClient) -> set[str]:
    names: set[str] = set()
    for page in dynamodb.get_paginator("list_tables").paginate():
        names.update(page.get("TableNames", []))
    return names
