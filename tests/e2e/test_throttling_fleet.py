"""GIVEN four DMQ servers (`python -m dmqlocal`) over one DynamoDB Local, throttling one
queue and the account WHEN clients of every server send more than the rate THEN the
servers together serve the configured rate within 10%, each serving part of it, and the
rest is refused as RequestThrottled (which the clients see over real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.servers import Server
from bench.sqs import sqs_client
from bench.throttle import fleet, measure

SERVERS = 4
QUEUE_RATE, ACCOUNT_RATE = 10.0, 20.0
# Small buckets, so that the clients spend the initial burst at once; the window opens at
# the first RequestThrottled (WARMUP is the longest wait for it).
QUEUE_BURST, ACCOUNT_BURST = 2, 4
SECONDS, WARMUP, THREADS = 4.0, 5.0, 3
QUEUES = 6  # their queue buckets (6 x 10/s) together exceed the account's 20/s

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    env = {"DMQ_THROTTLE_QUEUE_RPS": f"{QUEUE_RATE:g}",
           "DMQ_THROTTLE_ACCOUNT_RPS": f"{ACCOUNT_RATE:g}",
           "DMQ_THROTTLE_QUEUE_BURST": str(QUEUE_BURST),
           "DMQ_THROTTLE_ACCOUNT_BURST": str(ACCOUNT_BURST)}
    with fleet(SERVERS, env, Path(tmp_path_factory.mktemp("throttle-fleet"))) as running:
        yield running
    for server in running:
        assert server.process.returncode == 0, "".join(server.tail)


@pytest.fixture(scope="module")
def queue_urls(servers: list[Server]) -> list[str]:
    admin: Any = sqs_client(servers[0].url, 1, read_timeout=10, attempts=10)
    return [admin.create_queue(QueueName=f"fleet-{n}")["QueueUrl"] for n in range(QUEUES)]


def _check(result: Any) -> None:
    print(result.line())
    # the clients asked for more than the rate, so the rate is what the throttle allowed
    assert result.throttled > 0
    assert result.other_errors == 0
    assert abs(result.deviation) <= 0.10, result.line()
    # the rate is shared: every server served part of it
    assert all(served > 0 for served in result.per_server), result.per_server


def test_four_servers_hold_a_queues_rate(servers: list[Server], queue_urls: list[str]) -> None:
    _check(measure([s.url for s in servers], queue_urls[:1], QUEUE_RATE, SECONDS, WARMUP,
                   THREADS, "per queue"))


def test_four_servers_hold_the_accounts_rate(servers: list[Server],
                                             queue_urls: list[str]) -> None:
    _check(measure([s.url for s in servers], queue_urls, ACCOUNT_RATE, SECONDS, WARMUP,
                   THREADS, "per account"))
