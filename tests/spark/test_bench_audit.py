"""GIVEN the audit benchmark's synthetic events WHEN the audit runs over them THEN it
finds what the generator planted: nothing lost, nothing duplicated, FIFO in order."""

from __future__ import annotations

from typing import Any

from bench import audit


def test_the_audit_bench_runs_clean_on_its_own_events(spark: Any) -> None:
    figures = audit.measure(spark, 4_000)
    assert figures["events"] > 3_000
    assert figures["messages"] > 1_000
    assert (figures["lost"], figures["duplicates"], figures["fifo_violations"]) == (0, 0, 0)
