"""GIVEN the benchmark and the soak in small sizes WHEN they run against moto's SQS server
and DMQ on its default store THEN every figure is measured and judged, the DynamoDB counts
come from inside DMQ, and the soak writes its page and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import run, soak

FIGURES = (
    "lifecycle messages/s", "DynamoDB requests per message", "SendMessage p50 ms",
    "ReceiveMessage(1) p50 ms", "DeleteMessage p50 ms", "ReceiveMessage(10) p50 ms, backlog 60",
    "GetQueueAttributes(All) p50 ms, backlog 200", "RSS MiB", "warm start s",
)


def test_quick_bench_measures_and_judges_every_figure(tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    figures = run.bench([
        "--quick", "--moto-messages", "20", "--dmq-messages", "60", "--single-calls", "5",
        "--receives", "5", "--backlogs", "20,60", "--attribute-backlogs", "20,200",
        "--attribute-calls", "5", "--floor-messages", "80", "--floor-calls", "5",
        "--settle-timeout", "10", "--output", str(output),
    ])

    for name in ("moto", "dmq"):
        lifecycle = figures.lifecycle[name]
        assert lifecycle.sent == lifecycle.delivered == lifecycle.messages
        assert lifecycle.messages_per_s > 0
        assert figures.single_ops[name].send.count == 5
    dmq = figures.lifecycle["dmq"]
    # moto's receive is not atomic across its server's threads, so two consumers can
    # both get one message (the page reports moto's duplicates); DMQ's claim is a
    # conditional write and must never hand a message out twice while it is invisible.
    assert dmq.duplicates == 0
    # counted inside DMQ: the batch sends (each one transaction of conditional puts, the
    # SDK sending an invocation id: docs/request-dedup.md) and the claims
    assert dmq.dynamodb_calls.get("TransactWriteItems", 0) >= 6
    assert 0 < dmq.dynamodb_requests_per_message < 10
    assert figures.lifecycle["moto"].dynamodb_calls == {}
    assert [a.preloaded for a in figures.attributes] == [20, 200]
    assert figures.attributes[-1].visible_reported == 200
    assert 0 < figures.rss_mib < 4096 and 0 < figures.warm_start_s < 60
    for name in FIGURES:
        row = figures.row(name)
        assert row.dmq is not None and row.dmq > 0, row
        assert row.target == "-" or row.passed is not None, row
    assert figures.row("lifecycle messages/s").moto is not None

    floor = figures.floor
    assert floor is not None and floor.messages == 80 and floor.messages_per_s > 0
    assert floor.store_cpu_ms_per_message > 0 and floor.client_cpu_ms_per_message > 0
    assert floor.send.count == floor.receive.count == 5 and floor.delete.count == 5
    assert all(b.settle_seconds <= 15 for b in figures.backlog)

    page = output.with_suffix(".md").read_text()
    assert "**The store's floor.**" in page and "DeleteMessage: conditional DeleteItem" in page
    assert "DMQ's batched lifecycle against the floor, in the same run:" in page
    assert "| DMQ / store (target <= 2x) |" in page
    assert "| figure | moto | DMQ | ratio | target | PASS/FAIL |" in page
    assert all(name in page for name in FIGURES)
    saved = json.loads(output.read_text())
    assert saved["lifecycle"]["dmq"]["delivered"] == 60
    assert len(saved["rows"]) == len(figures.rows)


# A sample every 5 s for 20 s: beside the other tests' load, samples came late enough that
# only 3 fitted. `make test` runs it with the quiet tests, alone.
@pytest.mark.quiet
def test_short_soak_samples_latency_memory_and_depth(tmp_path: Path) -> None:
    figures = soak.soak(["--duration", "20", "--interval", "5", "--output-dir", str(tmp_path),
                         "--json", str(tmp_path / "soak.json")])

    assert 4 <= len(figures.samples) <= 5
    assert all(s.rss_mib > 0 and s.depth >= 0 for s in figures.samples)
    assert figures.deleted > 0 and figures.errors == 0
    assert figures.samples[-1].p99_ms["SendMessageBatch"] > 0
    verdict = figures.verdict
    assert set(verdict["first_p99_ms"]) == set(soak.OPERATIONS)  # type: ignore[arg-type]
    assert isinstance(verdict["flat"], bool)
    page = (tmp_path / "soak.md").read_text()
    assert "Verdict:" in page and "RSS MiB" in page and "MiB per hour" in page
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "soak.json").read_text())["samples"]
