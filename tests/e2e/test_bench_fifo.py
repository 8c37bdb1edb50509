"""GIVEN the FIFO benchmark in small sizes WHEN it runs against DMQ on its default store
THEN each of its three runs delivers every message once, in group order, and reports
messages per second and DynamoDB requests per message counted inside DMQ."""

from __future__ import annotations

from typing import Any

from bench import fifo


def test_fifo_bench_measures_three_runs(capsys: Any) -> None:
    results = fifo.main(["--messages", "60", "--producers", "2", "--consumers", "2"])
    assert [r.label for r in results] == ["1 group", "10 groups",
                                          "100 groups, high throughput"]
    for result in results:
        assert result.delivered == result.messages == 60
        assert result.duplicates == 0 and result.out_of_order == 0
        assert result.messages_per_s > 0
        assert result.calls.get("TransactWriteItems", 0) > 0  # counted inside DMQ
        assert 0 < result.requests_per_message < 20
    printed = capsys.readouterr().out
    assert "| FIFO run | messages | messages/s | DynamoDB requests per message |" in printed
    assert "| 100 groups, high throughput | 60/60 |" in printed
