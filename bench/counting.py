"""DMQ's DynamoDB requests, as its local server counts them (`GET /_dmq/dynamodb-calls`,
served when it runs with DMQ_COUNT_DYNAMODB=1)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

PATH = "/_dmq/dynamodb-calls"


@dataclass(frozen=True)
class DynamoSnapshot:
    """Cumulative DynamoDB figures at one moment; subtract two to get a phase's share."""

    calls: dict[str, int] = field(default_factory=dict)
    # Requests per table and operation (a request naming several tables counts for each).
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    items_returned: int = 0
    items_scanned: int = 0

    @property
    def total_calls(self) -> int:
        """Every request, whatever its operation."""
        return sum(self.calls.values())

    def __sub__(self, earlier: DynamoSnapshot) -> DynamoSnapshot:
        return self._combine(earlier, -1)

    def __add__(self, other: DynamoSnapshot) -> DynamoSnapshot:
        return self._combine(other, 1)

    def _combine(self, other: DynamoSnapshot, sign: int) -> DynamoSnapshot:
        def merge(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
            values = {k: mine.get(k, 0) + sign * theirs.get(k, 0)
                      for k in sorted(set(mine) | set(theirs))}
            return {k: v for k, v in values.items() if v}

        names = sorted(set(self.tables) | set(other.tables))
        tables = {t: merge(self.tables.get(t, {}), other.tables.get(t, {})) for t in names}
        return DynamoSnapshot(
            calls=merge(self.calls, other.calls),
            tables={t: ops for t, ops in tables.items() if ops},
            errors=merge(self.errors, other.errors),
            seconds=merge(self.seconds, other.seconds),
            items_returned=self.items_returned + sign * other.items_returned,
            items_scanned=self.items_scanned + sign * other.items_scanned,
        )


class Counter(Protocol):
    """Where a phase reads DynamoDB figures before and after it runs."""

    def snapshot(self) -> DynamoSnapshot:
        """The cumulative figures now."""


class RemoteCounter:
    """Reads the counts a DMQ server keeps of its own DynamoDB requests."""

    def __init__(self, endpoint: str) -> None:
        self.url = endpoint.rstrip("/") + PATH

    def snapshot(self) -> DynamoSnapshot:
        """The server's cumulative figures now."""
        with urllib.request.urlopen(self.url, timeout=30) as response:
            data = json.loads(response.read())
        return DynamoSnapshot(
            calls={k: int(v) for k, v in data["calls"].items()},
            tables={t: {k: int(v) for k, v in ops.items()}
                    for t, ops in data.get("tables", {}).items()},
            errors={k: int(v) for k, v in data["errors"].items()},
            seconds={k: float(v) for k, v in data["seconds"].items()},
            items_returned=int(data["items_returned"]),
            items_scanned=int(data["items_scanned"]),
        )


class NoCounter:
    """For a server that is not DMQ (moto): nothing is counted."""

    def snapshot(self) -> DynamoSnapshot:
        """Always empty."""
        return DynamoSnapshot()
