"""GIVEN the benchmark in its quick mode WHEN it runs against a local DMQ over HTTP
THEN every message is delivered once, the DynamoDB calls are counted, and a receive
reads no more than about twice what it returns at every backlog."""

from __future__ import annotations

import json
from pathlib import Path

from bench import run


def test_quick_bench_measures_a_lossless_run(tmp_path: Path) -> None:
    output = tmp_path / "bench.json"
    figures = run.bench([
        "--quick", "--messages", "120", "--receives", "10", "--backlogs", "0,40",
        "--shards", "1,4", "--shard-messages", "40", "--output", str(output),
    ])

    t = figures.throughput
    assert t.sent == t.delivered == 120
    assert t.duplicates == 0 and t.failed_sends == 0 and t.failed_deletes == 0
    assert t.messages_per_s > 0
    assert t.send_batch.count >= 12 and t.delete_batch.count >= 1
    assert t.dynamodb_calls.get("BatchWriteItem", 0) >= 12  # sends are batched
    assert 0 < t.dynamodb_requests_per_message < 10

    empty, loaded = figures.backlog
    assert empty.backlog == 0 and empty.returned == 0 and empty.items_read == 0
    assert loaded.preloaded == 40 and loaded.returned == 10 * 10
    assert loaded.items_read_per_returned is not None
    assert loaded.items_read_per_returned <= 2.0
    assert figures.criteria.items_read_within_twice_returned

    assert [r.shards for r in figures.shards] == [1, 4]
    for shard_run in figures.shards:
        assert shard_run.throughput.sent == shard_run.throughput.delivered == 40
        assert shard_run.throughput.duplicates == 0
        assert shard_run.first_empty_receive_requests <= 2 * shard_run.shards
        assert shard_run.empty_receive_requests < shard_run.first_empty_receive_requests
    assert set(figures.criteria.requests_per_message_by_shards) == {1, 4}

    saved = json.loads(output.read_text())
    assert saved["throughput"]["delivered"] == 120
    assert [b["backlog"] for b in saved["backlog"]] == [0, 40]
