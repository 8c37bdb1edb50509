"""The authentication benchmark's in-process figure and its table (the server runs are
`make bench`'s)."""

from __future__ import annotations

from bench.auth import AuthFigures, ModeResult, markdown, measure_verification
from bench.timing import Latency


def test_verification_is_timed_and_reported() -> None:
    micros = measure_verification(50)
    assert 0 < micros < 100_000  # a verification succeeded (it asserts) and was timed
    latency = Latency(10, 1.5, 3.0, 4.0)
    table = markdown(AuthFigures(10, [ModeResult("open", latency, latency),
                                      ModeResult("required", latency, latency)], micros))
    assert "| open | 1.5 / 3.0 | 1.5 / 3.0 |" in table
    assert "| required |" in table and f"p50 {micros} µs" in table
