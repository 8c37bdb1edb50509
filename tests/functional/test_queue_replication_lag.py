"""GIVEN a queue replicated from us-east-1 to eu-west-1 WHEN the stream handler applies
its sends THEN the queue's replication lag is kept for `GET /metrics` and printed as an
EMF document with the dimensions Account, Queue and TargetRegion."""

from __future__ import annotations

from typing import Any

import pytest

from app import runtime
from chalicelib import observability
from dmqlocal.metrics import MetricsEndpoint
from dmqlocal.pump import StreamPump
from tests.functional.test_observability import assert_valid_emf, json_lines
from tests.functional.test_replication import (  # noqa: F401 - the two-region fixtures
    ACCOUNT,
    REPLICA,
    _pump,
    _replicated_queue,
    _send,
    clock,
    home,
    pumps,
    regions,
    settings,
)


def test_a_queues_replication_lag_is_kept_and_printed_per_target_region(
    home: Any, pumps: dict[str, StreamPump], capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    observability.configure(json_logs=False, emit_metrics=True)
    try:
        url = _replicated_queue(home, "lagging")
        _send(home, url, 3)
        capsys.readouterr()
        _pump(pumps)
        out = capsys.readouterr().out
    finally:
        observability.configure(json_logs=False, emit_metrics=False)
    lag = observability.queue_replication_lags()[(ACCOUNT, "lagging", REPLICA)]
    assert 0 <= lag < 60_000
    _, _, text = MetricsEndpoint(runtime, cache_s=0).respond()
    series = (f'dmq_queue_replication_lag_seconds{{account="{ACCOUNT}",queue="lagging",'
              f'target_region="{REPLICA}"}} {lag / 1000}')
    assert series in text.decode().splitlines()
    documents = [d for d in json_lines(out) if d.get("Queue") == "lagging"
                 and "QueueReplicationLagMs" in d]
    assert documents, out
    for document in documents:
        assert_valid_emf(document)
        assert (document["Account"], document["TargetRegion"]) == (ACCOUNT, REPLICA)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        assert sorted(directive["Dimensions"][0]) == ["Account", "Queue", "TargetRegion",
                                                      "service"]


def test_queue_lags_take_each_queues_largest_and_leave_out_queue_records() -> None:
    from chalicelib.regions.replication import queue_lags

    def record(keys: dict[str, Any], created_s: float | None) -> dict[str, Any]:
        data: dict[str, Any] = {"Keys": keys}
        if created_s is not None:
            data["ApproximateCreationDateTime"] = created_s
        return {"dynamodb": data}

    batch = [record({"pk": {"S": "1/a#0"}, "sk": {"S": "m1"}}, 100.0),
             record({"pk": {"S": "1/a#1"}, "sk": {"S": "m2"}}, 98.5),
             record({"pk": {"S": "1/b#0"}, "sk": {"S": "m3"}}, 101.0),
             record({"pk": {"S": "1/c#0"}, "sk": {"S": "m4"}}, None),
             record({"queue_id": {"S": "1/d"}}, 90.0)]
    assert queue_lags(batch, 101_000) == {"1/a": 2500, "1/b": 0}
