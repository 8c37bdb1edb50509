"""GIVEN the shared server on the default store (DynamoDB Local) WHEN fuzz cases drawn from
botocore's SQS model reach it THEN no answer is a 5xx or malformed (see tests/fuzz for the
larger run on the in-memory store; the session fixture fails on any logged traceback)."""

from __future__ import annotations

import os

from bench.fuzz import fuzz

SEED = int(os.environ.get("DMQ_FUZZ_SEED", "20261124")) + 1
CASES = 1000


def test_the_default_store_never_answers_a_5xx_to_fuzzed_requests(dmq_url: str) -> None:
    report = fuzz(dmq_url, SEED, CASES, workers=4)
    print("\n" + report.histogram())
    assert report.cases == CASES
    assert not report.failures, "\n".join(report.failures[:10])
    assert any(status == "200" for status in report.statuses)
