"""GIVEN the real local server (DynamoDB Local) WHEN boto3 sends with MessageGroupId to a
standard queue THEN DMQ answers as SQS fair queues do, a noisy tenant's backlog waits
behind the quiet tenants' messages, and the fair-queue benchmark runs and prints its figures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bench import fair


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                    **kwargs).get("Messages", []))


def test_group_ids_on_a_standard_queue_over_http(
    sqs: Any, unique_name: Callable[[str], str]
) -> None:
    url = sqs.create_queue(QueueName=unique_name("fair"))["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="one", MessageGroupId="tenant-1")
    assert "SequenceNumber" not in sent
    batch = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "two", "MessageGroupId": "tenant-2"},
        {"Id": "b", "MessageBody": "three", "MessageGroupId": "x" * 129},
    ])
    assert [e["Id"] for e in batch["Successful"]] == ["a"]
    assert batch["Failed"][0]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="bad", MessageGroupId="no spaces")
    assert caught.value.response["Error"]["Message"] == (
        "Value no spaces for parameter MessageGroupId is invalid. Reason: MessageGroupId can "
        "only include alphanumeric and punctuation characters. 1 to 128 in length.")
    got: list[dict[str, Any]] = []
    for _ in range(5):
        got += _receive(sqs, url, MessageSystemAttributeNames=["MessageGroupId"])
        if len(got) >= 2:
            break
    assert {m["Body"]: m["Attributes"]["MessageGroupId"] for m in got} == {
        "one": "tenant-1", "two": "tenant-2"}


def test_a_noisy_tenant_waits_behind_quiet_ones_over_http(
    sqs: Any, unique_name: Callable[[str], str]
) -> None:
    # GIVEN two quiet tenants, a flood of 150 from a third, then one more quiet message
    url = sqs.create_queue(QueueName=unique_name("fair-flood"))["QueueUrl"]
    for tenant in ("q1", "q2"):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{tenant}-{i}", "MessageGroupId": tenant}
            for i in range(5)])
    for start in range(0, 150, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"flood-{start + i}", "MessageGroupId": "flood"}
            for i in range(10)])
    sqs.send_message(QueueUrl=url, MessageBody="q1-late", MessageGroupId="q1")
    # WHEN it is drained THEN the late quiet message comes long before the flood's end
    order: list[str] = []
    for _ in range(40):
        got = _receive(sqs, url)
        if not got:
            break
        order += [m["Body"] for m in got]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    assert sorted(order) == sorted([f"q{t}-{i}" for t in (1, 2) for i in range(5)]
                                   + [f"flood-{i}" for i in range(150)] + ["q1-late"])
    assert order.index("q1-late") < 60


def test_the_fair_queue_benchmark_runs_and_prints_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "fair.json"
    assert fair.main(["--quick", "--seconds", "1", "--flood-seconds", "0.5",
                      "--json", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "### Fair queues" in printed
    for run in ("no-flood", "flood-fair", "flood-unfair"):
        assert f"| {run} |" in printed
    assert "quiet p99 with the flood, fair queues on:" in printed
    figures = json.loads(output.read_text())
    assert [r["name"] for r in figures["runs"]] == ["no-flood", "flood-fair", "flood-unfair"]
    assert [r["fair_queues"] for r in figures["runs"]] == [True, True, False]
    for run in figures["runs"]:
        assert run["quiet_sent"] == run["quiet_received"] > 0
        assert 0 < run["dwell_ms_p50"] <= run["dwell_ms_p99"] <= run["dwell_ms_max"]
    assert figures["runs"][0]["flood_sent"] == 0 < figures["runs"][1]["flood_sent"]
    assert set(figures["summary"]) == {"fair_over_no_flood", "unfair_over_no_flood",
                                       "fair_within_2x", "unfair_over_10x"}
