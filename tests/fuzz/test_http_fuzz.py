"""GIVEN thousands of hostile requests drawn from botocore's SQS model (mutated members,
raw bytes, HTTP framing) WHEN they reach the real local server over raw sockets THEN every
answer is a well-formed HTTP response below 500, in the SQS error shape when not a 200,
and the server logs no unexpected error.

The seed is fixed (DMQ_FUZZ_SEED changes it); a failure names the seed and case index,
and `bench.fuzz_cases.Generator(seed).case(index)` rebuilds the request.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bench.fuzz import fuzz, server_faults, start_server
from bench.servers import Server

SEED = int(os.environ.get("DMQ_FUZZ_SEED", "20261124"))
CASES = 4000


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """DMQ on its in-memory store (fast); the default store is fuzzed in tests/e2e."""
    server = start_server("memory", tmp_path_factory.mktemp("dmq-fuzz"),
                          {"DMQ_HTTP_REQUEST_TIMEOUT_S": "5"})
    yield server
    server.stop()


def test_no_request_gets_a_5xx_or_a_malformed_answer(memory_server: Server) -> None:
    report = fuzz(memory_server.url, SEED, CASES, workers=4)
    print("\n" + report.histogram())
    assert report.cases == CASES
    assert not report.failures, "\n".join(report.failures[:10])
    assert not server_faults("".join(memory_server.tail)), "".join(memory_server.tail)[-5000:]
    # THEN the cases reached every layer: framing, parsing, validation and served actions
    codes = {status.split(" ", 1)[-1] for status in report.statuses}
    assert {"200", "MalformedHttpRequestException", "SerializationException",
            "InvalidParameterValue", "InvalidAction"} <= codes
    assert sum(n for s, n in report.statuses.items() if s == "200") > CASES * 0.03
