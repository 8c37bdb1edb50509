"""Counts a DynamoDB client's requests in a test, as the local server counts them for the
benchmark, with snapshots that subtract."""

from __future__ import annotations

from typing import Any

from bench.counting import DynamoSnapshot
from dmqlocal.counting import CallCounter


class DynamoCounter:
    """The local server's request counter on clients of the test's choosing."""

    def __init__(self) -> None:
        self._counter = CallCounter()

    def attach(self, client: Any) -> None:
        """Count the requests of a botocore DynamoDB client."""
        self._counter.attach(client)

    def detach(self) -> None:
        """Stop counting."""
        self._counter.detach()

    def snapshot(self) -> DynamoSnapshot:
        """The figures so far."""
        return DynamoSnapshot(**self._counter.snapshot())
